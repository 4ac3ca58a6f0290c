"""Plain-text rendering for terminals: aligned tables, durations, the run summary."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

TIME_FIELDS: tuple[tuple[str, str], ...] = (
    ("user_ns", "user"),
    ("kernel_ns", "kern"),
    ("spin_ns", "spin"),
    ("idle_poll_ns", "poll"),
    ("halted_ns", "halt"),
    ("runnable_ns", "wait"),
    ("overhead_ns", "ovh"),
)


def fmt_ns(ns: float | None) -> str:
    """A duration in nanoseconds with a readable unit."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    value = float(ns)
    sign = "-" if value < 0 else ""
    value = abs(value)
    if value < 1e3:
        return f"{sign}{value:.0f} ns"
    if value < 1e6:
        return f"{sign}{value / 1e3:.1f} us"
    if value < 1e9:
        return f"{sign}{value / 1e6:.2f} ms"
    return f"{sign}{value / 1e9:.3f} s"


def fmt_num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 10 ** (-digits)):
            return f"{value:.{digits}g}"
        return f"{value:.{digits}f}"
    return str(value)


def render_table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], align: str | None = None
) -> str:
    """Align columns; `align` has one of 'l'/'r' per column (default: first left, rest right)."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    if align is None:
        align = "l" + "r" * (len(headers) - 1)

    def line(items: Sequence[str]) -> str:
        parts = [
            item.ljust(widths[i]) if align[i] == "l" else item.rjust(widths[i])
            for i, item in enumerate(items)
        ]
        return "  ".join(parts).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out.extend(line(row) for row in cells)
    return "\n".join(out)


def _pct(part: float, total: float) -> str:
    return f"{100.0 * part / total:.1f}" if total > 0 else "-"


def format_report(data: Mapping[str, Any]) -> str:
    """The human summary of a report dict (schema 1)."""
    sc = data.get("scenario") or {}
    out: list[str] = []
    head = [f"scenario {sc.get('name', '?')}"]
    if sc.get("preset"):
        head.append(f"preset {sc['preset']}")
    if sc.get("scheduler"):
        head.append(f"scheduler {sc['scheduler']}")
    if sc.get("pcpus") is not None:
        head.append(f"{sc['pcpus']} pCPUs")
    if sc.get("seed") is not None:
        head.append(f"seed {sc['seed']}")
    out.append(", ".join(head))
    out.append(
        f"simulated {fmt_ns(data.get('end_ns'))} (stop: {data.get('stop_reason', '?')}), "
        f"{fmt_num(data.get('events'))} events"
    )
    for warning in data.get("warnings") or []:
        out.append(f"warning: {warning}")

    vms = data.get("vms") or []
    if vms:
        out.append("")
        out.append("time breakdown, % of the VM's vCPU time")
        headers = ["vm", "vcpus", "weight", *(label for _, label in TIME_FIELDS)]
        rows = []
        for vm in vms:
            total = float(sum(vm.get(f, 0) or 0 for f, _ in TIME_FIELDS))
            rows.append(
                [
                    vm.get("vm", "?"),
                    vm.get("vcpus", "-"),
                    vm.get("weight", "-"),
                    *(_pct(vm.get(f, 0) or 0, total) for f, _ in TIME_FIELDS),
                ]
            )
        out.append(render_table(headers, rows))

        out.append("")
        out.append("CPU share of the host vs entitlement; completion and wake-up latency")
        headers = [
            "vm",
            "share",
            "entitled",
            "ratio",
            "cap%",
            "completion",
            "units/s",
            "switches",
            "halts",
            "wake mean",
            "wake p50",
            "wake p99",
        ]
        rows = []
        for vm in vms:
            finished = vm.get("finished")
            completion = fmt_ns(vm.get("completion_ns")) if finished else "-"
            rows.append(
                [
                    vm.get("vm", "?"),
                    fmt_num(vm.get("cpu_share")),
                    fmt_num(vm.get("entitlement")),
                    fmt_num(vm.get("share_ratio")),
                    fmt_num(vm.get("cap_pct"), 1) if vm.get("cap_pct") is not None else "-",
                    completion,
                    fmt_num(vm.get("throughput_per_s"), 1),
                    fmt_num(vm.get("vcpu_switches")),
                    fmt_num(vm.get("halts")),
                    fmt_ns(vm.get("wake_latency_mean_ns")) if vm.get("wakes") else "-",
                    fmt_ns(vm.get("wake_latency_p50_ns")) if vm.get("wakes") else "-",
                    fmt_ns(vm.get("wake_latency_p99_ns")) if vm.get("wakes") else "-",
                ]
            )
        out.append(render_table(headers, rows))

    llc = data.get("llc") or []
    if llc:
        out.append("")
        first = llc[0]
        out.append(
            f"cache study: {first.get('contexts', '?')} contexts on one core, "
            f"{fmt_num(first.get('slice_ms'), 3)} ms slices, insertion {first.get('policy', '?')}"
        )
        headers = [
            "vm",
            "model",
            "class",
            "insertion",
            "lru quanta",
            "CPI",
            "CPI solo",
            "extra CPI %",
            "MPKI",
            "MPKI solo",
            "traffic B/ki",
            "prefetch B/ki",
        ]
        rows = [
            [
                r.get("vm", "?"),
                r.get("model", "?"),
                r.get("class", "?"),
                r.get("insertion", "?"),
                fmt_num(r.get("lru_quanta_frac"), 2),
                fmt_num(r.get("cpi"), 3),
                fmt_num(r.get("cpi_solo"), 3),
                fmt_num(r.get("extra_cpi_pct"), 1),
                fmt_num(r.get("mpki"), 2),
                fmt_num(r.get("mpki_solo"), 2),
                fmt_num(r.get("traffic_bytes_per_ki"), 0),
                fmt_num(r.get("prefetch_bytes_per_ki"), 0),
            ]
            for r in llc
        ]
        out.append(render_table(headers, rows))

    pcpus = data.get("pcpus") or []
    if pcpus:
        busy = []
        for p in pcpus:
            total = sum(float(p.get(k, 0) or 0) for k in ("guest_ns", "overhead_ns", "idle_ns"))
            busy.append(float(p.get("guest_ns", 0) or 0) / total if total else 0.0)
        out.append("")
        out.append(
            f"pCPU guest utilisation: mean {100 * sum(busy) / len(busy):.1f}%, "
            f"min {100 * min(busy):.1f}%, max {100 * max(busy):.1f}%"
        )
    fairness = data.get("fairness") or {}
    if fairness.get("jain_index") is not None:
        out.append(f"Jain's fairness index: {fairness['jain_index']:.4f}")
    modes = data.get("modes") or []
    if _is_rows(modes):
        # run.compare: the focus VM alone in each mode, and how much slower the run as
        # written is than that.
        out.append("")
        out.append(f"run.compare: VM {modes[0].get('vm', '?')} in each mode")
        headers = ["mode", "completion", "throughput/s", "run as written is slower by"]
        rows = [
            [
                m.get("mode", "?"),
                fmt_ns(m.get("completion_ns")) if m.get("finished") else "-",
                fmt_num(m.get("throughput_per_s"), 1),
                fmt_num(m.get("slowdown"), 3) + "x" if m.get("slowdown") is not None else "-",
            ]
            for m in modes
        ]
        out.append(render_table(headers, rows))
    known = {"vms", "pcpus", "llc", "modes"}
    extra = [k for k, v in data.items() if k not in known and _is_rows(v)]
    if extra:
        out.append(f"more tables (--json or Report.table()): {', '.join(extra)}")
    return "\n".join(out)


def _is_rows(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(r, dict) for r in value)
