"""The `vcpulab` command line."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TextIO

from vcpulab.characterization import add_parser as add_characterize_parser
from vcpulab.errors import CoreUnavailableError, ScenarioError, SimulationError, UsageError
from vcpulab.store import DEFAULT_STORE, StoreError

PROG = "vcpulab"
EXIT_USAGE = 2


class CliParser(argparse.ArgumentParser):
    """argparse with one-line errors (`vcpulab: error: ...`) and exit status 2."""

    def error(self, message: str) -> NoReturn:
        hint = f" (see `{self.prog} --help`)"
        raise UsageError(message + hint)


def _one_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return "; ".join(lines) if lines else ""


def _fail(message: str, status: int = EXIT_USAGE, *, kind: str = "error") -> int:
    print(f"{PROG}: {kind}: {_one_line(message)}", file=sys.stderr)
    return status


# --- helpers ---------------------------------------------------------------------------------


def _is_tty(stream: TextIO) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def _overrides(args: argparse.Namespace) -> list[str]:
    from vcpulab.scenario import normalize_overrides

    return normalize_overrides(args.set or [])


def _read(path: str, args: argparse.Namespace | None = None) -> str:
    from vcpulab.scenario import load_scenario

    if "\x00" in path:
        raise UsageError("the scenario path contains a NUL byte")
    return load_scenario(Path(path), allow_paths=bool(getattr(args, "allow_paths", False)))


SEED_MAX = 2**63 - 1


def _seed(text: str) -> int:
    """argparse type of --seed: a whole number from 0 to 2^63-1."""
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= SEED_MAX:
        raise argparse.ArgumentTypeError(f"{value} is not allowed; expected 0 to {SEED_MAX}")
    return value


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not (value > 0 and value < 1e9):
        raise argparse.ArgumentTypeError(f"{text} is not allowed; expected a positive number")
    return value


def _set_timeout(args: argparse.Namespace) -> None:
    """--timeout reaches the core through the environment, so sweep workers see it too."""
    import os

    t = getattr(args, "timeout", None)
    if t is not None:
        os.environ["VCPULAB_TIMEOUT"] = repr(t)


def _check_output(path: str, suffixes: tuple[str, ...] | None = None) -> Path:
    """Refuse an output path that cannot be written, before any work starts."""
    if "\x00" in path:
        raise UsageError("the output path contains a NUL byte")
    out = Path(path)
    if out.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    if suffixes is not None and not any(path.lower().endswith(x) for x in suffixes):
        raise UsageError(f"cannot write {path}: use a {', '.join(suffixes)} file name")
    parent = out.parent
    if parent.exists() and not parent.is_dir():
        raise UsageError(f"cannot write {path}: {parent} is not a directory")
    import os

    if parent.exists() and not os.access(parent, os.W_OK):
        raise UsageError(f"cannot write {path}: {parent} is not writable")
    return out


def _print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


# --- commands --------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    from vcpulab import _native
    from vcpulab.report import Report

    text = _read(args.file, args)
    _set_timeout(args)
    raw = _native.core_run(text, _overrides(args), args.seed)
    if args.json:
        sys.stdout.write(raw.rstrip("\n") + "\n")
    else:
        print(Report.from_json(raw).summary())
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from vcpulab import _native

    text = _read(args.file, args)
    sys.stdout.write(_native.core_explain(text, _overrides(args), args.seed).rstrip("\n") + "\n")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    from vcpulab import _native
    from vcpulab.report import Report

    out = _check_output(args.output)
    text = _read(args.file, args)
    _set_timeout(args)
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = _native.core_trace(text, str(out), _overrides(args), args.seed)
    if args.json:
        sys.stdout.write(raw.rstrip("\n") + "\n")
    else:
        print(Report.from_json(raw).summary())
        print(f"\ntrace written to {out} (open it in ui.perfetto.dev or chrome://tracing)")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from vcpulab.format import render_table

    what = args.what or "all"
    sections: list[tuple[str, list[tuple[str, str]]]] = []
    if what in ("presets", "all"):
        import vcpulab

        sections.append(("presets", vcpulab.presets()))
    if what in ("workloads", "all"):
        import vcpulab

        sections.append(("workloads", vcpulab.workloads()))
    if what in ("experiments", "all"):
        from vcpulab.experiments import registry

        sections.append(("experiments", [(e.id, e.title) for e in registry().values()]))
    if args.json:
        _print_json(
            {name: [{"name": n, "description": d} for n, d in items] for name, items in sections}
        )
        return 0
    for i, (name, items) in enumerate(sections):
        if i:
            print()
        print(render_table([name, "description"], items, "ll"))
    return 0


def _plot_sweep(args: argparse.Namespace, outcome: Any) -> list[Path]:
    import pandas as pd

    from vcpulab.plots import plot_sweep
    from vcpulab.sweeps import id_columns, summarize

    frame = outcome.frame
    numeric = sorted(
        c
        for c in frame.columns
        if c not in {*outcome.grid_columns, "seed", "point"}
        and pd.api.types.is_numeric_dtype(frame[c])
        and not pd.api.types.is_bool_dtype(frame[c])
    )
    if args.plot not in numeric:
        raise UsageError(
            f"--plot {args.plot!r}: not a numeric column of table {args.table!r}; "
            f"allowed values are {', '.join(numeric)}"
        )
    summary = summarize(frame, outcome.grid_columns, metrics=[args.plot], table=args.table)
    path = Path(args.plot_out or f"out/sweep-{outcome.sweep_id}-{args.plot}.png")
    if path.suffix.lower() not in (".png", ".svg"):
        raise UsageError(f"--plot-out {str(path)!r}: allowed suffixes are .png and .svg")
    title = f"{Path(args.file).stem}: {args.plot} ({args.table}, {args.seeds} seed(s))"
    return plot_sweep(
        summary,
        outcome.grid_columns,
        id_columns(frame),
        args.plot,
        path.with_suffix(".png"),
        title=title,
        ci_column=f"{args.plot}_ci95",
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    from vcpulab.executors import make_executor
    from vcpulab.sweeps import format_summary, run_sweep, summarize

    store = ":memory:" if args.no_store else args.store
    if args.out:
        _check_output(args.out, (".parquet", ".csv", ".json"))
    if "\x00" in args.file:
        raise UsageError("the scenario path contains a NUL byte")
    _set_timeout(args)
    executor = make_executor(args.executor, args.jobs)
    progress = (not args.no_progress) and _is_tty(sys.stderr)
    if progress or args.verbose:
        print(f"{PROG}: running on {executor.describe()}, store {store}", file=sys.stderr)
    try:
        outcome = run_sweep(
            Path(args.file),
            args.grid or None,
            args.seeds,
            overrides=_overrides(args),
            executor=executor,
            store=store,
            table=args.table,
            force=args.force,
            progress=progress,
            source=args.file,
            confirm=None if args.yes else _confirm_large,
            allow_paths=args.allow_paths,
        )
    finally:
        executor.close()
    frame = outcome.frame
    assert frame is not None
    summary = (
        summarize(frame, outcome.grid_columns, metrics=args.metric or None, table=args.table)
        if not frame.empty
        else None
    )
    if args.out:
        _write_frame(frame, Path(args.out))
    plotted = _plot_sweep(args, outcome) if args.plot and not frame.empty else []
    if args.json:
        _print_json(
            {
                "sweep_id": outcome.sweep_id,
                "store": outcome.store_path,
                "points": outcome.planned,
                "computed": outcome.computed,
                "from_store": outcome.skipped,
                "failed": outcome.failed,
                "summary": [] if summary is None else json.loads(summary.to_json(orient="records")),
            }
        )
    else:
        print(
            f"sweep {outcome.sweep_id}: {outcome.planned} points, {outcome.computed} computed, "
            f"{outcome.skipped} from the store, {len(outcome.failed)} failed"
            + (f" (store {outcome.store_path})" if not args.no_store else "")
        )
        if summary is not None:
            print(f"mean ± 95% CI [min..max, median] over seeds ({args.table}):")
            print(format_summary(summary))
        if args.out:
            print(f"results written to {args.out}")
        if plotted:
            print(f"plot written to {', '.join(str(p) for p in plotted)}")
    if outcome.failed:
        for f in outcome.failed[:5]:
            print(
                f"{PROG}: point {f['point']} {f['params']} seed {f['seed']} failed: "
                f"{_one_line(f['error'])}",
                file=sys.stderr,
            )
        if len(outcome.failed) > 5:
            print(f"{PROG}: ... and {len(outcome.failed) - 5} more failed points", file=sys.stderr)
        return 1
    return 0


def _confirm_large(points: int) -> bool:
    """Ask before a sweep of more than `sweeps.CONFIRM_ABOVE` points (`--yes` skips)."""
    if not _is_tty(sys.stdin):
        raise UsageError(f"the sweep has {points} points; give --yes to run more than 10000 points")
    answer = input(f"{PROG}: the sweep has {points} points; run them? [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _write_frame(frame: Any, out: Path) -> None:
    """Write to a temporary file beside `out` and rename it: a failed write (full disk)
    fails the command and leaves no truncated file."""
    import os

    suffix = out.suffix.lower()
    if suffix not in (".parquet", ".csv", ".json"):
        raise UsageError(f"cannot write {out}: use a .parquet, .csv or .json file name")
    out.parent.mkdir(parents=True, exist_ok=True)
    frame = frame.copy()
    frame.attrs = {}
    tmp = out.with_name(f".{out.name}.tmp{os.getpid()}")
    try:
        if suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        elif suffix == ".csv":
            frame.to_csv(tmp, index=False)
        else:
            frame.to_json(tmp, orient="records", indent=2)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def cmd_results(args: argparse.Namespace) -> int:
    from vcpulab.format import fmt_ns, render_table
    from vcpulab.store import ResultsStore
    from vcpulab.sweeps import collect, format_summary, summarize

    path = Path(args.store)
    if not path.exists():
        raise FileNotFoundError(f"no results store at {path} (run `vcpulab sweep` first)")
    with ResultsStore(path) as db:
        if args.action == "ls":
            sweeps = db.sweeps()
            if args.json:
                _print_json(
                    sweeps and [{k: v for k, v in s.items() if k != "scenario"} for s in sweeps]
                )
                return 0
            rows = []
            for s in sweeps:
                grid = " ".join(f"{k}={','.join(v)}" for k, v in s["grid"]) or "-"
                when = dt.datetime.fromtimestamp(s["updated_at"]).strftime("%Y-%m-%d %H:%M")
                rows.append(
                    [
                        s["id"],
                        when,
                        s["source"] or s["name"] or "-",
                        grid,
                        len(s["seeds"]),
                        s["ok"],
                        s["failed"],
                        s["planned"],
                        ",".join(s["cores"]) or "-",
                    ]
                )
            if not rows:
                print(f"no sweeps in {path}")
                return 0
            print(
                render_table(
                    [
                        "sweep",
                        "updated",
                        "scenario",
                        "grid",
                        "seeds",
                        "ok",
                        "failed",
                        "points",
                        "core",
                    ],
                    rows,
                    "lllllrrrl",
                )
            )
            return 0
        if not args.id:
            raise UsageError(f"`results {args.action}` needs a sweep or point id")
        if args.action == "show":
            try:
                sweep = db.find_sweep(args.id)
            except StoreError:
                sweep = None
            if sweep is None:
                point = db.find_point(args.id)
                if args.json:
                    sys.stdout.write((point.report or "null") + "\n")
                    return 0
                print(
                    f"point {point.key}\nseed {point.seed}, status {point.status}, "
                    f"core {point.core_version}, wall {fmt_ns((point.wall_s or 0) * 1e9)}"
                )
                if point.error:
                    print(f"error: {point.error}")
                if args.resolved or point.report is None:
                    print("\nresolved scenario:\n" + point.resolved)
                if point.report:
                    from vcpulab.report import Report

                    print()
                    print(Report.from_json(point.report).summary())
                return 0
            frame, failed = collect(db, sweep["id"], args.table or sweep["table_name"])
            table = args.table or sweep["table_name"]
            summary = (
                summarize(
                    frame, [k for k, _ in sweep["grid"]], table=table, metrics=args.metric or None
                )
                if not frame.empty
                else None
            )
            if args.json:
                _print_json(
                    {
                        "sweep": {k: v for k, v in sweep.items() if k != "scenario"},
                        "failed": failed,
                        "summary": []
                        if summary is None
                        else json.loads(summary.to_json(orient="records")),
                    }
                )
                return 0
            print(
                f"sweep {sweep['id']} of {sweep['source'] or sweep['name']}: "
                f"{sweep['ok']} ok, {sweep['failed']} failed, {sweep['planned']} points"
            )
            if sweep["overrides"]:
                print("overrides: " + " ".join(sweep["overrides"]))
            if summary is not None:
                print(f"mean ± 95% CI [min..max, median] over seeds ({table}):")
                print(format_summary(summary))
            for f in failed:
                print(f"failed: {f['params']} seed {f['seed']}: {_one_line(f['error'])}")
            return 0
        if args.action == "export":
            sweep = db.find_sweep(args.id)
            frame, _ = collect(db, sweep["id"], args.table or sweep["table_name"])
            out = _check_output(
                args.output or f"{sweep['id']}.parquet", (".parquet", ".csv", ".json")
            )
            _write_frame(frame, out)
            print(f"{len(frame)} rows written to {out}")
            return 0
    raise UsageError(f"unknown results action {args.action!r}")


def cmd_reproduce(args: argparse.Namespace) -> int:
    from vcpulab.executors import make_executor
    from vcpulab.experiments import get, registry, run_experiment

    exps = list(registry().values()) if args.id == "all" else [get(args.id)]
    executor = make_executor(args.executor, args.jobs)
    status = 0
    try:
        for exp in exps:
            try:
                res = run_experiment(
                    exp,
                    quick=args.quick,
                    out_dir=args.out,
                    executor=executor,
                    store=args.store,
                    progress=_is_tty(sys.stderr),
                )
            except (ScenarioError, FileNotFoundError, UsageError):
                if len(exps) == 1:
                    raise
                status = 1
                print(f"{exp.id}: error — {_one_line(str(sys.exc_info()[1]))}")
                continue
            except RuntimeError as exc:
                status = 1
                print(f"{exp.id}: error — {_one_line(str(exc))}")
                continue
            print(res.line())
            written = ", ".join(str(p) for p in (res.csv, res.png, res.text) if p is not None)
            print(f"  wrote {written}")
    finally:
        executor.close()
    return status


def cmd_validate(args: argparse.Namespace) -> int:
    from vcpulab import _native
    from vcpulab.executors import make_executor
    from vcpulab.validate import run_all, write_reports

    docs = Path(args.docs)
    figures = docs / "validation"
    executor = make_executor(args.executor, args.jobs)
    try:
        results = run_all(
            quick=args.quick,
            out_dir=figures,
            executor=executor,
            store=args.store,
            progress=_is_tty(sys.stderr),
            on_result=lambda r: print(r.line(), flush=True),
        )
    finally:
        executor.close()
    version = None
    if _native.core_available():
        version = _native.core_identity()
    md, html_path = write_reports(results, docs, quick=args.quick, version=version)
    print(f"wrote {md} and {html_path}")
    return 1 if any(r.verdict == "error" for r in results) else 0


def cmd_version(args: argparse.Namespace) -> int:
    from vcpulab import __version__, _native

    core = _native.core_identity() if _native.core_available() else "not built"
    print(f"vcpulab {__version__} (core {core})")
    return 0


# --- parser --------------------------------------------------------------------------------------


def _add_scenario_opts(p: argparse.ArgumentParser, *, seed: bool = True) -> None:
    p.add_argument("file", help="scenario file (TOML)")
    if seed:
        p.add_argument(
            "--seed", type=_seed, help="random seed, 0 to 2^63-1 (default: the scenario's)"
        )
    p.add_argument(
        "--allow-paths",
        action="store_true",
        help="let trace files be absolute paths or outside the scenario's folder",
    )
    p.add_argument(
        "--timeout",
        type=_timeout,
        metavar="SECONDS",
        help="wall-clock budget of each run; a run over it ends with an error",
    )
    p.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a scenario value, e.g. host.scheduler.slice_ms=10 (repeatable)",
    )


def build_parser() -> CliParser:
    parser = CliParser(
        prog=PROG,
        description="Deterministic simulator of consolidated virtualized multicore hosts.",
    )
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="run a scenario and print its report")
    _add_scenario_opts(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "explain",
        help="print the fully resolved scenario (TOML), after the platform profiles "
        "in use and the keys they set",
    )
    _add_scenario_opts(p)
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("trace", help="run and write a Chrome/Perfetto trace JSON")
    _add_scenario_opts(p)
    p.add_argument("-o", "--output", required=True, help="trace file to write (JSON)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("list", help="list presets, workloads or experiments")
    p.add_argument("what", nargs="?", choices=["presets", "workloads", "experiments", "all"])
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("sweep", help="run a grid of overrides x seeds")
    _add_scenario_opts(p, seed=False)
    p.add_argument(
        "--grid",
        action="append",
        metavar="KEY=V1,V2,...",
        help="a swept key and its values (repeatable: the cartesian product runs)",
    )
    p.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="number of seeds per grid point, from the scenario's seed (default 1)",
    )
    p.add_argument("--jobs", "-j", type=int, help="parallel workers (default: number of cores)")
    p.add_argument(
        "--executor",
        choices=["local", "ray"],
        default="local",
        help="local process pool (default) or Ray (RAY_ADDRESS or a local Ray)",
    )
    p.add_argument(
        "--store", default=DEFAULT_STORE, help=f"results store (SQLite; default {DEFAULT_STORE})"
    )
    p.add_argument("--no-store", action="store_true", help="keep results in memory only")
    p.add_argument("--force", action="store_true", help="recompute points already stored")
    p.add_argument("--table", default="vms", help="report table to collect (default vms)")
    p.add_argument("--metric", action="append", help="metric column(s) for the summary")
    p.add_argument("--out", help="write all rows to a .parquet, .csv or .json file")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--plot",
        metavar="METRIC",
        help="draw METRIC (mean and 95%% CI over seeds) over the first grid key, as PNG and SVG",
    )
    p.add_argument(
        "--plot-out",
        metavar="PATH",
        help="where to write the plot (default out/sweep-<id>-<metric>.png; an .svg beside it)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--yes", "-y", action="store_true", help="do not ask before more than 10000 points"
    )
    p.add_argument("--verbose", "-v", action="store_true")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("results", help="inspect the results store: ls | show ID | export ID")
    p.add_argument("action", choices=["ls", "show", "export"])
    p.add_argument("id", nargs="?", help="sweep id or point id (a prefix is enough)")
    p.add_argument("--store", default=DEFAULT_STORE, help=f"default {DEFAULT_STORE}")
    p.add_argument("--table", help="report table (default: the sweep's)")
    p.add_argument("--metric", action="append", help="metric column(s) for the summary")
    p.add_argument("-o", "--output", help="export file (.parquet, .csv or .json)")
    p.add_argument("--resolved", action="store_true", help="show: print the resolved scenario")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_results)

    for name, helptext in (("reproduce", "reproduce a published figure (ID or all)"),):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("id", help="experiment id (see `vcpulab list experiments`) or all")
        p.add_argument("--quick", action="store_true", help="fewer seeds, shorter runs")
        p.add_argument("--out", default="out/reproduce", help="output folder")
        p.add_argument("--jobs", "-j", type=int)
        p.add_argument("--executor", choices=["local", "ray"], default="local")
        p.add_argument("--store", help="results store to reuse (default: none, in memory)")
        p.set_defaults(func=cmd_reproduce)

    p = sub.add_parser("validate", help="run every reproduction; write docs/validation.md")
    p.add_argument("--quick", action="store_true", help="fewer seeds, shorter runs")
    p.add_argument("--docs", default="docs", help="docs folder to write into (default docs)")
    p.add_argument("--jobs", "-j", type=int)
    p.add_argument("--executor", choices=["local", "ray"], default="local")
    p.add_argument("--store", help="results store to reuse (default: none, in memory)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("version", help="print versions")
    p.set_defaults(func=cmd_version)
    add_characterize_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if args.version:
            return cmd_version(args)
        if not getattr(args, "func", None):
            parser.print_help()
            return EXIT_USAGE
        return int(args.func(args) or 0)
    except ScenarioError as exc:
        return _fail(str(exc))
    except UsageError as exc:
        return _fail(str(exc))
    except FileNotFoundError as exc:
        msg = str(exc)
        if exc.filename and exc.strerror:
            msg = f"{exc.strerror}: {exc.filename}"
        return _fail(msg)
    except StoreError as exc:
        return _fail(str(exc))
    except sqlite3.Error as exc:
        return _fail(f"results store: {exc}")
    except CoreUnavailableError as exc:
        return _fail(str(exc), 1)
    except RecursionError:
        return _fail("the input is nested too deeply")
    except MemoryError:
        return _fail("out of memory: the input asks for more than this machine has")
    except ValueError as exc:  # e.g. a NUL byte in a path
        return _fail(str(exc))
    except OSError as exc:  # full disk, permission, read-only file system
        if exc.strerror:
            where = f": {exc.filename}" if exc.filename else ""
            return _fail(f"{exc.strerror}{where}")
        return _fail(str(exc) or type(exc).__name__)
    except SimulationError as exc:
        return _fail(str(exc), 1, kind="internal error")
    except KeyboardInterrupt:
        print(
            f"\n{PROG}: interrupted; finished points are kept in the store: "
            "run the same command again to resume",
            file=sys.stderr,
        )
        return 130
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            sys.stdout.close()
        return 0


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
