"""The host profile's choice of linker (``LINKER``): gold where the machine
has it, the compiler's default otherwise, and a clear error for a choice
that cannot work."""

import pytest

from gpsimd_build.profiles import ProfileError
from gpsimd_build.profiles.host import HOST_LINKFLAGS, HostProfile, linker_flags


@pytest.fixture
def gold_on_path(tmp_path, monkeypatch):
    tool = tmp_path / "ld.gold"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))


@pytest.fixture
def no_gold(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))


def test_auto_takes_gold_when_the_machine_has_it(gold_on_path):
    assert linker_flags("auto") == ["-fuse-ld=gold"]
    assert linker_flags("gold") == ["-fuse-ld=gold"]


def test_auto_keeps_the_compilers_linker_without_gold(no_gold):
    assert linker_flags("auto") == []
    assert linker_flags("bfd") == ["-fuse-ld=bfd"]
    with pytest.raises(ProfileError, match=r"^LINKER=gold: ld.gold is not on PATH "):
        linker_flags("gold")


def test_an_unknown_linker_is_an_error(gold_on_path):
    with pytest.raises(ProfileError, match=r"^LINKER=lld: the host profile links with auto, "
                                           r"gold or bfd$"):
        linker_flags("lld")


def test_the_choice_lands_in_the_link_flags(gold_on_path):
    link = HostProfile().construction_vars("/top", "build", "", "auto")["GPSIMD_LINKFLAGS"]
    assert link == list(HOST_LINKFLAGS) + ["-fuse-ld=gold"]
    bfd = HostProfile().construction_vars("/top", "build", "", "bfd")["GPSIMD_LINKFLAGS"]
    assert bfd == list(HOST_LINKFLAGS) + ["-fuse-ld=bfd"]


def test_the_prefix_maps_name_the_project_and_any_build_folder_alike():
    from gpsimd_build.profiles.base import prefix_maps
    assert prefix_maps("/top", "bA") == ["-ffile-prefix-map=/top=.",
                                         "-ffile-prefix-map=/top/bA/=build/",
                                         "-ffile-prefix-map=bA/=build/"]
    assert prefix_maps("/top", "/tmp/x/bB") == ["-ffile-prefix-map=/top=.",
                                                "-ffile-prefix-map=/tmp/x/bB/=build/"]
    assert prefix_maps("/top", ".") == ["-ffile-prefix-map=/top=."]
    flags = HostProfile().construction_vars("/top", "out/b")["GPSIMD_PREFIXFLAGS"]
    assert flags == prefix_maps("/top", "out/b")
