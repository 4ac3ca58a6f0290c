"""Hard edges found by fuzzing (issue 19, items 7-12): each bad input ends with one line
naming what is wrong and exit status 2 — no traceback, no abort, no hang, no exit 0."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import default_sigint, needs_core

EDGES = Path(__file__).resolve().parent / "fixtures" / "edges"


def vcpulab(
    *args: str, timeout: float = 60, cwd: Path | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "vcpulab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


def one_line_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("vcpulab: error: "), p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


# --- 7: runs that never end ---------------------------------------------------------------


@needs_core
@pytest.mark.parametrize(
    ("name", "needle"), [("hang.toml", "forever"), ("hang-lock.toml", "forever")]
)
def test_zero_time_forever_loops_are_refused(name: str, needle: str) -> None:
    start = time.monotonic()
    p = vcpulab("run", str(EDGES / name), "--json", timeout=30)
    one_line_error(p, needle, "takes simulated time")
    assert time.monotonic() - start < 20


@needs_core
def test_zero_time_finite_loop_ends_with_no_progress_error(tmp_path: Path) -> None:
    # A finite loop of 2^62 zero-time iterations is not provably endless: the run's
    # no-progress guard ends it with an error naming the thread.
    sc = tmp_path / "finite.toml"
    sc.write_text(
        'run = {duration = "10ms"}\n[[vm]]\nvcpus = 1\nworkload = {model = "program", group = '
        "[{ops = [{loop = {n = 4611686018427387904, body = [{count = 1}]}}]}]}\n"
    )
    p = vcpulab("run", str(sc), timeout=60)
    one_line_error(p, "without time passing")


@needs_core
def test_event_budget_ends_a_run(tmp_path: Path) -> None:
    sc = tmp_path / "long.toml"
    sc.write_text(
        'run = {duration = "10s", max_events = 10000}\n[[vm]]\nvcpus = 2\n'
        'workload = {model = "compute-sleep", '
        'params = {compute = "exp(10us)", sleep = "exp(10us)"}}\n'
    )
    p = vcpulab("run", str(sc))
    one_line_error(p, "run.max_events")


@needs_core
def test_timeout_ends_a_run(tmp_path: Path) -> None:
    sc = tmp_path / "long.toml"
    sc.write_text(
        'run = {duration = "100000s"}\nhost = {pcpus = 4}\n[[vm]]\nvcpus = 8\n'
        'workload = {model = "compute-sleep", '
        'params = {compute = "exp(10us)", sleep = "exp(10us)"}}\n'
    )
    start = time.monotonic()
    p = vcpulab("run", str(sc), "--timeout", "0.5")
    one_line_error(p, "timeout")
    assert time.monotonic() - start < 15


def _wait_for_cpu_seconds(pid: int, cpu_s: float, deadline_s: float) -> None:
    """Until process `pid` has used `cpu_s` of CPU time (Linux /proc), or a fixed 3 s
    where /proc is missing; at most `deadline_s` of wall time."""
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        time.sleep(3.0)
        return
    ticks = os.sysconf("SC_CLK_TCK")
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            return
        # utime and stime are fields 14 and 15 of stat(5); here after the comm field.
        if (int(fields[11]) + int(fields[12])) / ticks >= cpu_s:
            return
        time.sleep(0.05)


@needs_core
def test_ctrl_c_stops_a_run_within_a_second(tmp_path: Path) -> None:
    sc = tmp_path / "long.toml"
    sc.write_text(
        'run = {duration = "100000s"}\nhost = {pcpus = 4}\n[[vm]]\nvcpus = 8\n'
        'workload = {model = "compute-sleep", '
        'params = {compute = "exp(10us)", sleep = "exp(10us)"}}\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "vcpulab", "run", str(sc)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
    )
    # Wait until the run is under way: imports take well under a second of CPU time,
    # so a child that has used a full second is simulating (on a loaded machine a fixed
    # sleep can end while it is still importing).
    _wait_for_cpu_seconds(proc.pid, 1.0, deadline_s=60.0)
    assert proc.poll() is None
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - sent < 1.5, err
    assert proc.returncode == 130, err
    assert "Traceback" not in err


@needs_core
def test_a_sweep_point_that_cannot_run_does_not_block_the_sweep(tmp_path: Path) -> None:
    p = vcpulab(
        "sweep",
        str(EDGES / "hangsweep.toml"),
        "--no-store",
        "--grid",
        "vm.0.workload.params.repeat=0,1",
        timeout=60,
    )
    assert "Traceback" not in p.stderr
    assert p.returncode in (1, 2), (p.stdout, p.stderr)
    assert "forever" in p.stderr


# --- 8: unbounded memory from input ------------------------------------------------------


@needs_core
def test_group_threads_are_capped() -> None:
    one_line_error(vcpulab("run", str(EDGES / "group-threads.toml")), "100000")


@needs_core
def test_non_regular_trace_file_refused(tmp_path: Path) -> None:
    p = vcpulab("run", str(EDGES / "devzero.toml"), "--allow-paths", timeout=30)
    one_line_error(p, "not a regular file")
    # Without --allow-paths the absolute path is refused before it is opened.
    one_line_error(vcpulab("run", str(EDGES / "devzero.toml")), "--allow-paths")


@needs_core
def test_trace_paths_stay_in_the_scenario_folder(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "outside.trace").write_text("0 compute 1ms\n")
    sc = sub / "s.toml"
    sc.write_text(
        'run = {duration = "5ms"}\n[[vm]]\nvcpus = 1\n'
        'workload = {model = "trace", params = {file = "../outside.trace"}}\n'
    )
    one_line_error(vcpulab("run", str(sc)), "--allow-paths")
    ok = vcpulab("run", str(sc), "--allow-paths", "--json")
    assert ok.returncode == 0, ok.stderr


@needs_core
def test_errors_do_not_echo_the_file_they_failed_to_parse(tmp_path: Path) -> None:
    secret = tmp_path / "secret.trace"
    secret.write_text("PASSWORD=hunter2\n")
    sc = tmp_path / "s.toml"
    sc.write_text(
        'run = {duration = "5ms"}\n[[vm]]\nvcpus = 1\n'
        'workload = {model = "trace", params = {file = "secret.trace"}}\n'
    )
    p = vcpulab("run", str(sc))
    assert p.returncode == 2
    assert "hunter2" not in p.stderr + p.stdout


@needs_core
def test_large_sweeps_ask_first() -> None:
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vcpulab",
            "sweep",
            str(EDGES / "name-bool.toml"),
            "--no-store",
            "--seeds",
            "20001",
        ],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    one_line_error(p, "--yes")


# --- 9: silent wrong results -------------------------------------------------------------


@needs_core
@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("nan-haltpoll.toml", "haltpoll_max_us"),
        ("name-bool.toml", "vm.0.name"),
    ],
)
def test_impossible_values_are_refused(name: str, needle: str) -> None:
    one_line_error(vcpulab("run", str(EDGES / name)), needle)


@needs_core
def test_a_cpuset_past_vcpu_128_runs_its_threads_there() -> None:
    # A 200-vCPU VM with cpuset "150-199" once ran its threads on vCPUs 22-25 (the set
    # wrapped at 128 bits); then it was refused; now its four threads run on 150-153.
    p = vcpulab("run", str(EDGES / "cpuset-200.toml"), "--json")
    assert p.returncode == 0, p.stderr
    busy = [v["vcpu"] for v in json.loads(p.stdout)["vcpus"] if v["user_ns"] > 0]
    assert busy and all(150 <= v <= 199 for v in busy), busy
    p = vcpulab("run", str(EDGES / "cpuset-200.toml"), "--set", 'vm.0.guest.cpuset="150-200"')
    one_line_error(p, "vm.0.guest.cpuset", "vCPU 200")


@needs_core
@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("host.costs.vmexit_ns=9223372036854775807", "vmexit_ns"),
        ("vm.0.guest.pv_spin_us=-1.0", "pv_spin_us"),
        ("vm.0.guest.mutex_spin_us=inf", "mutex_spin_us"),
        ("host.cache.touch_kib_per_us=nan", "touch_kib_per_us"),
    ],
)
def test_numbers_are_finite_and_in_range(override: str, needle: str) -> None:
    p = vcpulab("run", str(EDGES / "name-bool.toml"), "--set", "vm.0.name=a", "--set", override)
    one_line_error(p, needle)


# --- 10: one-line errors -----------------------------------------------------------------


@pytest.mark.parametrize("seed", ["-1", "18446744073709551616", "x"])
def test_bad_seed(seed: str) -> None:
    one_line_error(vcpulab("run", str(EDGES / "hang.toml"), "--seed", seed), "--seed")


def test_nul_in_path(capsys: pytest.CaptureFixture[str]) -> None:
    # argv cannot carry a NUL byte; the API and main() can.
    from vcpulab.cli import main

    assert main(["run", "a\x00b.toml"]) == 2
    assert main(["trace", str(EDGES / "hang.toml"), "-o", "x\x00y.json"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("NUL") == 2


@needs_core
def test_nul_in_trace_path() -> None:
    one_line_error(vcpulab("run", str(EDGES / "nul-path.toml")), "NUL")


@needs_core
def test_deeply_nested_input() -> None:
    p = vcpulab("run", str(EDGES / "deep-file.toml"))
    one_line_error(p)


@needs_core
def test_trace_to_a_directory(tmp_path: Path) -> None:
    p = vcpulab("trace", str(EDGES / "name-bool.toml"), "-o", str(tmp_path))
    one_line_error(p, "directory")


@needs_core
@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
def test_trace_to_a_full_disk_fails(tmp_path: Path) -> None:
    # /dev/full is not a regular file we can rename onto; a small file-size limit is a
    # full disk for the temporary file.
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    out = tmp_path / "t.json"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "vcpulab",
            "trace",
            str(EDGES / "name-bool.toml"),
            "--set",
            "run.duration=20ms",
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=limit,
    )
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr
    assert not out.exists()
    assert not [f for f in tmp_path.iterdir() if f.name.startswith(".")]


def test_foreign_sqlite_store_is_refused_unmodified(tmp_path: Path) -> None:
    db = tmp_path / "other.sqlite"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.commit()
    con.close()
    before = db.read_bytes()
    one_line_error(vcpulab("results", "ls", "--store", str(db)), "not a vcpulab results store")
    assert db.read_bytes() == before
    assert not Path(str(db) + "-wal").exists()


def test_damaged_store_is_refused(tmp_path: Path) -> None:
    from vcpulab.store import ResultsStore

    db = tmp_path / "s.sqlite"
    with ResultsStore(db) as s:
        for i in range(300):
            s._db.execute("INSERT INTO meta(key, value) VALUES (?, ?)", (f"k{i}", "x" * 500))
    data = bytearray(db.read_bytes())
    for off in range(4096 * 2, min(len(data), 4096 * 6)):
        data[off] = 0xA5
    db.write_bytes(bytes(data))
    before = db.read_bytes()
    p = vcpulab("results", "ls", "--store", str(db))
    one_line_error(p)
    assert db.read_bytes() == before


def test_not_sqlite_store_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "s.sqlite"
    db.write_text("hello, not a database\n" * 100)
    one_line_error(vcpulab("results", "ls", "--store", str(db)))


# --- 11: writes ----------------------------------------------------------------------------


def test_sweep_out_is_checked_before_the_sweep(tmp_path: Path) -> None:
    p = vcpulab("sweep", str(EDGES / "name-bool.toml"), "--no-store", "--out", str(tmp_path))
    one_line_error(p, "directory")
    p = vcpulab("sweep", str(EDGES / "name-bool.toml"), "--no-store", "--out", "x.txt")
    one_line_error(p, ".parquet")


# --- 12: Python API inputs ---------------------------------------------------------------


def test_numpy_values_and_wrong_types() -> None:
    np = pytest.importorskip("numpy")
    import tomllib

    from vcpulab.errors import ScenarioError
    from vcpulab.scenario import dumps_toml, format_value, normalize_overrides

    text = dumps_toml(
        {"host": {"pcpus": np.int64(4), "clock_ghz": np.float32(2.5)}, "x": np.arange(3)}
    )
    data = tomllib.loads(text)
    assert data["host"]["pcpus"] == 4 and data["x"] == [0, 1, 2]
    assert format_value(np.int32(7)) == "7"
    assert normalize_overrides({"host.pcpus": np.int64(2)}) == ["host.pcpus=2"]
    with pytest.raises(ScenarioError):
        dumps_toml({"host": {"pcpus": object()}})
    with pytest.raises(ScenarioError):
        format_value(object())
    with pytest.raises(ScenarioError):
        format_value(float("nan"))


def test_sweep_grid_accepts_numpy_values() -> None:
    np = pytest.importorskip("numpy")
    from vcpulab.sweeps import normalize_grid

    grid = normalize_grid({"host.pcpus": np.array([1, 2]), "x": [np.float64(0.5)]})
    assert grid == [("host.pcpus", ["1", "2"]), ("x", ["0.5"])]


def test_package_metadata() -> None:
    import tomllib

    from conftest import ROOT

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["readme"] == "README.md" and meta["classifiers"]
    assert "plot" in meta["optional-dependencies"]
    assert (ROOT / "python" / "vcpulab" / "py.typed").exists()


# --- found by trying the tool as a new user would ---------------------------------------

TINY = """
[run]
duration = "10ms"
[host]
pcpus = 2
[[vm]]
vcpus = 2
workload = { model = "cpu-bomb" }
"""


def test_grid_values_may_hold_commas() -> None:
    from vcpulab.sweeps import parse_grid_arg

    key, values = parse_grid_arg("vm.0.workload.params.compute=uniform(1ms, 2ms),exp(1ms)")
    assert key == "vm.0.workload.params.compute"
    assert values == ["uniform(1ms, 2ms)", "exp(1ms)"]
    assert parse_grid_arg('vm.0.pin=["0", "1"],"0,1"')[1] == ['["0", "1"]', '"0,1"']


def test_grid_mistakes_are_named(tmp_path: Path) -> None:
    f = tmp_path / "tiny.toml"
    f.write_text(TINY)
    one_line_error(vcpulab("sweep", str(f), "--grid", "vm.0.vcpus", "--no-store"), "--grid")
    # A grid over the seed would collapse into one point: --seeds is the way.
    one_line_error(vcpulab("sweep", str(f), "--grid", "seed=1,2", "--no-store"), "seed", "--seeds")
    one_line_error(vcpulab("sweep", str(f), "-j", "0", "--no-store"), "jobs", "at least 1")
    one_line_error(
        vcpulab("sweep", str(f), "--grid", "vm.0.vcpus=1,1", "--no-store"), "more than once"
    )


@needs_core
def test_unknown_metric_and_table_list_the_allowed_ones(tmp_path: Path) -> None:
    f = tmp_path / "tiny.toml"
    f.write_text(TINY)
    p = vcpulab("sweep", str(f), "--no-store", "--no-progress", "-j", "1", "--metric", "wake")
    one_line_error(p, "wake", "allowed:", "cpu_share")
    p = vcpulab("sweep", str(f), "--no-store", "--no-progress", "-j", "1", "--table", "vmz")
    one_line_error(p, "vmz", "allowed:", "vcpus")


@needs_core
def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    f = tmp_path / "tiny.toml"
    f.write_text(TINY)
    p = subprocess.run(
        f"{sys.executable} -m vcpulab run {f} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
        executable="/bin/bash",
        env={**os.environ, "PYTHONUNBUFFERED": "0"},
    )
    assert "error" not in p.stderr.lower(), p.stderr
    assert "Traceback" not in p.stderr, p.stderr


@needs_core
def test_api_seed_out_of_range_is_a_scenario_error() -> None:
    import vcpulab

    with pytest.raises(vcpulab.ScenarioError, match="seed"):
        vcpulab.run(TINY, seed=-3)


@needs_core
def test_a_trace_window_after_the_end_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "tiny.toml"
    f.write_text(TINY)
    p = vcpulab("trace", str(f), "--from", "20ms", "-o", str(tmp_path / "t.json"))
    one_line_error(p, "--from", "end")


@needs_core
def test_sweeps_print_the_runs_warnings(tmp_path: Path) -> None:
    # APPLE given too little time to close an epoch says so in each report.
    pair = Path(__file__).resolve().parents[1] / "scenarios" / "apple" / "pair.toml"
    p = vcpulab(
        "sweep",
        str(pair),
        "--set",
        "preset=apple",
        "--set",
        "run.duration=5ms",
        "--no-store",
        "--no-progress",
        "-j",
        "1",
    )
    assert p.returncode == 0, p.stderr
    assert "warning" in p.stderr and "APPLE" in p.stderr, p.stderr


@needs_core
def test_run_compare_prints_the_modes(tmp_path: Path) -> None:
    f = tmp_path / "cmp.toml"
    f.write_text(TINY.replace('duration = "10ms"', 'duration = "10ms"\ncompare = ["native"]'))
    p = vcpulab("run", str(f))
    assert p.returncode == 0, p.stderr
    assert "run.compare" in p.stdout and "native" in p.stdout, p.stdout


@needs_core
def test_trace_files_are_read_from_toml_text_and_dicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import vcpulab

    (tmp_path / "w.trace").write_text((EDGES / "pipeline.trace").read_text())
    monkeypatch.chdir(tmp_path)
    wl = {"model": "trace", "params": {"file": "w.trace"}}
    sc = {"run": {"duration": "5ms"}, "host": {"pcpus": 2}, "vm": [{"vcpus": 2, "workload": wl}]}
    assert vcpulab.run(sc).end_ns > 0
    text = vcpulab.scenario.dumps_toml(sc)
    assert vcpulab.run(text).end_ns > 0
