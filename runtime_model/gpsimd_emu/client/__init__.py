"""The emulator's client: the only part of ``gpsimd_emu`` the front ends
(the SCons tool, the build library, the pytest plugin) import, standard
library only (``tests/unit/test_layers.py`` checks both).

* ``protocol``: what a server and its clients agree on (names, messages,
  the environment variables that steer them);
* ``served``: test runs handed to the build's emulator server, the one
  path of both build paths (``hand_off``; a ninja step's ``run_step``);
* ``vectors``: one vector at a time in a process of its own
  (``VectorClient``, the pytest plugin's path) and a library's explore;
* ``process``: a child in a group of its own, tied to this process,
  bounded and ended whole (``tied_to_me``, ``run_group``).

Importing this package imports nothing; a ninja step imports
``served`` first thing (it and ``protocol`` cost no import time).
"""
