"""The emulator's client: the only part of ``gpsimd_emu`` the front ends
(the SCons tool, the build library, the pytest plugin) import, standard
library only (``tests/unit/test_layers.py`` checks both): ``protocol``,
``served``, ``vectors``, ``process`` (ARCHITECTURE.md "The map" says what
each holds). Importing this package imports nothing; a ninja step imports
``served`` first thing (it and ``protocol`` cost no import time).
"""
