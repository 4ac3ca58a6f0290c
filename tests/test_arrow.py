"""The report's tables cross from the core as Arrow; they must equal the JSON path."""

from __future__ import annotations

import json

import pandas as pd
import pyarrow as pa
import pytest

import vcpulab
from conftest import ROOT, needs_core
from vcpulab import _native
from vcpulab.report import Report

pytestmark = needs_core

EXAMPLES = ROOT / "scenarios" / "examples"
SCENARIOS = [
    EXAMPLES / "weights-1-1-2-4.toml",
    EXAMPLES / "two-vms-one-pcpu.toml",
    EXAMPLES / "xen-slice-sweep.toml",
]


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_arrow_and_json_paths_agree(path) -> None:
    text = path.read_text()
    raw, scalars, hists, tables = _native.core_run_arrow(text, ["run.duration=300ms"], 5)
    assert raw == _native.core_run(text, ["run.duration=300ms"], 5)
    data = json.loads(raw)
    via_arrow = Report.from_arrow(scalars, tables, raw_json=raw, histograms_json=hists)
    via_json = Report.from_json(raw)
    # The summary of a fresh split report (built from the Arrow rows, the histograms
    # unparsed) is the one of the whole JSON.
    fresh = Report.from_arrow(scalars, tables, raw_json=raw, histograms_json=hists)
    assert fresh.summary() == via_json.summary()
    assert fresh._hist_json is not None  # the summary did not need them

    # The JSON without the tables and histograms is the report minus exactly those, in
    # order; the histograms come apart, as the report wrote them.
    assert list(tables) == via_json.tables
    apart = [*tables, "histograms"]
    assert json.loads(scalars) == {k: v for k, v in data.items() if k not in apart}
    assert list(json.loads(scalars)) == [k for k in data if k not in apart]
    assert hists is not None and json.loads(hists) == data["histograms"]
    assert via_arrow.histograms == data["histograms"]
    assert via_arrow["histograms"] == data["histograms"]
    pd.testing.assert_frame_equal(via_arrow.histogram_table(), via_json.histogram_table())

    for name, table in tables.items():
        assert isinstance(table, pa.Table)
        assert table.num_rows == len(data[name])
        # Rows: the Arrow values are the JSON values, same columns, same order.
        assert table.to_pylist() == data[name]
        # Frames: same columns, dtypes and values as built from the JSON rows.
        pd.testing.assert_frame_equal(via_arrow.table(name), via_json.table(name))
    assert via_arrow.scalars() == via_json.scalars()
    assert via_arrow.to_dict() == data
    assert via_arrow == via_json
    assert via_arrow.to_json() == raw
    assert via_arrow.summary() == via_json.summary()


def test_public_run_uses_arrow_tables() -> None:
    report = vcpulab.run(EXAMPLES / "weights-1-1-2-4.toml", overrides=["run.duration=200ms"])
    assert report.arrow("vms").schema.field("cpu_share").type == pa.float64()
    assert report.arrow("vms").schema.field("vm").type == pa.string()
    assert report.arrow("vms").schema.field("vcpus").type == pa.int64()
    # An Option that is never set keeps its declared type (the schema does not depend on
    # the data); as pandas, a float column of NaN.
    assert report.arrow("vms").schema.field("completion_ns").type == pa.int64()
    assert report.vms["completion_ns"].isna().all()


def test_core_arrow_table_speaks_the_pycapsule_protocol() -> None:
    from vcpulab import _core

    text = (EXAMPLES / "two-vms-one-pcpu.toml").read_text()
    _, _, _, tables = _core.run_arrow(text, ["run.duration=100ms"], 1)
    vms = tables["vms"]
    assert len(vms) == vms.num_rows == 2
    assert "cpu_share" in vms.column_names
    reader = pa.RecordBatchReader.from_stream(vms)
    assert reader.read_all().num_rows == 2
    assert pa.schema(vms).names == vms.column_names
    # A stream is consumed once; each call makes a new one.
    assert pa.table(vms).equals(pa.table(vms))


def test_report_arrow_splits_stored_json() -> None:
    raw = json.dumps(
        {
            "schema": 1,
            "end_ns": 5,
            "vms": [{"vm": "a", "n": 1, "x": None}, {"vm": "b", "n": 2**63, "x": 1.5}],
            "nested": {"h": [1, 2]},
        }
    )
    scalars, hists, tables = _native.core_report_arrow(raw)
    assert json.loads(scalars) == {"schema": 1, "end_ns": 5, "nested": {"h": [1, 2]}}
    assert hists is None  # this report has none
    vms = tables["vms"]
    assert vms.schema.field("n").type == pa.uint64()
    assert vms.schema.field("x").type == pa.float64()
    assert vms.to_pylist() == json.loads(raw)["vms"]


def test_lazy_histograms_read_like_parsed_ones() -> None:
    hist = {"count": 2, "mean_ns": 3.0, "buckets": [[1, 2, 1], [4, 5, 1]]}
    raw = json.dumps({"schema": 1, "end_ns": 5, "histograms": {"wake_latency/a": hist}})
    lazy = Report.from_json_lazy(raw)
    assert lazy._hist_json is not None  # not parsed yet
    assert lazy.end_ns == 5
    assert lazy.scalars() == Report.from_json(raw).scalars()
    assert lazy.histogram("wake_latency/a")["count"].tolist() == [1, 1]
    with pytest.raises(KeyError, match="wake_latency/a"):
        lazy.histogram("nope")
    assert lazy.to_dict() == json.loads(raw)
    # A report without histograms (the cache study's) has none to defer.
    bare = Report.from_json_lazy(json.dumps({"schema": 1, "end_ns": 5}))
    assert bare.histograms == {} and bare._hist_json is None


def test_a_run_imports_pyarrow_only_when_a_table_is_read() -> None:
    """Importing pyarrow (and numpy) costs a fresh process a quarter of a second; a run
    whose caller reads only scalars must not pay it."""
    import subprocess
    import sys

    code = f"""
import sys, vcpulab
r = vcpulab.run({str(EXAMPLES / "weights-1-1-2-4.toml")!r}, overrides=["run.duration=50ms"])
assert r.end_ns > 0 and "vms" in r.tables
assert "pyarrow" not in sys.modules, "pyarrow imported before a table was read"
assert len(r.arrow("vms")) > 0
assert "pyarrow" in sys.modules
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
