"""The README states facts the code defines; each is checked here against
its one definition, so that neither can change alone."""

import pathlib

from gpsimd_build.profiles.host import HOST_CXXFLAGS

README = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_readme_gives_the_default_compiler_flags():
    assert f"with `{' '.join(HOST_CXXFLAGS)}`" in README

