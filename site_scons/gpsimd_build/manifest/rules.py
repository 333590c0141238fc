"""What the manifest language allows: dtypes, argument types, the limits
of a library and its tensors, and the built-in defaults. Device facts come
from ``gpsimd_device`` (the headers); this module names them as the
manifest uses them. ``schema/ops.schema.json`` repeats some of them; tests
keep it equal to these.
"""

from typing import Dict, Tuple

from gpsimd_device import dtypes as _dtypes
from gpsimd_device import limits as _limits
from gpsimd_device import planinputs as _planinputs

#: The manifest format this module reads.
MANIFEST_VERSION = 1

#: Every dtype a tensor may have, by its numpy / ml_dtypes name, in the order
#: of the one dtype table (``gpsimd_host/dtypes.h``, read by
#: ``gpsimd_device.dtypes``); ``schema/ops.schema.json`` ``$defs.dtype.enum``
#: must equal it (a test checks).
DTYPES: Tuple[str, ...] = _dtypes.names()

#: Integer dtypes and their inclusive value ranges.
INTEGER_DTYPES: Dict[str, Tuple[int, int]] = _dtypes.INTEGER_RANGES

#: The three 8-bit float formats (ml_dtypes names).
FLOAT8_DTYPES: Tuple[str, ...] = tuple(d.name for d in _dtypes.DTYPES.values()
                                       if d.is_float and d.itemsize == 1)

#: Dtypes a scalar argument may travel as, and scalar argument types with
#: their default dtype (the plan's contract: ARCHITECTURE.md "The test plan").
SCALAR_DTYPES = _planinputs.SCALAR_DTYPES
SCALAR_ARG_TYPES = _planinputs.SCALAR_ARG_TYPES

#: Default (rtol, atol) of a vector by its output dtype (the dtype table).
DEFAULT_TOLERANCES: Dict[str, Tuple[float, float]] = _dtypes.TOLERANCES

#: Default launcher stack, bytes (STACK_SIZE of stack_switch.hpp, the Neuron SDK's build driver, build_custom_op.py).
DEFAULT_STACK_SIZE = _limits.DEFAULT_STACK_SIZE
#: Largest stack_size, bytes: "-DSTACK_SIZE=N up to 400 KB" (docs/kernel-api.md, Limits).
MAX_STACK_SIZE = _limits.MAX_STACK_SIZE
#: At most 10 functions per library (docs/kernel-api.md, Limits).
MAX_OPS_PER_LIBRARY = _limits.MAX_OPS_PER_LIBRARY
#: At most 8 dimensions per tensor (docs/kernel-api.md, Limits).
MAX_DIMS = _limits.MAX_DIMS
#: Each dimension of a tensor of rank 5..8 at most 65535 (docs/kernel-api.md, Limits).
MAX_DIM_SIZE = _limits.MAX_DIM_SIZE
#: Ranks up to 4 may have dimensions up to MAX_DIM_SIZE_4D (2**32 - 1).
MAX_DIMS_4D = _limits.MAX_DIMS_4D
MAX_DIM_SIZE_4D = _limits.MAX_DIM_SIZE_4D
#: Largest finite value of each floating-point dtype: a literal beyond it
#: would silently become an infinity.
FLOAT_MAX = _dtypes.FLOAT_MAX
#: Elements of one tensor: the descriptor's num_elem is a uint32
#: (the device ABI (gpsimd_host/abi.h), +32 HBM / +28 SBUF).
MAX_ELEMENTS = _limits.MAX_ELEMENTS
#: Deepest chain of ``include:`` (a guard, far beyond any real tree).
MAX_INCLUDE_DEPTH = 64
#: Longest path a manifest may write (characters; Linux's PATH_MAX). The
#: schema's ``$defs.path.maxLength`` equals it (a test checks).
MAX_PATH_CHARS = 4096
#: Longest op schema string (characters; 32 arguments with long names fit).
#: The schema's ``$defs.op.properties.schema.maxLength`` equals it.
MAX_SCHEMA_CHARS = 2048
#: Longest library, argument (and explore dimension) name, in characters:
#: the longest file name the build makes from them, explore's
#: ``<lib>.<op>.<12 hex>.<arg>.npy``, stays far below a file system's
#: 255-byte component limit. The schema's ``$defs.identifier.maxLength``
#: equals it.
MAX_NAME_CHARS = 64
#: Longest vector name (characters; the schema's vector ``name.maxLength``):
#: every result line and report row prints it.
MAX_VECTOR_NAME_CHARS = 128
#: Most problems reported for one manifest file; past it the file's checks
#: stop with one more line saying so (a generated file gone wrong can hold
#: thousands).
MAX_DIAGNOSTICS_PER_FILE = 1000
#: Library names the device reserves (docs/kernel-api.md, Limits).
RESERVED_LIBRARY_NAMES: Tuple[str, ...] = (_limits.RESERVED_LIBRARY_NAME,)

_FLOAT32_MAX = FLOAT_MAX["float32"]
