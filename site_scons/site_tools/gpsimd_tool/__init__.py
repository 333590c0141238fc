"""The SCons side of the ``gpsimd`` tool (``site_tools/gpsimd.py`` loads it).

==================  ==============================================================
module              holds
==================  ==============================================================
``graph``           ``env.GpsimdCollection``: the manifest's libraries as nodes
``builders``        the builders, their construction variables and emitters
``signature``       command signatures without SCons's substitution
``progress``        ``[done/total]`` in front of every action line; quiet mode
``summary``         the results summary printed when a build ends, the HTML report
``integrity``       outputs checked against the record of the last build
``lock``            one build per build folder
``manifest_cache``  the validated manifest, kept while its inputs hold
``signals``         SIGINT/SIGTERM reach every running action
``emu_server``      test runs forked by the build's emulator server
``ninja_path``      the same graph run by ninja (``--experimental=ninja``)
``scons``           what ``build.ninja`` runs to regenerate itself
==================  ==============================================================

These are the only modules of the project that import SCons.
"""
