"""The typed manifest model: frozen dataclasses (:class:`Collection` >
:class:`Library` > :class:`Op` > :class:`Vector` > :class:`TensorInput` /
:class:`ScalarInput`) with every default filled in, and every path a
normalised POSIX path relative to the root (the directory SCons runs in),
so a build does not depend on where the project sits.
"""

import zlib
from dataclasses import dataclass
from typing import Any, Optional, Tuple, Union

from gpsimd_device.plan import ExploreSpec

from ..diagnostics import DiagnosticError, Location
from ..opschema import OpSchema

class ManifestError(DiagnosticError):
    """The manifest cannot be used. ``diagnostics`` lists every problem found,
    sorted by (file, line, column); ``str()`` is one
    ``FILE:LINE:COL: $.path: message`` line per problem."""


@dataclass(frozen=True)
class Reference:
    """A reference function computing a vector's expected output.

    Exactly one of ``file`` (a ``.py`` file, POSIX path relative to the root)
    and ``module`` (a dotted, importable module name such as ``numpy``) is
    set; ``function`` names the function in it. It is called with the inputs
    in schema order and returns the expected array. ``imports``: the local
    modules it imports, transitively (root-relative paths, sorted;
    :func:`~gpsimd_build.manifest.imports.local_modules`): files a test
    depends on, as on ``file``.
    """

    file: Optional[str]
    module: Optional[str]
    function: str
    imports: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Random:
    """A random input's distribution, fully defaulted: ``uniform`` on
    [``low``, ``high``) (floats, default -1, 1), ``normal`` with ``mean`` /
    ``std`` (floats, default 0, 1) or ``integers`` on [``low``, ``high``)
    (ints, default 0, 10); the parameters of other distributions are None.
    ``seed`` is the manifest's or :func:`default_seed`."""

    distribution: str
    seed: int
    low: Optional[Union[int, float]] = None
    high: Optional[Union[int, float]] = None
    mean: Optional[float] = None
    std: Optional[float] = None


@dataclass(frozen=True)
class TensorInput:
    """A tensor input of a vector, for a ``Tensor`` argument named ``name``.

    Exactly one of ``random``, ``values``, ``npy`` (a path relative to the
    root) is set. ``dtype`` (one of :data:`DTYPES`) and ``shape`` (tuple of
    ints) are always set: with ``npy`` they are read from the file's header
    (``dtype`` from the manifest when the file holds raw bytes, as numpy saves
    ml_dtypes' bfloat16/fp8). ``random`` is fully defaulted: ``distribution``,
    ``seed`` and the distribution's parameters (``low``/``high`` floats for
    uniform, ``mean``/``std`` floats for normal, ``low``/``high`` ints for
    integers, high exclusive). ``values`` is the nested list as written.
    """

    name: str
    dtype: Optional[str]
    shape: Optional[Tuple[int, ...]]
    random: Optional[Random]
    values: Optional[list]
    npy: Optional[str]
    location: Location
    #: where the host places the tensor: "hbm" or "sbuf" (manifest key
    #: ``location``; abi.h storage arms, ARCHITECTURE.md "The device's marshalling").
    memory: str = "hbm"


@dataclass(frozen=True)
class ScalarInput:
    """A scalar input of a vector, for a ``Scalar``/``int``/``float``/
    ``long long`` argument named ``name``. ``dtype`` is one of
    :data:`SCALAR_DTYPES` (defaulted by :data:`SCALAR_ARG_TYPES`); ``value``
    is an ``int`` for an integer dtype and a ``float`` for float32."""

    name: str
    value: Union[int, float]
    dtype: str
    location: Location


@dataclass(frozen=True)
class Expected:
    """A vector's expected result: exactly one of ``reference``, ``values``
    (nested list, reshaped to the output shape) or ``npy`` (a path relative
    to the root)."""

    reference: Optional[Reference]
    values: Optional[list]
    npy: Optional[str]


@dataclass(frozen=True)
class Vector:
    """One test vector of an op.

    ``inputs`` has one :class:`TensorInput`/:class:`ScalarInput` per schema
    argument, in schema order. ``output_dtype`` is defaulted (vector, then
    op, then the first tensor input's dtype); ``output_shape`` is ``None``
    for "the shape of the expected array". ``rtol``/``atol`` are defaulted
    (vector, op, then :data:`DEFAULT_TOLERANCES` of the output dtype).
    In a library with shape sources the op's shape function gives the
    output when the vector runs: ``output_dtype``/``output_shape`` are then
    what the manifest says (None when it says nothing; the run checks them
    against the shape function), and so are ``rtol``/``atol`` (None: the
    output dtype's defaults). ``expected`` is None for a checks-only vector
    (every check runs, nothing is compared). ``location`` is where the
    vector's mapping starts.
    """

    name: str
    inputs: Tuple[Union["TensorInput", "ScalarInput"], ...]
    output_dtype: Optional[str]
    output_shape: Optional[Tuple[int, ...]]
    expected: Optional[Expected]
    rtol: Optional[float]
    atol: Optional[float]
    location: Location
    #: where the host places the output: "hbm" or "sbuf" (``output.location``).
    output_memory: str = "hbm"
    #: the output dtype was given nowhere: it is the first tensor input's
    output_dtype_defaulted: bool = False


@dataclass(frozen=True)
class Op:
    """One op of a library: ``name`` is the op name (what ``m.def``
    registers, torch calls and messages use), ``kernel`` the kernel
    function's C++ name (what the generated wrapper calls and
    ``get_func_name`` returns, ARCHITECTURE.md "The generated wrapper"; ``kernel:``, else
    the third argument of the op's ``m.def`` in the shape sources, else the
    op name; both shorter than 32 characters), ``schema`` the parsed
    schema, ``schema_text`` the schema as written or, when ``schema_derived``,
    as derived from the shape function, ``stack_size`` the launcher stack in
    bytes (default 4196), ``vectors`` its test vectors in manifest
    order. ``kernel_given``: the manifest wrote ``kernel:``. ``explore``:
    what ``scons explore`` draws (``gpsimd_device.plan.ExploreSpec``: the
    op's ``explore:`` keys over its defaults'), or None when none is set."""

    name: str
    schema: OpSchema
    schema_text: str
    stack_size: int
    vectors: Tuple[Vector, ...]
    location: Location
    kernel: str = ""
    schema_derived: bool = False
    kernel_given: bool = False
    explore: Optional[ExploreSpec] = None
    #: the op's ``reference:`` when it has no vectors (explore compares with
    #: it); an op with vectors carries it in each vector instead
    reference: Optional["Reference"] = None

    @property
    def function(self) -> str:
        """The kernel function's name (``kernel``, else the op name)."""
        return self.kernel or self.name


@dataclass(frozen=True)
class Library:
    """One custom-op library: ``sources``/``includes`` are POSIX paths
    relative to the root, ``cflags`` the extra compiler flags in order,
    ``ops`` 1..10 ops in registration order, ``manifest`` the path (relative
    to the root) of the manifest that declares it. ``shape_sources`` are
    the shape sources (root-relative; compiled for the host into the
    library's shape library, never into a core object), empty without
    them; ``namespace`` the name of their ``NEURON_LIBRARY`` as the loader
    read it (None without shape sources or when none was read)."""

    name: str
    multicore: bool
    sources: Tuple[str, ...]
    includes: Tuple[str, ...]
    cflags: Tuple[str, ...]
    ops: Tuple[Op, ...]
    location: Location
    manifest: str
    shape_sources: Tuple[str, ...] = ()
    namespace: Optional[str] = None


@dataclass(frozen=True)
class Collection:
    """A loaded collection: ``manifest`` the top manifest's path relative to
    the root (POSIX), ``libraries`` in collection order (each manifest's own
    libraries, then those of its includes, depth first), names unique across
    every file. ``manifests`` lists every manifest file read (the top one
    first, then each included one once, in load order), root-relative POSIX
    paths. ``reads`` lists every filesystem fact the validation depended on
    (:class:`~gpsimd_build.manifest.reads.Read`: manifests' digests, kinds,
    real paths, glob matches, ``.npy`` headers, reference files): a build
    that caches the model keeps it while
    :func:`~gpsimd_build.manifest.reads_still_hold` says they hold. It is
    about the load, not the model: not a field (``==``,
    ``dataclasses.asdict`` and ``replace`` leave it out)."""

    manifest: str
    libraries: Tuple[Library, ...]
    manifests: Tuple[str, ...] = ()

    @property
    def reads(self) -> Tuple[Any, ...]:
        """The filesystem facts the load depended on (see the class)."""
        return self.__dict__.get("_reads", ())

    def with_reads(self, reads: Tuple[Any, ...]) -> "Collection":
        """This collection, carrying ``reads`` (set once, by the loader)."""
        object.__setattr__(self, "_reads", tuple(reads))
        return self


def default_seed(library: str, op: str, vector: str, argument: str) -> int:
    """The seed of a random input without one: ``zlib.crc32`` of
    ``"library/op/vector/argument"`` (UTF-8), so it is stable across runs and
    machines and two inputs of one vector differ."""
    return zlib.crc32(f"{library}/{op}/{vector}/{argument}".encode("utf-8"))
