"""The validated manifest kept between builds (site_tools/gpsimd_tool/
manifest_cache.py): used only while everything its validation read still
holds, loaded again on any change, never kept with errors."""

import dataclasses
import os
import pathlib
import shutil

import pytest

from gpsimd_build.manifest import ManifestError, load_manifest
from site_tools.gpsimd_tool import manifest_cache as mc

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of tests/manifests (a composed collection with an
    include glob) as the project root, with an empty build folder."""
    shutil.copytree(ROOT / "tests" / "manifests", tmp_path / "manifests")
    (tmp_path / "build").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _stored(manifest="manifests/good/composed.yaml"):
    collection = load_manifest(manifest)
    assert mc.store("build", collection, manifest) is None
    return collection


def test_unchanged_collection_comes_back_equal(tree):
    collection = _stored()
    cached = mc.load("build", "manifests/good/composed.yaml")
    assert cached is not None
    assert dataclasses.asdict(cached) == dataclasses.asdict(collection)
    assert cached.reads == collection.reads
    assert [lib.name for lib in cached.libraries] == ["top_lib", "a_lib", "a_single", "b_lib"]


@pytest.mark.parametrize("change", [
    "edit_top", "edit_included", "new_glob_match", "removed_source", "touched_bytes_same_size",
])
def test_any_change_the_validation_saw_loads_again(tree, change):
    _stored()
    if change == "edit_top":
        p = tree / "manifests" / "good" / "composed.yaml"
        p.write_text(p.read_text().replace("rtol: 0.25", "rtol: 0.5"))
    elif change == "edit_included":
        p = tree / "manifests" / "good" / "composed" / "team_b" / "ops.yaml"
        p.write_text(p.read_text() + "\n# a comment changes the bytes\n")
    elif change == "new_glob_match":
        team_c = tree / "manifests" / "good" / "composed" / "team_c"
        team_c.mkdir()
        (team_c / "ops.yaml").write_text("version: 1\nlibraries: []\n")
    elif change == "removed_source":
        (tree / "manifests" / "good" / "composed" / "team_a" / "kernels" / "a.cpp").unlink()
    elif change == "touched_bytes_same_size":
        p = tree / "manifests" / "good" / "composed.yaml"
        text = p.read_text()
        p.write_text(text.replace("-DTOP=1", "-DTOP=2"))
        assert len(p.read_text()) == len(text)
    assert mc.load("build", "manifests/good/composed.yaml") is None


def test_key_covers_manifest_root_and_allowed_paths(tree):
    _stored()
    assert mc.load("build", "manifests/good/composed.yaml") is not None
    assert mc.load("build", "./manifests/good/composed.yaml") is None
    assert mc.load("build", "manifests/good/composed.yaml", allow_paths=["/opt"]) is None
    os.mkdir("elsewhere")
    assert mc.load("build", "manifests/good/composed.yaml", root="elsewhere") is None


def test_code_digest_follows_the_validating_code(tree, monkeypatch):
    _stored()
    monkeypatch.setattr(mc, "code_digest", lambda: "0" * 64)
    assert mc.load("build", "manifests/good/composed.yaml") is None


@pytest.mark.parametrize("damage", [b"", b"not a pickle", b"\x80\x05garbage"])
def test_damaged_cache_loads_again(tree, damage):
    _stored()
    (tree / "build" / mc.CACHE_NAME).write_bytes(damage)
    assert mc.load("build", "manifests/good/composed.yaml") is None


def test_missing_cache_or_build_folder(tree):
    assert mc.load("build", "manifests/good/composed.yaml") is None
    assert mc.load("no-such-folder", "manifests/good/composed.yaml") is None


def test_store_reports_an_unwritable_folder_instead_of_raising(tree):
    collection = load_manifest("manifests/good/composed.yaml")
    err = mc.store("no-such-folder/deeper", collection, "manifests/good/composed.yaml")
    assert err and "No such file or directory" in err


def test_code_digest_is_stable_and_hex():
    d = mc.code_digest()
    assert d == mc.code_digest() and len(d) == 64 and int(d, 16) >= 0


def test_a_manifest_that_became_bad_is_reported_not_served(tree):
    """The cache never hides an error: once the file changes, the load
    that follows sees it."""
    _stored()
    p = tree / "manifests" / "good" / "composed.yaml"
    p.write_text(p.read_text().replace("rtol: 0.25", "rtol: -1"))
    assert mc.load("build", "manifests/good/composed.yaml") is None
    with pytest.raises(ManifestError):
        load_manifest("manifests/good/composed.yaml")


def test_the_cache_holds_no_absolute_path(tree):
    _stored()
    assert str(tree).encode() not in (tree / "build" / mc.CACHE_NAME).read_bytes()
