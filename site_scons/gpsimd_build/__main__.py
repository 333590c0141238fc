"""``python -m gpsimd_build <command>``: the build library's commands.

``import BUILD_PY [-o OUT]``: print (or write) a manifest for the
``custom_op.load(...)`` call of a torch-neuronx ``build.py``
(``gpsimd_build.importer``).
"""

import sys


def main(argv=None) -> int:
    """Dispatch to a command; the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("import",):
        print("usage: python -m gpsimd_build import path/to/build.py [-o ops.yaml]",
              file=sys.stderr)
        return 2
    from .importer import main as import_main
    return import_main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
