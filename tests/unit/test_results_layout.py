"""The optional ``layout`` of a vector's results (gpsimd_device.results):
in the JSON only when present, read back by ``from_json``."""
from gpsimd_device.results import LibraryResults, VectorResult

LAYOUT = {"elements": 10, "itemsize": 4, "truncated": False, "holes": [[7, 10]], "overlaps": [],
          "order_dependent": [], "cores": [{"core": 0, "written": [[0, 7]], "read_before_write": [],
                                            "past_end": [], "uninit": [], "fault": None}]}


def test_layout_round_trips_and_is_absent_when_none():
    with_layout = VectorResult("op", "v", "ops.yaml:1:1", "fail", "holes", layout=LAYOUT)
    plain = VectorResult("op", "v2", "ops.yaml:2:1", "pass")
    doc = LibraryResults("lib", [with_layout, plain]).to_json()
    assert doc["vectors"][0]["layout"] == LAYOUT
    assert "layout" not in doc["vectors"][1]
    back = LibraryResults.from_json(doc)
    assert back.vectors[0].layout == LAYOUT and back.vectors[1].layout is None
    assert VectorResult.from_json(dict(doc["vectors"][0], layout="junk")).layout is None
