"""Integration tests against the compiled core (skipped when it is not built)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import vcpulab
from conftest import ROOT, needs_core

pytestmark = needs_core

EXAMPLES = ROOT / "scenarios" / "examples"
WEIGHTS = EXAMPLES / "weights-1-1-2-4.toml"
XEN = EXAMPLES / "xen-slice-sweep.toml"
TWO = EXAMPLES / "two-vms-one-pcpu.toml"

SMALL = """
name = "small"
seed = 3
[run]
duration = "200ms"
[host]
pcpus = 1
[[vm]]
name = "a"
vcpus = 1
workload = { model = "cpu-bomb" }
[[vm]]
name = "b"
vcpus = 1
workload = { model = "cpu-bomb" }
"""


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT / "python"), env.get("PYTHONPATH")) if p
    )
    return subprocess.run(
        [sys.executable, "-m", "vcpulab", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
    )


def test_exceptions_are_the_core_classes() -> None:
    from vcpulab import _core

    assert vcpulab.ScenarioError is _core.ScenarioError
    assert issubclass(vcpulab.ScenarioError, ValueError)
    assert issubclass(vcpulab.SimulationError, RuntimeError)


def test_run_returns_report_with_tables() -> None:
    report = vcpulab.run(WEIGHTS, overrides=["run.duration=2s"])
    assert {"vms", "vcpus", "pcpus"} <= set(report.tables)
    vms = report.to_pandas()
    assert list(vms["vm"]) == ["w1a", "w1b", "w2", "w4"]
    assert report.vcpus.shape[0] == 16
    shares = vms["cpu_share"].tolist()
    for got, want in zip(shares, (1 / 8, 1 / 8, 2 / 8, 4 / 8), strict=True):
        assert got == pytest.approx(want, rel=0.02)
    assert "w4" in report.summary()
    assert report.to_dict()["schema"] == 1


def test_api_accepts_text_and_dict() -> None:
    a = vcpulab.run(SMALL)
    b = vcpulab.run(tomllib.loads(SMALL))
    assert a.to_dict() == b.to_dict()
    assert a.seed == 3


def test_api_raises_scenario_error_naming_the_key() -> None:
    with pytest.raises(vcpulab.ScenarioError, match="slcie_ms"):
        vcpulab.run(XEN, overrides=["host.scheduler.slcie_ms=10"])
    bad = SMALL.replace('name = "a"', 'name = "a"\nvcpuz = 2')
    with pytest.raises(vcpulab.ScenarioError, match="vcpuz"):
        vcpulab.run(bad)
    with pytest.raises(vcpulab.ScenarioError):
        vcpulab.resolve(SMALL, overrides={"host.pcpus": -1})
    with pytest.raises(FileNotFoundError):
        vcpulab.run(EXAMPLES / "no-such.toml")


def test_same_scenario_and_seed_give_identical_json() -> None:
    a = vcpulab.run(XEN, seed=5, overrides=["run.duration=1s"]).to_json()
    b = vcpulab.run(XEN, seed=5, overrides=["run.duration=1s"]).to_json()
    assert a == b


def test_resolve_is_deterministic_and_runnable() -> None:
    over = ["run.duration=500ms", "host.scheduler.slice_ms=30"]
    r1 = vcpulab.resolve(XEN, seed=9, overrides=over)
    assert r1 == vcpulab.resolve(XEN, seed=9, overrides=over)
    assert tomllib.loads(r1)["seed"] == 9
    # A sweep runs the resolved text: it must give the same report as the original input.
    direct = vcpulab.run(XEN, seed=9, overrides=over)
    via_resolved = vcpulab.run(r1, seed=9)
    assert direct.to_json() == via_resolved.to_json()


def test_trace_writes_perfetto_json(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    report = vcpulab.trace(SMALL, out)
    data = json.loads(out.read_text())
    assert data["traceEvents"]
    assert report.end_ns > 0


def test_cli_typo_exits_2_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "typo.toml"
    bad.write_text(SMALL.replace("[run]", '[run]\nduraton = "1s"'))
    for args in (
        ("run", str(bad)),
        ("explain", str(bad)),
        ("sweep", str(bad), "--no-store"),
        ("run", str(XEN), "--set", "host.scheduler.slcie_ms=1"),
        ("run", str(XEN), "--set", "host.scheduler.slice_ms"),
        ("run", str(tmp_path / "missing.toml")),
    ):
        res = cli(*args)
        assert res.returncode == 2, (args, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("vcpulab: error: "), res.stderr
    assert "duraton" in cli("run", str(bad)).stderr
    assert "slcie_ms" in cli("run", str(XEN), "--set", "host.scheduler.slcie_ms=1").stderr


def test_cli_run_explain_list(tmp_path: Path) -> None:
    res = cli("run", str(TWO), "--set", "run.duration=500ms")
    assert res.returncode == 0, res.stderr
    assert "time breakdown" in res.stdout and "Jain" in res.stdout
    res = cli("run", str(TWO), "--json", "--seed", "4", "--set", "run.duration=500ms")
    assert json.loads(res.stdout)["scenario"]["seed"] == 4
    res = cli("explain", str(TWO))
    assert tomllib.loads(res.stdout)["name"] == "two-vms-one-pcpu"
    res = cli("list")
    assert "kvm-default" in res.stdout and "cpu-bomb" in res.stdout
    assert "examples-weights" in res.stdout


def test_cli_explain_shows_the_platform_profiles() -> None:
    res = cli("explain", str(TWO), "--set", "host.platform=kvm-3.9-snb")
    assert res.returncode == 0, res.stderr
    assert '# host.platform "kvm-3.9-snb"' in res.stdout
    assert "#   host.costs.vmexit_ns = 723" in res.stdout
    assert tomllib.loads(res.stdout)["host"]["platform"] == "kvm-3.9-snb"
    res = cli("explain", str(TWO), "--set", "host.platform=kvm-9")
    assert res.returncode == 2
    assert "host.platform" in res.stderr and "kvm-3.9-snb" in res.stderr


def test_sweep_on_the_local_pool(tmp_path: Path) -> None:
    df = vcpulab.sweep(
        XEN, {"host.scheduler.slice_ms": [30, 1]}, 2, overrides=["run.duration=300ms"], jobs=2
    )
    assert len(df) == 2 * 2 * 3
    assert set(df["host.scheduler.slice_ms"]) == {30, 1}
    summary = vcpulab.summarize(df)
    assert len(summary) == 2 * 3 and (summary["n"] == 2).all()


def test_cli_sweep_json_and_results(tmp_path: Path) -> None:
    store = tmp_path / "r.sqlite"
    res = cli(
        "sweep",
        str(XEN),
        "--grid",
        "host.scheduler.slice_ms=30,10",
        "--seeds",
        "2",
        "--set",
        "run.duration=300ms",
        "--store",
        str(store),
        "--json",
        "-j",
        "2",
    )
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["points"] == 4 and data["computed"] == 4
    assert all("cpu_share_ci95" in row for row in data["summary"])
    res = cli("results", "show", data["sweep_id"], "--store", str(store))
    assert res.returncode == 0 and "±" in res.stdout
    res = cli(
        "results",
        "export",
        data["sweep_id"],
        "--store",
        str(store),
        "-o",
        str(tmp_path / "x.parquet"),
    )
    assert res.returncode == 0, res.stderr


def test_reproduce_quick_smoke(tmp_path: Path, quick_store: Path) -> None:
    res = cli(
        "reproduce", "all", "--quick", "--out", str(tmp_path / "rep"), "--store", str(quick_store)
    )
    assert res.returncode == 0, res.stderr
    for exp in ("examples-weights", "examples-xen-slice"):
        assert f"{exp}: " in res.stdout
        for ext in ("csv", "png", "txt", "json"):
            assert (tmp_path / "rep" / f"{exp}.{ext}").is_file()
        line = (tmp_path / "rep" / f"{exp}.txt").read_text()
        assert any(v in line for v in ("agrees", "partly", "disagrees"))
        # A quick verdict can differ from the full one: every quick output says quick.
        assert "quick run" in line
    assert all(
        "[quick run" in ln
        for ln in res.stdout.splitlines()
        if ln.startswith(("examples-", "gleaner-"))
    )
    assert "examples-weights: agrees" in res.stdout
    # Three hogs on one pCPU: the closed form holds; the sleeper scenario is shown beside.
    assert "examples-xen-slice: agrees" in res.stdout
    header = (tmp_path / "rep" / "examples-xen-slice.csv").read_text().splitlines()[0]
    for column in ("dispatch_wait_mean_ms", "mixed_hog_wait_ms", "sleeper_wake_p99_ms"):
        assert column in header


def test_reproduce_what_if_changes_every_run_and_says_so(tmp_path: Path, quick_store: Path) -> None:
    # `--set` applies to every run: VM 3's weight 4 -> 1 (256 each) makes the shares
    # 1:1:2:1, which the closed form (weights 1:1:2:4) no longer matches.
    out = tmp_path / "wi"
    common = ("reproduce", "examples-weights", "--quick", "--store", str(quick_store))
    res = cli(*common, "--set", "vm.3.weight=256", "--out", str(out))
    assert res.returncode == 0, res.stderr
    line = (out / "examples-weights.txt").read_text()
    assert "[what if vm.3.weight=256: not the verdict of record]" in line
    assert "examples-weights: agrees" not in res.stdout
    data = json.loads((out / "examples-weights.json").read_text())
    assert data["what_if"] == ["vm.3.weight=256"]
    shares = [row["simulated"] for row in data["rows"]]
    assert shares == pytest.approx([0.2, 0.2, 0.4, 0.2], abs=0.01), shares
    # Without it: the published shares, and no what-if anywhere.
    res = cli(*common, "--out", str(tmp_path / "plain"))
    assert res.returncode == 0, res.stderr
    assert "examples-weights: agrees" in res.stdout and "what if" not in res.stdout
    assert json.loads((tmp_path / "plain" / "examples-weights.json").read_text())["what_if"] == []


def test_validate_quick_writes_both_reports(tmp_path: Path, quick_store: Path) -> None:
    docs = tmp_path / "docs"
    res = cli("validate", "--quick", "--docs", str(docs), "--store", str(quick_store))
    assert res.returncode == 0, res.stderr
    md = (docs / "validation.md").read_text()
    assert "| figure | published | simulated | verdict |" in md
    assert "examples-weights" in md and "(validation/examples-weights.png)" in md
    html = (docs / "validation.html").read_text()
    from vcpulab.experiments import registry

    assert html.count("data:image/png;base64,") == len(registry())


@needs_core
def test_reproduce_without_matplotlib_writes_csv_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # matplotlib is the optional `plot` extra: without it the numbers still come out.
    import vcpulab.experiments as experiments

    monkeypatch.setattr(experiments, "plotting_available", lambda: False)
    res = experiments.run_experiment(
        experiments.get("examples-weights"), quick=True, out_dir=tmp_path
    )
    assert res.png is None and not (tmp_path / "examples-weights.png").exists()
    assert (tmp_path / "examples-weights.csv").is_file()
    assert "no plot: matplotlib is not installed" in res.detail
    assert "[quick run" in res.line()


@needs_core
def test_sweep_plot_writes_png_and_svg_with_log_x(tmp_path: Path) -> None:
    from vcpulab.plots import spans_decades

    out = tmp_path / "p.png"
    res = cli(
        "sweep",
        str(ROOT / "scenarios/examples/xen-slice-sweep.toml"),
        "--grid",
        "host.scheduler.slice_ms=30,1,0.1",
        "--seeds",
        "1",
        "--no-store",
        "--set",
        "run.duration=200ms",
        "--plot",
        "cpu_share",
        "--plot-out",
        str(out),
    )
    assert res.returncode == 0, res.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.with_suffix(".svg").read_text().lstrip().startswith("<?xml")
    # Slices 0.1…30 ms span more than two decades: a log axis; shares 0.08…0.46 do not.
    assert spans_decades([30, 1, 0.1]) and not spans_decades([0.08, 0.46])
    bad = cli(
        "sweep",
        str(ROOT / "scenarios/examples/xen-slice-sweep.toml"),
        "--seeds",
        "1",
        "--no-store",
        "--set",
        "run.duration=50ms",
        "--plot",
        "no_such_metric",
    )
    assert (
        bad.returncode == 2 and "allowed values are" in bad.stderr and "Traceback" not in bad.stderr
    )


@needs_core
def test_docs_columns_md_is_the_glossary_of_this_core() -> None:
    from vcpulab.cli import columns_markdown

    current = (ROOT / "docs" / "columns.md").read_text(encoding="utf-8")
    assert current == columns_markdown(), (
        "docs/columns.md is stale: vcpulab explain --columns --markdown > docs/columns.md"
    )
    res = cli("explain", "--columns")
    assert res.returncode == 0 and "share_ratio" in res.stdout and "RFC 3550" in res.stdout


@needs_core
def test_explain_lists_every_workload_parameter_with_its_default() -> None:
    res = cli("explain", str(ROOT / "scenarios/examples/xen-slice-sweep.toml"))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert '# vm "sleeper": workload "compute-sleep" parameters' in out
    assert '#   params.compute = "exp(2ms)"  (set; default "exp(1ms)")' in out
    assert "#   params.iterations = 0  (default)" in out
    assert '# vm "hog1": workload "cpu-bomb" has no parameters' in out
    missing = cli("explain")
    assert missing.returncode == 2 and "--columns" in missing.stderr


@needs_core
def test_undefined_values_are_null_and_schemas_do_not_depend_on_data(tmp_path: Path) -> None:
    import pyarrow as pa

    scenario = ROOT / "scenarios/examples/xen-slice-sweep.toml"
    # 1 ms: nobody has woken yet; 300 ms: the sleeper has.
    early = vcpulab.run(scenario, overrides={"run.duration": "1ms"})
    later = vcpulab.run(scenario, overrides={"run.duration": "300ms"})
    hog = early.to_dict()["vms"][0]
    assert hog["wake_latency_count"] == 0
    assert hog["wake_latency_mean_ns"] is None and hog["wake_latency_p99_ns"] is None
    a, b = early.arrow("vms"), later.arrow("vms")
    assert a.schema.field("wake_latency_p99_ns").type == pa.int64()
    assert a.schema.equals(b.schema)
    assert pa.concat_tables([a, b]).num_rows == 6
    # Every report names the core and the input it came from.
    for r in (early, later):
        assert r.to_dict()["core_version"] == vcpulab.__version__
        assert len(r.scenario["hash"]) == 16
    assert early.scenario["hash"] != later.scenario["hash"]
    assert (
        vcpulab.run(scenario, overrides={"run.duration": "1ms"}).scenario["hash"]
        == early.scenario["hash"]
    )


@needs_core
def test_histograms_are_a_long_table_not_columns_per_vm(tmp_path: Path) -> None:
    scenario = ROOT / "scenarios/examples/xen-slice-sweep.toml"
    df = vcpulab.sweep(
        scenario,
        {"host.scheduler.slice_ms": [30, 1]},
        1,
        overrides={"run.duration": "200ms"},
        store=":memory:",
    )
    assert not [c for c in df.columns if c.startswith("histograms.")]
    assert {"core_version", "scenario.hash"} <= set(df.columns)
    hist = vcpulab.sweep(
        scenario,
        {"host.scheduler.slice_ms": [30, 1]},
        1,
        overrides={"run.duration": "200ms"},
        store=":memory:",
        table="histograms",
    )
    assert {"histogram", "vm", "path", "p99_ns"} <= set(hist.columns)
    sleeper = hist[
        (hist["histogram"] == "wake_latency") & (hist["vm"] == "sleeper") & hist["path"].isna()
    ]
    assert len(sleeper) == 2
    report = vcpulab.run(scenario, overrides={"run.duration": "200ms"})
    table = report.histogram_table()
    assert set(table["vm"].dropna()) >= {"hog1", "sleeper"}


@needs_core
def test_reproduce_works_outside_a_checkout_from_the_packaged_scenarios(tmp_path: Path) -> None:
    # The scenarios ship inside the package (vcpulab/scenarios), so an installed wheel
    # reproduces from any directory; the checkout's scenarios/ points at the same files.
    import vcpulab.experiments as experiments

    packaged = Path(experiments.__file__).resolve().parents[1] / "scenarios"
    assert (packaged / "examples" / "weights-1-1-2-4.toml").is_file()
    assert (ROOT / "scenarios").resolve() == packaged
    res = cli(
        "reproduce", "examples-weights", "--quick", "--out", str(tmp_path / "o"), cwd=tmp_path
    )
    assert res.returncode == 0, res.stderr
    assert "examples-weights: agrees" in res.stdout


@needs_core
def test_every_platform_a_scenario_names_is_listed_with_its_cpu() -> None:
    platforms = dict(vcpulab.platforms())
    assert {n for n, _ in vcpulab.kernels()} >= {"linux-3.2", "linux-6.6"}
    named = set()
    for path in (ROOT / "python" / "vcpulab" / "scenarios").rglob("*.toml"):
        platform = tomllib.loads(path.read_text()).get("host", {}).get("platform")
        if platform:
            named.add(platform)
            assert platform in platforms, f"{path}: {platform}"
    assert "kvm-3.2-wsm" in named
    # Whether the CPU is the paper's or assumed is what a what-if starts from.
    assert "CPU assumed" in platforms["kvm-3.2-wsm"]
    assert "CPU assumed" not in platforms["kvm-3.9-snb"]
