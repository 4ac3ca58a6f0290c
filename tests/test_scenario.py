import tomllib
from pathlib import Path

import pytest

from vcpulab.errors import ScenarioError, UsageError
from vcpulab.scenario import check_override, dumps_toml, load_scenario, normalize_overrides


def test_dumps_toml_round_trips() -> None:
    data = {
        "name": 'odd "name"\twith\\escapes',
        "host": {"pcpus": 4, "clock_ghz": 2.5, "scheduler": {"kind": "credit", "slice_ms": 0.1}},
        "vm": [
            {"name": "a", "vcpus": 2, "weight": 256, "pin": [0, 1], "workload": {"model": "x"}},
            {"name": "b", "vcpus": 1, "cap_pct": None, "enabled": False},
        ],
        "run": {"duration": "2s", "seeds": [1, 2, 3], "tags": {"a b": "c"}},
        "empty": {},
    }
    text = dumps_toml(data)
    back = tomllib.loads(text)
    expected = dict(data)
    expected["vm"] = [data["vm"][0], {"name": "b", "vcpus": 1, "enabled": False}]
    assert back == expected


def test_load_scenario_variants(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('name = "x"\n')
    assert load_scenario(f) == 'name = "x"\n'
    assert load_scenario(str(f)) == 'name = "x"\n'
    assert load_scenario('name = "y"\n') == 'name = "y"\n'
    assert tomllib.loads(load_scenario({"name": "z"})) == {"name": "z"}
    with pytest.raises(FileNotFoundError, match="no such scenario file"):
        load_scenario(tmp_path / "missing.toml")
    with pytest.raises(FileNotFoundError):
        load_scenario(str(tmp_path / "missing.toml"))


@pytest.mark.parametrize("bad", ["novalue", "=3", "a..b=1", "a b=1", "key=", "k.=1"])
def test_bad_overrides(bad: str) -> None:
    with pytest.raises(UsageError, match="bad --set"):
        check_override(bad)


def test_overrides_normalized() -> None:
    assert normalize_overrides(["a.b = 3 "]) == ["a.b=3"]
    assert normalize_overrides({"vm.0.weight": 512, "x.y": True, "z": 0.5}) == [
        "vm.0.weight=512",
        "x.y=true",
        "z=0.5",
    ]
    assert normalize_overrides(None) == []
    assert normalize_overrides("run.duration=2s") == ["run.duration=2s"]


def test_trace_file_is_read_relative_to_the_scenario(tmp_path: Path) -> None:
    (tmp_path / "t.trace").write_text("0 compute 1ms\n0 count 1\n")
    sc = tmp_path / "s.toml"
    sc.write_text(
        '[[vm]]\nvcpus = 1\nworkload = { model = "trace", params = { file = "t.trace" } }\n'
    )
    text = load_scenario(sc)
    assert "0 compute 1ms" in text and "file" not in text


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ('{ file = "missing.trace" }', "cannot read"),
        ('{ file = "t.trace", text = "0 compute 1ms" }', "either inline"),
        ("{ file = 3 }", "path string"),
    ],
)
def test_bad_trace_files_name_the_key(tmp_path: Path, params: str, needle: str) -> None:
    (tmp_path / "t.trace").write_text("0 compute 1ms\n")
    sc = tmp_path / "s.toml"
    sc.write_text(f'[[vm]]\nvcpus = 1\nworkload = {{ model = "trace", params = {params} }}\n')
    with pytest.raises(ScenarioError, match=needle) as info:
        load_scenario(sc)
    assert "vm.0.workload.params.file" in str(info.value)
