"""A monorepo collection (tests/monorepo/): a top manifest that includes three
team folders' manifests (``teams/*/ops.yaml``; vision also includes shared)
builds and passes end to end, and moving a team folder changes nothing in
the loaded model but paths."""
import dataclasses
import pathlib
import re
import shutil

import pytest

from conftest import action_lines, copy_project, run_scons
from gpsimd_build.manifest import Collection, load_manifest

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "monorepo"
TEAMS = ("audio", "shared", "vision")


def _tree(dest: pathlib.Path) -> pathlib.Path:
    shutil.copytree(FIXTURE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def _normalised(col: Collection, renames):
    """The collection as nested plain values, every string with the moved
    prefixes renamed (path fields are the only strings holding them)."""
    def fix(value):
        if isinstance(value, str):
            for old, new in renames:
                value = value.replace(old, new)
            return value
        if isinstance(value, dict):
            return {fix(k): fix(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [fix(v) for v in value]
        return value
    return fix(dataclasses.asdict(col))


def _set_include(tree: pathlib.Path, line: str) -> None:
    top = tree / "ops.yaml"
    text, count = re.subn(r"^include: .*$", line, top.read_text(), flags=re.M)
    assert count == 1
    top.write_text(text)


def test_monorepo_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path / "mono")
    col = load_manifest("mono/ops.yaml")
    assert [lib.name for lib in col.libraries] == ["audio_ops", "shared_math", "vision_ops"]
    assert col.manifests == ("mono/ops.yaml",) + tuple(f"mono/teams/{t}/ops.yaml" for t in TEAMS)
    audio, shared, vision = col.libraries
    # nearest defaults win: audio inherits the top's cflags, the others set their own
    assert (audio.cflags, shared.cflags, vision.cflags) == (
        ("-DMONOREPO=1",), ("-DSHARED=1",), ("-DVISION=1",))
    assert shared.includes == vision.includes == ("mono/teams/shared/include",)
    assert vision.sources == ("mono/teams/vision/kernels/clamp.cpp",)
    assert vision.ops[0].vectors[0].expected.reference.file == \
        "mono/teams/vision/kernels/reference.py"
    assert [(v.rtol, v.atol) for v in audio.ops[0].vectors] == [(1e-6, 1e-6), (1e-6, 0.0)]


@pytest.mark.parametrize("move, include, renames", [
    # one team folder elsewhere, deeper: only the include line changes
    (("teams/audio", "orgs/sound/audio"),
     'include: [orgs/sound/audio/ops.yaml, "teams/*/ops.yaml"]',
     [("orgs/sound/audio/", "teams/audio/")]),
    # every team folder one level down
    (("teams", "src/teams"), 'include: ["src/teams/*/ops.yaml"]',
     [("src/teams/", "teams/")]),
])
def test_moving_a_team_folder_changes_only_paths(tmp_path, monkeypatch, move, include, renames):
    monkeypatch.chdir(tmp_path)
    _tree(tmp_path / "mono")
    before = load_manifest("mono/ops.yaml")
    moved = _tree(tmp_path / "moved")
    old, new = move
    (moved / new).parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(moved / old), str(moved / new))
    _set_include(moved, include)
    after = load_manifest("moved/ops.yaml")
    assert after != before
    assert _normalised(after, renames + [("moved/", "mono/")]) == _normalised(before, [])
    # and a copy in another place entirely gives the same model but for the prefix
    assert _normalised(load_manifest(str(tmp_path / "moved" / "ops.yaml"), root=str(tmp_path)),
                       renames + [("moved/", "mono/")]) == _normalised(before, [])


def test_monorepo_builds_and_passes(tmp_path):
    proj = copy_project(tmp_path / "proj")
    _tree(proj / "mono")
    proc = run_scons(proj, "MANIFEST=mono/ops.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    col = load_manifest(str(proj / "mono" / "ops.yaml"), root=str(proj))
    count = sum(len(op.vectors) for lib in col.libraries for op in lib.ops)
    assert f"all libraries: {count} passed, 0 failed" in proc.stdout
    for lib in ("audio_ops", "shared_math", "vision_ops"):
        assert (proj / "build/host" / lib / f"{lib}.packed.so").is_file()
    # each team's cflags reached its compiles (each kernel #errors otherwise).
    # Moving the audio folder rebuilds audio only (its object is named by its
    # source path; its plan names its reference); shared and vision are untouched.
    (proj / "mono" / "orgs").mkdir()
    shutil.move(str(proj / "mono/teams/audio"), str(proj / "mono/orgs/audio"))
    _set_include(proj / "mono", 'include: [orgs/audio/ops.yaml, "teams/*/ops.yaml"]')
    again = run_scons(proj, "MANIFEST=mono/ops.yaml")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"all libraries: {count} passed, 0 failed" in again.stdout
    actions = [target for kind, target in action_lines(again.stdout)
               if kind in ("GEN", "CXX", "LINK", "PACK", "TEST", "AR", "STACK")]
    assert actions and all(a.startswith("build/host/audio_ops/") for a in actions), actions


def test_a_bad_team_manifest_stops_the_build_before_anything_is_compiled(tmp_path):
    proj = copy_project(tmp_path / "proj")
    tree = _tree(proj / "mono")
    vision = tree / "teams/vision/ops.yaml"
    vision.write_text(vision.read_text().replace("name: vision_ops", "name: shared_math"))
    proc = run_scons(proj, "MANIFEST=mono/ops.yaml")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "mono/teams/shared/ops.yaml:9:11: $.libraries[0].name: duplicate library name "
        "'shared_math' (also at mono/teams/vision/ops.yaml:8:11)",
        "mono/teams/vision/ops.yaml:8:11: $.libraries[0].name: duplicate library name "
        "'shared_math' (also at mono/teams/shared/ops.yaml:9:11)",
    ]
    assert not (proj / "build").exists()
