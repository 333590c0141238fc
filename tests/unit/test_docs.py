"""The README states facts the code defines; each is checked here against
its one definition, so that neither can change alone."""

import pathlib
import re

from gpsimd_build.profiles.host import HOST_CXXFLAGS

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_gives_the_default_compiler_flags():
    assert f"with `{' '.join(HOST_CXXFLAGS)}`" in README



def _setup_commands():
    """The ```sh blocks of README's "Set up and run" section."""
    section = README.split("## Set up and run", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.*?)\n```", section, re.S)


def test_readme_has_two_setup_commands_and_ci_runs_the_test_one():
    assert _setup_commands() == ["python3 -m pip install -e . && scons",
                                 "python3 -m pip install -e '.[test]' && python3 -m pytest -q"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert _setup_commands()[1] in ci

