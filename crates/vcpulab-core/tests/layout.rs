//! The hot fields of the per-entity tables stay together at the front of their records
//! (a step touches one or two cache lines of each on a large host, where the tables
//! are far larger than a core's caches). A reordering that scatters them fails here.

use std::mem::{align_of, offset_of};
use vcpulab_core::guest::thread::Thread;
use vcpulab_core::hv::vcpu::Vcpu;
use vcpulab_core::hv::vm::Vm;

/// Every offset lies below `limit` bytes from the record's start.
fn within(limit: usize, offsets: &[usize]) {
    for &off in offsets {
        assert!(off < limit, "offset {off} not below {limit}");
    }
}

#[test]
fn records_start_on_cache_lines() {
    assert_eq!(align_of::<Thread>(), 64);
    assert_eq!(align_of::<Vcpu>(), 64);
    assert_eq!(align_of::<Vm>(), 64);
}

#[test]
fn a_threads_step_fields_share_its_first_line() {
    within(
        64,
        &[
            offset_of!(Thread, act),
            offset_of!(Thread, remaining),
            offset_of!(Thread, debt),
            offset_of!(Thread, vruntime),
            offset_of!(Thread, slice_used),
            offset_of!(Thread, spin_left),
            offset_of!(Thread, in_kernel),
            offset_of!(Thread, yielder),
            offset_of!(Thread, idle_prio),
        ],
    );
    within(
        128,
        &[
            offset_of!(Thread, micro),
            offset_of!(Thread, held),
            offset_of!(Thread, pc),
        ],
    );
}

#[test]
fn a_vcpus_step_fields_share_its_first_two_lines() {
    within(
        64,
        &[
            offset_of!(Vcpu, hv),
            offset_of!(Vcpu, vm),
            offset_of!(Vcpu, gen),
            offset_of!(Vcpu, cur),
            offset_of!(Vcpu, act),
            offset_of!(Vcpu, resume_at),
            offset_of!(Vcpu, seg_start),
            offset_of!(Vcpu, ple_deadline),
        ],
    );
    within(
        128,
        &[
            offset_of!(Vcpu, cat_since),
            offset_of!(Vcpu, refill_left_ns),
            offset_of!(Vcpu, rq),
            offset_of!(Vcpu, tick_at),
        ],
    );
}

#[test]
fn a_vms_step_settings_come_first() {
    within(
        192,
        &[
            offset_of!(Vm, guest),
            offset_of!(Vm, cache),
            offset_of!(Vm, bases),
        ],
    );
}

/// The cache line (index) each offset falls in; all the same, or the message names them.
fn one_line(what: &str, offsets: &[(&str, usize, usize)]) {
    let lines: Vec<(&str, usize)> = offsets
        .iter()
        .map(|&(name, off, size)| {
            let (first, last) = (off / 64, (off + size - 1) / 64);
            assert_eq!(first, last, "{what}: {name} straddles two lines");
            (name, first)
        })
        .collect();
    assert!(
        lines.iter().all(|&(_, l)| l == lines[0].1),
        "{what}: not in one line: {lines:?}"
    );
}

macro_rules! field {
    ($t:ty, $f:ident) => {{
        fn size<T>(_: fn(&$t) -> &T) -> usize {
            std::mem::size_of::<T>()
        }
        (stringify!($f), offset_of!($t, $f), size(|r: &$t| &r.$f))
    }};
}

#[test]
fn a_vcpus_tracing_flag_is_in_its_first_line() {
    // Every state change asks it; the trace buffer itself is far down the record.
    one_line(
        "vCPU first line",
        &[field!(Vcpu, hv), field!(Vcpu, tracing)],
    );
}

#[test]
fn a_vcpus_paths_each_read_one_line() {
    one_line(
        "vCPU footprint",
        &[
            field!(Vcpu, cache_missing_kib),
            field!(Vcpu, tlb_mark_out),
            field!(Vcpu, cache_mark_out),
        ],
    );
    one_line(
        "vCPU wake-up and dispatch bookkeeping",
        &[
            field!(Vcpu, runnable_since),
            field!(Vcpu, last_pcpu),
            field!(Vcpu, refill_at_dispatch_ns),
            field!(Vcpu, wakes),
            field!(Vcpu, switches),
            field!(Vcpu, migrations),
        ],
    );
    one_line(
        "vCPU pending interrupts",
        &[
            field!(Vcpu, pending),
            field!(Vcpu, pending_irq),
            field!(Vcpu, tlb_stall_from),
        ],
    );
    one_line(
        "vCPU departure and halt",
        &[
            field!(Vcpu, guest_tlb_loaded),
            field!(Vcpu, halts),
            field!(Vcpu, halted_at),
        ],
    );
}

#[test]
fn a_vms_switch_counter_exits_and_gleaner_share_a_line() {
    one_line(
        "VM switch line",
        &[
            field!(Vm, thread_switches),
            field!(Vm, gleaner),
            field!(Vm, exits),
        ],
    );
}
