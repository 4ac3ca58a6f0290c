import json

import pytest

import fakecore
from vcpulab.report import Report, is_table


def make_report() -> Report:
    data = json.loads(fakecore.run('name = "x"\n', [], 3))
    data["locks"] = [{"lock": "rq", "acquisitions": 10, "hold_mean_ns": 120.5}]
    return Report(data, raw_json=None)


def test_tables_are_generic() -> None:
    r = make_report()
    assert r.tables == ["vms", "vcpus", "pcpus", "locks"]
    assert list(r.locks.columns) == ["lock", "acquisitions", "hold_mean_ns"]
    assert r.table("vms").shape[0] == 2
    assert r.to_pandas().equals(r.vms)
    assert r.to_pandas("vcpus").shape[0] == 4
    assert r.rows("locks")[0]["acquisitions"] == 10
    assert "locks" in dir(r)
    with pytest.raises(KeyError, match="no table"):
        r.table("nope")
    with pytest.raises(AttributeError):
        _ = r.nope


def test_fields_and_json() -> None:
    raw = fakecore.run('name = "x"\n', [], 5)
    r = Report.from_json(raw)
    assert r.to_json() == raw
    assert json.loads(r.to_json(indent=2)) == r.to_dict()
    assert r.seed == 5 and r.end_ns == 10**9 and r.stop_reason == "duration"
    assert r.jain_index == pytest.approx(0.99)
    assert r.histogram("wake_latency")["count"].sum() == 10
    assert r.scalars()["fairness.jain_index"] == pytest.approx(0.99)
    d = r.to_dict()
    d["vms"].clear()
    assert len(r.vms) == 2  # to_dict is a copy


def test_summary_text() -> None:
    text = make_report().summary()
    assert "vm0" in text and "vm1" in text
    assert "Jain's fairness index: 0.9900" in text
    assert "locks" in text


def test_is_table() -> None:
    assert is_table([])
    assert is_table([{"a": 1}])
    assert not is_table([{"a": [1]}])
    assert not is_table([1, 2])
    assert not is_table({"a": 1})


def test_rejects_other_schema() -> None:
    with pytest.raises(ValueError, match="schema"):
        Report({"schema": 99})
