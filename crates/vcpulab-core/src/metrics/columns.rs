//! The glossary of the report: every column of every table (and every scalar of the
//! report itself) with its unit and definition. `vcpulab explain --columns` prints it and
//! docs/columns.md is generated from it; a test checks that every column a report has is
//! here, so a new column cannot land without its definition.

/// One report column: `table` is a report table ("vms", "locks", …) or "report" for the
/// report's own scalars; `names` is one column or several sharing unit and meaning,
/// separated by spaces.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub table: &'static str,
    pub names: &'static str,
    pub unit: &'static str,
    pub meaning: &'static str,
}

const fn c(
    table: &'static str,
    names: &'static str,
    unit: &'static str,
    meaning: &'static str,
) -> Column {
    Column {
        table,
        names,
        unit,
        meaning,
    }
}

pub static COLUMNS: &[Column] = &[
    c("report", "schema", "-", "version of the report's layout (raised when a column changes meaning)"),
    c("report", "core_version", "-", "version of the simulation core that wrote the report"),
    c(
        "report",
        "scenario.hash",
        "-",
        "FNV-1a (64 bit, hex) of the resolved scenario, seed included: equal hashes, same input",
    ),
    c("report", "end_ns", "ns", "simulated time at which the run stopped"),
    c("report", "stop_reason", "-", "why it stopped: duration, all-finished, event-budget, no-progress or aborted"),
    c("report", "warnings", "-", "list, absent when empty: adaptive mechanisms the run was too short to let act (Gleaner's controller measured fewer than twice; APPLE closed no epoch while its VM made PLE exits), whose figures then show their start-up; and VMs in a PLE-exit storm (over 10,000 exits per vCPU-second), whose cost rests on the PLE handler's, which the cost table has only in part and from assumed figures"),
    c("report", "events", "count", "simulation events dispatched"),
    c("report", "scenario.name", "-", "the scenario's name"),
    c("report", "scenario.seed", "-", "the seed of the run (same scenario and seed give a bit-identical report)"),
    c("report", "scenario.preset", "-", "the preset the scenario named, if any"),
    c("report", "scenario.scheduler", "-", "the host scheduler kind (cfs, eevdf, credit, credit2, gang, relaxed)"),
    c("report", "scenario.pcpus", "count", "physical CPUs of the host"),
    c("report", "scenario.duration_ns", "ns", "the run's duration limit"),
    c("report", "fairness.jain_index", "ratio 0..1", "Jain's index over the VMs' share_ratio (1 = every VM got its entitlement in equal proportion)"),
    c("report", "energy.busy_pcpu_ns", "ns", "pCPU time running guests, entry/exit overhead or host halt polling"),
    c("report", "energy.halted_pcpu_ns", "ns", "pCPU time idle (halted)"),
    c("report", "energy.joules", "J", "energy proxy: busy and halted pCPU time weighted by host.power"),
    c("report", "energy.mean_w", "W", "energy.joules divided by the run's duration"),
    c("report", "histograms.<name>[/<vm>[/<path>]].<stat>", "ns or count", "a latency histogram's count, min_ns, mean_ns, p50_ns, p90_ns, p99_ns, max_ns (percentiles interpolated within buckets of at most 1/128 relative width)"),
    c("vms", "vm", "-", "VM name"),
    c("vms", "model", "-", "the VM's workload model"),
    c("vms", "vcpus", "count", "the VM's vCPUs"),
    c("vms", "weight", "-", "the VM's scheduling weight (share)"),
    c("vms", "cap_pct", "% of one pCPU", "CPU cap, if any (100 = one pCPU)"),
    c("vms", "user_ns", "ns", "vCPU time running guest user code"),
    c("vms", "kernel_ns", "ns", "vCPU time running guest kernel code (system calls, interrupt handlers, the scheduler)"),
    c("vms", "spin_ns", "ns", "vCPU time spinning on a lock or in a busy-wait (user or kernel)"),
    c("vms", "idle_poll_ns", "ns", "vCPU time polling in the guest idle loop (idle=poll, haltpoll)"),
    c("vms", "overhead_ns", "ns", "vCPU time in the hypervisor on the vCPU's behalf: exits, entries, switches, PLE handling"),
    c("vms", "runnable_ns", "ns", "vCPU time ready but waiting for a pCPU (steal time)"),
    c("vms", "halted_ns", "ns", "vCPU time halted (nothing to run in the guest)"),
    c("vms", "cpu_ns", "ns", "vCPU time on a pCPU: user + kernel + spin + idle_poll + overhead"),
    c("vms", "cpu_share", "fraction", "the VM's cpu_ns over all pCPU time (pCPUs x duration)"),
    c("vms", "entitlement", "fraction", "the VM's weighted max-min fair share of all pCPU time, limited by its vCPUs, its cap and its demand (the time its vCPUs were on a pCPU or waiting for one): a VM that sleeps most of the time is entitled to what it asked for. Under schedulers that weigh each vCPU with its VM's weight (Xen credit and credit2, CFS or EEVDF without a task group per VM) the fair share is one of vCPUs, each up to one pCPU and its own demand, summed per VM (a VM with more busy vCPUs is entitled to more); with a task group per VM, or co-scheduling, one of VMs"),
    c("vms", "share_ratio", "ratio", "cpu_share / entitlement (1 = got its fair share)"),
    c("vms", "finished", "bool", "the workload completed its fixed work within the run"),
    c("vms", "completion_ns", "ns", "when the workload finished (null if it did not)"),
    c("vms", "work_units", "count", "units of work done (operations, transactions, items, iterations: per model)"),
    c("vms", "throughput_per_s", "1/s", "work_units per second of the run (or to completion)"),
    c("vms", "vcpu_switches", "count", "times one of the VM's vCPUs was put on a pCPU"),
    c("vms", "migrations", "count", "vCPU moves between pCPUs"),
    c("vms", "halts", "count", "vCPU halts (HLT exits, or a halted idle state)"),
    c("vms", "wakes", "count", "wake-ups of halted vCPUs"),
    c("vms", "affine_wakes", "count", "wake-ups of halted vCPUs that a Linux host aimed at the waking vCPU's pCPU rather than the one the vCPU ran on last (wake_affine, host.scheduler.wake_affine; an idle pCPU near the waker may then take it)"),
    c("vms", "idle_transitions_per_s", "1/s per vCPU", "guest idle entries per second per vCPU (the VM's idle entries over the run time, divided by its vCPUs)"),
    c("vms", "cache_refill_ns", "ns", "extra time re-fetching cache and TLB state evicted while descheduled (counted as slowdown while running)"),
    c("vms", "wake_latency_count", "count", "thread wake-ups measured (waker's signal to the wakee running)"),
    c("vms", "wake_latency_mean_ns", "ns", "mean thread wake-up latency (null without wake-ups)"),
    c("vms", "wake_latency_p50_ns", "ns", "median thread wake-up latency"),
    c("vms", "wake_latency_p99_ns", "ns", "99th-percentile thread wake-up latency"),
    c("vms", "dispatch_wait_count", "count", "vCPU dispatches measured (runnable to running)"),
    c("vms", "dispatch_wait_mean_ns", "ns", "mean time a runnable vCPU waited for a pCPU"),
    c("vms", "dispatch_wait_p99_ns", "ns", "99th-percentile dispatch wait"),
    c("vms", "ple_exits", "count", "pause-loop exits"),
    c("vms", "ple_yields_ok", "count", "PLE exits whose directed yield found a candidate and switched to it"),
    c("vms", "ple_yields_failed", "count", "PLE exits whose directed yield found no candidate"),
    c("vms", "lhp", "count", "lock-holder preemptions: a lock holder descheduled while others wait for the lock"),
    c("vms", "lwp", "count", "lock-waiter preemptions: the next waiter in a fair lock's queue descheduled when the lock is handed to it"),
    c("vms", "tlb_shootdowns", "count", "TLB shootdowns initiated (IPIs to every other vCPU of the mm)"),
    c("vms", "thread_switches", "count", "context switches between the VM's threads inside the guest (a vCPU starting a thread other than the one it ran last, or coming out of its idle task), as vmstat's cs counts them"),
    c("vms", "futex_calls", "count", "futex system calls of the VM's threads: waits (a mutex, barrier, condition variable or semaphore sleep) and wakes of a sleeping waiter"),
    c("vms", "guest_affine_wakes", "count", "thread wake-ups across vCPUs that the guest kernel aimed at the waking vCPU rather than the thread's previous one (its wake_affine, guest.wake_affine; an idle vCPU near it may then take the thread)"),
    c("vms", "ipis_resched", "count", "reschedule IPIs (wake-ups of a thread on another vCPU) handled by their target"),
    c("vms", "ipis_tlb", "count", "TLB-shootdown IPIs handled by their target"),
    c("vms", "tlb_wait_mean_ns", "ns", "mean time the initiator waited for every acknowledgement"),
    c("vms", "icr_exits", "count", "exits for writing the APIC ICR (sending an IPI) on hosts without IPI virtualization"),
    c("vms", "irq_exits", "count", "exits forced by an interrupt for a running vCPU (without posted interrupts)"),
    c("vms", "eoi_exits", "count", "exits for an EOI write (without APICv/PV EOI)"),
    c("vms", "timer_exits", "count", "exits for a TSC-deadline timer write (without APICv timer virtualization)"),
    c("vms", "halt_poll_hits", "count", "host halt polls that saw a wake-up before giving up the pCPU"),
    c("vms", "halt_poll_misses", "count", "host halt polls that gave up the pCPU"),
    c("vms", "ple_coschedules", "count", "PLE exits answered by co-scheduling the VM's preempted vCPUs"),
    c("vms", "ple_cosched_vcpus", "count", "vCPUs moved onto pCPUs by those co-schedules"),
    c("vms", "ple_yield_head", "count", "PLE exits answered by yielding to the head of the runqueue (CVS)"),
    c("vms", "ple_yield_tail", "count", "PLE exits answered by yielding to the tail (CVS)"),
    c("vms", "cvs_decisions", "count", "CVS's decisions (one per PLE exit under CVS)"),
    c("vms", "cvs_decision_ns", "ns", "CPU time spent deciding (charged as overhead)"),
    c("vms", "ple_cosched_fallbacks", "count", "co-schedules that moved nobody and fell back to a yield"),
    c("vms", "active_vcpus_mean", "count", "Gleaner: vCPUs in the workload's cpuset, time-averaged (all vCPUs without consolidation)"),
    c("vms", "active_vcpus_min", "count", "Gleaner: fewest active vCPUs"),
    c("vms", "active_vcpus_final", "count", "Gleaner: active vCPUs at the end"),
    c("vms", "gleaner_deactivations", "count", "Gleaner: vCPUs taken out of the cpuset"),
    c("vms", "gleaner_restores", "count", "Gleaner: restores of every vCPU after a major change"),
    c("vms", "gleaner_reactivations", "count", "Gleaner: vCPUs put back one at a time"),
    c("vms", "gleaner_idle_periods", "count", "Gleaner's yielding threads: runs of idle yields"),
    c("vms", "gleaner_sleeps", "count", "Gleaner's yielding threads: timeouts (nanosleeps)"),
    c("vcpus", "vm", "-", "VM name"),
    c("vcpus", "vcpu", "index", "vCPU number within the VM"),
    c("vcpus", "user_ns kernel_ns spin_ns idle_poll_ns overhead_ns runnable_ns halted_ns cpu_ns", "ns", "as in vms, for this vCPU"),
    c("vcpus", "switches", "count", "times the vCPU was put on a pCPU"),
    c("vcpus", "migrations", "count", "moves between pCPUs"),
    c("vcpus", "halts", "count", "halts"),
    c("vcpus", "wakes", "count", "wake-ups from halt"),
    c("vcpus", "affine_wakes", "count", "wake-ups from halt aimed at the waker's pCPU (wake_affine)"),
    c("vcpus", "cache_refill_ns", "ns", "extra time re-fetching evicted cache and TLB state"),
    c("pcpus", "pcpu", "index", "physical CPU number"),
    c("pcpus", "guest_ns", "ns", "time running guest code"),
    c("pcpus", "overhead_ns", "ns", "time in the hypervisor: exits, entries, switches"),
    c("pcpus", "idle_ns", "ns", "time idle"),
    c("pcpus", "poll_ns", "ns", "time in host halt polling"),
    c("pcpus", "idle_runnable_ns", "ns", "idle while some vCPU waited for a pCPU elsewhere (CPU fragmentation)"),
    c("pcpus", "runq_mean", "count", "time-weighted mean run-queue length (running + queued vCPUs)"),
    c("runq_length", "length", "count", "vCPUs running or queued on a pCPU (the last row: that many or more)"),
    c("runq_length", "fraction", "fraction", "share of all pCPU time spent at this length"),
    c("runq_length", "cdf", "fraction", "share of pCPU time at this length or less"),
    c("locks", "vm", "-", "VM name"),
    c("locks", "lock", "-", "the lock (kernel lock site or user lock name)"),
    c(
        "locks",
        "kind",
        "-",
        "kernel (a guest kernel spinlock), user (a workload's mutex: spin, then futex sleep), kernel-mutex (a guest kernel mutex), rwsem (a guest kernel read-write semaphore) or user-rwlock (InnoDB's rw_lock_t); for the last three, hold times are the writers'",
    ),
    c("locks", "acquisitions", "count", "acquisitions"),
    c("locks", "contended", "count", "acquisitions that had to wait"),
    c("locks", "wait_mean_ns", "ns", "mean wait for the lock over all acquisitions (0 for an uncontended one)"),
    c("locks", "wait_p99_ns", "ns", "99th-percentile wait"),
    c("locks", "wait_max_ns", "ns", "longest wait"),
    c("locks", "hold_mean_ns", "ns", "mean hold time"),
    c("locks", "hold_p99_ns", "ns", "99th-percentile hold time"),
    c("locks", "lhp", "count", "holder preempted while others waited"),
    c("locks", "lhp_slice", "count", "of lhp: the holder's vCPU was taken off because its time was up (the scheduler tick, the slice timer, credit's accounting)"),
    c("locks", "lhp_wakeup", "count", "of lhp: a woken vCPU preempted the holder's vCPU"),
    c("locks", "lhp_directed_yield", "count", "of lhp: another vCPU's directed yield (a PLE exit's yield_to) boosted a vCPU onto the holder's pCPU"),
    c("locks", "lhp_own_yield", "count", "of lhp: the holder's vCPU gave its pCPU up itself (its own PLE exit, a co-scheduling yield) — also a waiter that yielded while it spun and was then handed the lock (a ticket lock's FIFO hand-off)"),
    c("locks", "lhp_coordination", "count", "of lhp: a coordination policy or the scheduler's own decision (DCS's urgent vCPUs, co-scheduling, gangs, relaxed co-stops, balancing)"),
    c("locks", "lwp", "count", "next waiter preempted when the lock was handed to it (a kernel mutex: its hand-off to the first waiter, Linux 4.10+)"),
    c("locks", "halts", "count", "pv spinlocks: waiters that halted their vCPU"),
    c("locks", "kicks", "count", "pv spinlocks: kicks by unlockers"),
    c("locks", "steals", "count", "pv-qspinlock: acquisitions that stole the lock ahead of the queue"),
    c("latencies", "vm", "-", "VM name"),
    c("latencies", "kind", "-", "what was measured: a wake-up path, an IPI kind, an interrupt, a wait"),
    c("latencies", "count", "count", "measurements"),
    c("latencies", "mean_ns p50_ns p99_ns max_ns", "ns", "mean, median, 99th percentile and maximum"),
    c("modes", "mode", "-", "execution mode the focus VM was also run in (consolidated, dedicated, native, solo_capped)"),
    c("modes", "vm", "-", "the focus VM"),
    c("modes", "finished", "bool", "finished in that mode"),
    c("modes", "completion_ns", "ns", "completion time in that mode"),
    c("modes", "throughput_per_s", "1/s", "throughput in that mode"),
    c("modes", "slowdown", "ratio", "how much slower the scenario's own run is than this mode (1 = same)"),
    c("gleaner", "vm", "-", "VM name"),
    c("gleaner", "t_ns", "ns", "time of the controller's interval"),
    c("gleaner", "active_vcpus", "count", "vCPUs in the cpuset after the decision"),
    c("gleaner", "total_util", "fraction", "utilization of the active vCPUs in the interval"),
    c("gleaner", "l_comp_ns g_comp_ns l_idle_ns", "ns", "the controller's local and global computation and local idle estimates (Gleaner, HPDC 2013, Sec. 4)"),
    c("gleaner", "rho eta", "-", "the controller's thresholds in effect"),
    c("gleaner", "decision", "-", "what it did: keep, deactivate, restore, reactivate-all"),
    c("ple_epochs", "vm", "-", "VM name"),
    c("ple_epochs", "epoch", "index", "epoch within the VM (0-based; an epoch is host.ple.epoch_exits exits)"),
    c("ple_epochs", "policy", "-", "PLE window policy"),
    c("ple_epochs", "start_ns end_ns", "ns", "the epoch's bounds"),
    c("ple_epochs", "ple_exits", "count", "exits in the epoch"),
    c("ple_epochs", "window_cycles", "cycles", "the VM's window (mean over its vCPUs under per-vCPU windows)"),
    c("ple_epochs", "window_min_cycles window_max_cycles", "cycles", "smallest and largest vCPU window at the epoch's end"),
    c("ple_epochs", "exit_window_mean_cycles", "cycles", "mean window the epoch's exits happened at"),
    c("ple_epochs", "spin_before_exit_ns", "ns", "time spun before the exits"),
    c("ple_epochs", "handling_ns", "ns", "time handling the exits"),
    c("ple_epochs", "cpu_ns", "ns", "pCPU time of the VM's vCPUs in the epoch"),
    c("ple_epochs", "inefficiency", "fraction", "(spin before exit + handling) / cpu_ns"),
    c("ple_epochs", "complete", "bool", "the epoch reached host.ple.epoch_exits exits; each VM's series ends with the epoch still open at the end of the run (false) if it has any exit"),
    c("llc", "vm model class policy", "-", "cache study: VM, its model, its cache class, the sharing policy"),
    c("llc", "slice_ms", "ms", "time slice of the study"),
    c("llc", "contexts", "count", "contexts sharing the cache"),
    c("llc", "insertion", "-", "the static insertion (mru/lru) or time-sampled"),
    c("llc", "lru_quanta_frac", "fraction", "share of quanta run with LRU insertion"),
    c("llc", "instructions", "count", "instructions simulated"),
    c("llc", "cpi cpi_solo", "cycles/instr", "cycles per instruction shared and alone"),
    c("llc", "extra_cpi_pct", "%", "(cpi / cpi_solo - 1) x 100: the slowdown from sharing the cache"),
    c("llc", "mpki mpki_solo", "1/kinstr", "LLC misses per kilo-instruction shared and alone"),
    c("llc", "traffic_bytes_per_ki prefetch_bytes_per_ki", "B/kinstr", "memory traffic (misses and prefetches) and its prefetch part"),
    c("llc", "simulated_accesses", "count", "cache accesses simulated"),
    c("net", "vm", "-", "VM name"),
    c("net", "sent", "count", "datagrams sent to the VM's NIC"),
    c("net", "received", "count", "datagrams the application received"),
    c("net", "dropped", "count", "datagrams dropped on a full NIC buffer"),
    c("net", "drop_fraction", "fraction", "dropped / sent"),
    c("net", "throughput_mbps", "Mbit/s", "received payload per second"),
    c("net", "jitter_ms", "ms", "RFC 3550 interarrival jitter estimate at the end of the run (as iperf prints it)"),
    c(
        "net",
        "jitter_mean_ms",
        "ms",
        "the RFC 3550 jitter estimate averaged over every datagram of the run",
    ),
    c("net", "delay_mean_ms delay_max_ms", "ms", "from arrival at the NIC to the application's receive: mean and maximum"),
    c("dcs", "urgent_tlb urgent_resched", "count", "DCS: vCPUs made urgent by a TLB-shootdown IPI (TLB-Co) and by a reschedule IPI (Resched-Co)"),
    c("dcs", "urgent_preemptions", "count", "urgent vCPUs that preempted a running one"),
    c("dcs", "allowance_refusals", "count", "urgent requests refused: the VM was ahead of its fair share by more than the allowance"),
    c("dcs", "protected_deferrals", "count", "preemptions deferred because the running vCPU was protected"),
    c("dcs", "protections", "count", "protections granted (urgent slices and Resched-DP)"),
];

/// The type of a column's values where it has any: a column that is null in every row
/// of one report (no VM finished, no lock was contended) still gets its type, so the
/// Arrow tables of two runs always have the same schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    Int,
    Float,
}

/// Every report column that can be null (an `Option`, or a float that is NaN when it is
/// undefined: a mean or percentile over no samples), with the type of its values. A test
/// checks that every null a report writes is listed here with the right type.
pub static NULLABLE: &[(&str, &str, ValueKind)] = &[
    ("vms", "cap_pct", ValueKind::Float),
    ("vms", "completion_ns", ValueKind::Int),
    ("vms", "share_ratio", ValueKind::Float),
    ("vms", "wake_latency_mean_ns", ValueKind::Float),
    ("vms", "wake_latency_p50_ns", ValueKind::Int),
    ("vms", "wake_latency_p99_ns", ValueKind::Int),
    ("vms", "dispatch_wait_mean_ns", ValueKind::Float),
    ("vms", "dispatch_wait_p99_ns", ValueKind::Int),
    ("vms", "tlb_wait_mean_ns", ValueKind::Float),
    ("locks", "wait_mean_ns", ValueKind::Float),
    ("locks", "wait_p99_ns", ValueKind::Int),
    ("locks", "wait_max_ns", ValueKind::Int),
    ("locks", "hold_mean_ns", ValueKind::Float),
    ("locks", "hold_p99_ns", ValueKind::Int),
    ("latencies", "mean_ns", ValueKind::Float),
    ("latencies", "p50_ns", ValueKind::Int),
    ("latencies", "p99_ns", ValueKind::Int),
    ("latencies", "max_ns", ValueKind::Int),
    ("net", "jitter_ms", ValueKind::Float),
    ("net", "jitter_mean_ms", ValueKind::Float),
    ("net", "delay_mean_ms", ValueKind::Float),
    ("net", "delay_max_ms", ValueKind::Float),
    ("modes", "completion_ns", ValueKind::Int),
    ("modes", "slowdown", ValueKind::Float),
    ("gleaner", "l_comp_ns", ValueKind::Float),
    ("gleaner", "g_comp_ns", ValueKind::Float),
    ("gleaner", "l_idle_ns", ValueKind::Float),
    ("ple_epochs", "inefficiency", ValueKind::Float),
];

/// The declared type of a nullable column.
pub fn nullable_kind(table: &str, column: &str) -> Option<ValueKind> {
    NULLABLE
        .iter()
        .find(|(t, c, _)| *t == table && *c == column)
        .map(|(_, _, k)| *k)
}

/// The entry documenting `column` of `table`, if any. Histogram summaries
/// (`histograms.<name>….<stat>`) match their pattern entry.
pub fn lookup(table: &str, column: &str) -> Option<&'static Column> {
    if table == "report" && column.starts_with("histograms.") {
        return COLUMNS
            .iter()
            .find(|c| c.table == "report" && c.names.starts_with("histograms."));
    }
    COLUMNS
        .iter()
        .find(|c| c.table == table && c.names.split(' ').any(|n| n == column))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_unique_and_complete() {
        let mut seen = std::collections::BTreeSet::new();
        for c in COLUMNS {
            assert!(
                !c.meaning.is_empty() && !c.unit.is_empty(),
                "{}.{}",
                c.table,
                c.names
            );
            for n in c.names.split(' ') {
                assert!(
                    seen.insert((c.table, n)),
                    "{}.{n} documented twice",
                    c.table
                );
            }
        }
        assert!(lookup("vms", "cpu_share").is_some());
        assert!(lookup("vcpus", "spin_ns").is_some());
        assert!(lookup("report", "histograms.wake_latency/db.p99_ns").is_some());
        assert!(lookup("vms", "no_such_column").is_none());
    }
}
