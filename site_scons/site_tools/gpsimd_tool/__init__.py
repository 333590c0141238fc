"""The SCons side of the ``gpsimd`` tool (``site_tools/gpsimd.py`` loads it).

======================  ==============================================================
module                  holds
======================  ==============================================================
``graph``               ``env.GpsimdCollection``: build folder, manifest, profile, records
``library_nodes``       each library's nodes: compiles, links, pack, tests, explore
``collection_targets``  the collection's targets (``digests``, ``all``...), ``-h``
``shapes_graph``        the shape-function nodes of a library with shape sources
``targets``             which libraries a command line names; the ``-h`` text
``sconsgraph``          the ``Graph`` interface the target profiles build with
``builders``            the builders, their construction variables and emitters
``options``             the build's options (``scons NAME=value``)
``cache``               a build cache keyed independently of where BUILD_DIR is
``collector``           the cyclic garbage collector, kept off the build graph
``inputs_record``       what each library's objects were built from (pytest plugin)
``signature``           command signatures without SCons's substitution
``progress``            ``[done/total]`` in front of every action line; quiet mode
``summary``             the results summary printed when a build ends, the HTML report
``integrity``           outputs checked against the record of the last build
``manifest_cache``      the validated manifest, kept while its inputs hold
``signals``             SIGINT/SIGTERM reach every running action
``emu_server``          test runs forked by the build's emulator server
``ninja_path``          the same graph run by ninja (``--experimental=ninja``)
``scons``               what ``build.ninja`` runs to regenerate itself
======================  ==============================================================

These are the only modules of the project that import SCons.
"""
