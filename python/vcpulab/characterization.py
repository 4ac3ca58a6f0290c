"""`vcpulab characterize`: a catalog model run natively (preset "native", as many CPUs
as threads unless given) at several thread counts, with the counters that say how it
synchronizes: run time, speedup, idle transitions, wake-ups, lock traffic, spinning and
TLB shootdowns, futex calls and IPIs. All numbers come from the core's report; nothing
is simulated here."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

DEFAULT_THREADS: tuple[int, ...] = (1, 2, 4, 8, 16)

COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("threads", "threads", "{:d}"),
    ("run_s", "run s", "{:.3f}"),
    ("speedup", "speedup", "{:.2f}"),
    ("idle_per_s_cpu", "idle/s/CPU", "{:.0f}"),
    ("wakeups_per_s", "wake-ups/s", "{:.0f}"),
    ("lock_acq_per_s", "lock acq/s", "{:.0f}"),
    ("lock_contended_pct", "contended %", "{:.1f}"),
    ("spin_pct", "spin %", "{:.1f}"),
    ("tlb_shootdowns_per_s", "shootdowns/s", "{:.0f}"),
    ("futex_per_s", "futex/s", "{:.0f}"),
    ("ipis_per_s", "IPIs/s", "{:.0f}"),
)


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(str(v))


def scenario_text(
    model: str,
    threads: int,
    *,
    pcpus: int | None = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 1,
    duration: str = "600s",
) -> str:
    """The native scenario characterize runs for one thread count."""
    cpus = pcpus if pcpus is not None else threads
    inner = ", ".join(f"{k} = {_toml_value(v)}" for k, v in (params or {}).items())
    return (
        f'name = "characterize-{model}-{threads}"\npreset = "native"\nseed = {seed}\n'
        f'[run]\nduration = "{duration}"\n[host]\npcpus = {cpus}\n'
        f'[[vm]]\nname = "app"\nvcpus = {cpus}\n'
        f'workload = {{ model = "{model}", threads = {threads}, params = {{ {inner} }} }}\n'
    )


def characterize(
    model: str,
    threads: Sequence[int] = DEFAULT_THREADS,
    *,
    pcpus: int | None = None,
    params: Mapping[str, Any] | None = None,
    seed: int = 1,
    duration: str = "600s",
) -> list[dict[str, Any]]:
    """Run `model` natively at each thread count; one row of counters per count.

    Rates are per second of run time; `speedup` is relative to the first thread count.
    Raises `ScenarioError` on a bad model or parameter, `ValueError` on a thread count
    below 1 or a run that does not finish within `duration`.
    """
    from vcpulab import run

    rows: list[dict[str, Any]] = []
    for t in threads:
        if t < 1:
            raise ValueError(f"threads: {t} is not allowed; expected 1 or more")
        rep = run(scenario_text(model, t, pcpus=pcpus, params=params, seed=seed, duration=duration))
        vm = rep.rows("vms")[0]
        if not vm["finished"]:
            raise ValueError(
                f"{model} with {t} threads did not finish within {duration} "
                f"(stop: {rep.stop_reason}); pass a longer duration or a smaller scale"
            )
        secs = float(vm["completion_ns"]) / 1e9
        cpus = pcpus if pcpus is not None else t
        locks = [r for r in rep.rows("locks") if r["vm"] == "app"]
        acq = sum(int(r["acquisitions"]) for r in locks)
        cont = sum(int(r["contended"]) for r in locks)
        tb = vm["time"] if isinstance(vm.get("time"), Mapping) else {}
        spin = float(tb.get("spin_ns", vm.get("time.spin_ns", 0)) or 0)
        busy = float(tb.get("cpu_ns", vm.get("time.cpu_ns", 0)) or 0)
        rows.append(
            {
                "model": model,
                "threads": t,
                "cpus": cpus,
                "run_s": secs,
                "speedup": float("nan"),
                "idle_per_s_cpu": float(vm["idle_transitions_per_s"]),
                "wakeups_per_s": float(vm["wake_latency_count"]) / secs,
                "lock_acq_per_s": acq / secs,
                "lock_contended_pct": 100.0 * cont / acq if acq else 0.0,
                "spin_pct": 100.0 * spin / busy if busy else 0.0,
                "tlb_shootdowns_per_s": float(vm["tlb_shootdowns"]) / secs,
                "futex_per_s": float(vm["futex_calls"]) / secs,
                "ipis_per_s": float(int(vm["ipis_resched"]) + int(vm["ipis_tlb"])) / secs,
                "work_units": int(vm["work_units"]),
            }
        )
    if rows:
        base = rows[0]["run_s"]
        for r in rows:
            r["speedup"] = base / r["run_s"] if r["run_s"] > 0 else float("nan")
    return rows


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The rows as a fixed-width text table."""
    head = [h for _, h, _ in COLUMNS]
    body = [[fmt.format(r[k]) for k, _, fmt in COLUMNS] for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)


def _threads(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--threads {text!r}: expected whole numbers separated by commas, e.g. 1,4,16"
        ) from None
    if not out or any(t < 1 for t in out):
        raise argparse.ArgumentTypeError(f"--threads {text!r}: every count must be 1 or more")
    return out


def add_parser(sub: Any) -> None:
    """Register `characterize` on the CLI's subparsers."""
    p = sub.add_parser("characterize", help="run a model natively at several thread counts")
    p.add_argument("model", help="catalog model name (vcpulab list workloads)")
    p.add_argument(
        "--threads",
        type=_threads,
        action="append",
        default=None,
        help="thread counts, comma-separated or repeated: 1,4,16 or --threads 1 --threads 4 "
        f"(default {','.join(str(t) for t in DEFAULT_THREADS)})",
    )
    p.add_argument("--pcpus", type=int, default=None, help="CPUs (default: = threads)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--duration", default="600s", help="longest run allowed")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.set_defaults(func=cmd_characterize)


def _param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ValueError(f"--param {text!r}: expected KEY=VALUE")
    k, v = text.split("=", 1)
    for conv in (int, float):
        try:
            return k.strip(), conv(v)
        except ValueError:
            pass
    if v in ("true", "false"):
        return k.strip(), v == "true"
    return k.strip(), v


def cmd_characterize(args: argparse.Namespace) -> int:
    from vcpulab.errors import ScenarioError

    try:
        params = dict(_param(x) for x in args.param)
        threads = (
            [t for group in args.threads for t in group] if args.threads else list(DEFAULT_THREADS)
        )
        rows = characterize(
            args.model,
            threads,
            pcpus=args.pcpus,
            params=params,
            seed=args.seed,
            duration=args.duration,
        )
    except (ScenarioError, ValueError) as e:
        print(f"vcpulab: error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(f"{args.model}, native:")
        print(format_table(rows))
    return 0
