"""CLI behaviour against the injected fake core (runs in-process, fast)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import fakecore
from vcpulab import _native, sweeps
from vcpulab.cli import main


@pytest.fixture(autouse=True)
def fake_core(monkeypatch: pytest.MonkeyPatch) -> None:
    import functools

    monkeypatch.setattr(_native, "_CORE", fakecore)
    monkeypatch.setattr(
        sweeps,
        "Backend",
        functools.partial(
            sweeps.Backend, run=fakecore.run, resolve=fakecore.resolve, version=fakecore.version
        ),
    )


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "s.toml"
    path.write_text('name = "s"\n[host]\npcpus = 1\n')
    return path


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("vcpulab: error: ")
    return lines[0]


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["run", "{s}", "--set", "novalue"], "novalue"),
        (["run", "{s}", "--set", "a b=1"], "a b"),
        (["run", "{missing}"], "missing.toml"),
        (["run", "{s}", "--set", "bad.slcie_ms=3"], "bad.slcie_ms"),
        (["run", "{s}", "--frobnicate"], "--frobnicate"),
        (["sweep", "{s}", "--grid", "x.y"], "x.y"),
        (["sweep", "{s}", "--grid", "bad.key=1,2"], "bad.key"),
        (["reproduce", "no-such-figure"], "no-such-figure"),
        # Every id is checked before the first one runs (nothing written below).
        (["reproduce", "examples-weights", "no-such-figure", "--out", "{out}"], "no-such"),
        (["reproduce", "examples-weights", "nosuch-*", "--out", "{out}"], "nosuch-*"),
        # A what-if may not set what the reproduction compares (its points would be
        # the same runs), and must be KEY=VALUE.
        (
            [
                *("reproduce", "dcs-dedup-pair", "--out", "{out}"),
                *("--set", "host.scheduler.placement=balance"),
            ],
            "host.scheduler.placement: dcs-dedup-pair varies this key itself (point",
        ),
        (["reproduce", "dcs-dedup-pair", "--set", "host.scheduler=x", "--out", "{out}"], "varies"),
        (["reproduce", "examples-weights", "--set", "novalue", "--out", "{out}"], "KEY=VALUE"),
        (
            [
                *("reproduce", "examples-xen-slice", "--out", "{out}"),
                *("--set", "host.scheduler.slice_ms=1"),
            ],
            "varies this key itself (its grid)",
        ),
        (["results", "show", "zzz", "--store", "{missing}"], "missing.toml"),
        (["bogus-command"], "bogus-command"),
    ],
)
def test_bad_input_exits_2_with_one_line(argv, needle, scenario, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    argv = [a.format(s=scenario, missing=tmp_path / "missing.toml", out=out) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert needle in one_error_line(captured.err)
    assert "Traceback" not in captured.err
    assert not out.exists()


def test_run_human_and_json(scenario, capsys) -> None:
    assert main(["run", str(scenario), "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "time breakdown" in out and "vm1" in out
    assert main(["run", str(scenario), "--seed", "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["scenario"]["seed"] == 4


def test_explain_list_trace(scenario, tmp_path, capsys) -> None:
    assert main(["explain", str(scenario), "--set", "host.pcpus=2"]) == 0
    assert "# host.pcpus=2" in capsys.readouterr().out
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "fake-preset" in out and "fake-bomb" in out and "examples-weights" in out
    assert "fake-host" in out and "fake-linux" in out
    assert main(["list", "experiments", "--json"]) == 0
    ids = [e["name"] for e in json.loads(capsys.readouterr().out)["experiments"]]
    assert "examples-xen-slice" in ids
    assert main(["list", "platforms", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "platforms": [{"name": "fake-host", "description": "a host platform of the fake core"}]
    }
    assert main(["list", "kernels"]) == 0
    assert "fake-linux" in capsys.readouterr().out
    trace = tmp_path / "t" / "trace.json"
    assert main(["trace", str(scenario), "-o", str(trace)]) == 0
    assert "traceEvents" in json.loads(trace.read_text())


def test_sweep_results_and_export(scenario, tmp_path, capsys) -> None:
    store = str(tmp_path / "r.sqlite")
    out = tmp_path / "rows.parquet"
    argv = [
        "sweep",
        str(scenario),
        "--grid",
        "host.scheduler.slice_ms=30,1",
        "--seeds",
        "2",
        "--store",
        store,
        "-j",
        "1",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "4 computed" in text and "±" in text
    assert len(pd.read_parquet(out)) == 8
    assert main([*argv[:-2], "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["computed"] == 0 and data["from_store"] == 4 and len(data["summary"]) == 4
    sweep_id = data["sweep_id"]
    assert main(["results", "ls", "--store", store]) == 0
    assert sweep_id in capsys.readouterr().out
    assert main(["results", "show", sweep_id[:6], "--store", store]) == 0
    assert "cpu_share" in capsys.readouterr().out
    csv = tmp_path / "x.csv"
    assert main(["results", "export", sweep_id, "--store", store, "-o", str(csv)]) == 0
    assert len(pd.read_csv(csv)) == 8
    assert (
        main(["results", "export", sweep_id, "--store", store, "--table", "vcpus", "-o", str(csv)])
        == 0
    )
    assert len(pd.read_csv(csv)) == 16


def test_sweep_with_failures_exits_1(scenario, tmp_path, capsys) -> None:
    argv = [
        "sweep",
        str(scenario),
        "--grid",
        "fake.fail=1",
        "--grid",
        "x=1,2",
        "--no-store",
        "-j",
        "1",
    ]
    assert main(argv) == 1
    assert "failed" in capsys.readouterr().err


def test_ray_missing_says_how_to_install(scenario, monkeypatch, capsys) -> None:
    import builtins

    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray" or name.startswith("ray."):
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    assert main(["sweep", str(scenario), "--executor", "ray", "--no-store"]) == 2
    assert "pip install 'vcpulab[ray]'" in one_error_line(capsys.readouterr().err)


def test_reproduce_selects_ids_patterns_and_all_in_order_once() -> None:
    from vcpulab.experiments import registry, select

    ids = list(registry())
    dcs = [i for i in ids if i.startswith("dcs-")]
    assert len(dcs) > 1
    assert [e.id for e in select(["dcs-*"])] == dcs
    assert [e.id for e in select(["examples-weights", "dcs-*", "dcs-parsec"])] == [
        "examples-weights",
        *dcs,
    ]
    assert [e.id for e in select(["all", "examples-weights"])] == ids
