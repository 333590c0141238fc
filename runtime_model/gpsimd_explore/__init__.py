"""gpsimd_explore: explore, a search for a failing input of each op of a
library with no vector written for it (``scons explore-<lib>``, the
pytest plugin's ``--gpsimd-explore``, ``gpsimd-import``'s probe).

An application of the device model: it draws inputs and runs each as a
vector through ``gpsimd_emu.session.LibrarySession``, so every check of
the emulator applies. The emulator never imports it; the build runs it as
a command (``python -m gpsimd_explore``), never imports it. Hypothesis
(the ``[explore]`` extra) is its search engine, imported only when a
search runs.

Modules: ``search`` (the command and the search of one op, and
``explore.json``, the record the report and the importer read),
``draw`` (the Hypothesis strategies of an op's tensors and scalars),
``example`` (the failing example as a vector to paste, and its ``.npy``),
``probe`` (each tensor's rank and dtype learned from the kernel's faults).
"""
