//! Trace sinks. The Chrome trace-event JSON writer streams events as they end, so memory
//! stays bounded; the file opens in ui.perfetto.dev. Tracks:
//! - the host (pid 1): one track per pCPU with the vCPU slices it ran, and a counter of
//!   its run-queue length (vCPUs running or queued there);
//! - each VM (pid 2…): per vCPU, a track with the guest threads it ran and a track with
//!   the vCPU's state (user, kernel, spin, idle-poll, runnable, halted); instants for
//!   lock-holder and lock-waiter preemptions (naming the lock), PLE exits and IPIs;
//!   flow arrows from an IPI's sender to its target and from a waker to the woken
//!   thread's first run; a counter of each vCPU's PLE window.
//!
//! A window (`from`, `to`) keeps only what overlaps it, clipping slices to it.

use crate::sim::{Nanos, PcpuId, VmId};
use std::io::Write;

pub trait TraceSink {
    /// A vCPU (or the switch into one) occupied pCPU `p` over [start, end).
    fn pcpu_slice(&mut self, p: PcpuId, name: &str, start: Nanos, end: Nanos);
    /// A thread ran on vCPU `vcpu` of `vm` over [start, end).
    fn vcpu_slice(&mut self, vm: VmId, vcpu: u32, name: &str, start: Nanos, end: Nanos);
    /// A point event on a vCPU track (IPI, PLE exit, lock hand-off).
    fn vcpu_instant(&mut self, vm: VmId, vcpu: u32, name: &str, at: Nanos);
    /// The vCPU was in `state` (user, kernel, spin, …) over [start, end).
    fn vcpu_state(&mut self, _vm: VmId, _vcpu: u32, _state: &str, _start: Nanos, _end: Nanos) {}
    /// One end of a flow arrow on a vCPU track: `start` at the source (sender, waker),
    /// else at the destination; both ends share `key`. An end whose start was not
    /// written (outside the window) is dropped.
    fn vcpu_flow(
        &mut self,
        _vm: VmId,
        _vcpu: u32,
        _name: &str,
        _key: u64,
        _start: bool,
        _at: Nanos,
    ) {
    }
    /// A counter's value from `at` on: on pCPU `pcpu`'s host track when `vcpu` is None,
    /// else on the vCPU's.
    fn counter(&mut self, _owner: CounterOwner, _name: &str, _at: Nanos, _value: f64) {}
    fn finish(&mut self);
}

/// Whose track a counter is drawn on.
#[derive(Clone, Copy, Debug)]
pub enum CounterOwner {
    Pcpu(PcpuId),
    Vcpu(VmId, u32),
}

pub struct ChromeTrace<W: Write> {
    out: W,
    first: bool,
    error: Option<std::io::Error>,
    pub events: u64,
    /// Only what overlaps [from, to) is written.
    from: Nanos,
    to: Nanos,
    /// Flows started and not yet ended: key → the id written.
    open_flows: std::collections::HashMap<u64, u64>,
    next_flow: u64,
}

/// The tid of a vCPU's state track: beside its thread track (tid = vCPU index).
const STATE_TID_BASE: u32 = 100_000;

/// The trace process of the host (its pCPU tracks).
pub const HOST_PID: u32 = 1;

/// The trace process of a VM (its vCPU tracks).
pub fn vm_pid(vm: VmId) -> u32 {
    vm.0 + 2
}

fn esc(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

fn us(t: Nanos) -> String {
    format!("{}.{:03}", t.0 / 1000, t.0 % 1000)
}

impl<W: Write> ChromeTrace<W> {
    /// `vms`: (name, number of vCPUs) of each VM.
    pub fn new(out: W, pcpus: u32, vms: &[(String, u32)]) -> ChromeTrace<W> {
        ChromeTrace::windowed(out, pcpus, vms, Nanos::ZERO, Nanos(u64::MAX))
    }

    /// A trace of what overlaps [from, to) only.
    pub fn windowed(
        out: W,
        pcpus: u32,
        vms: &[(String, u32)],
        from: Nanos,
        to: Nanos,
    ) -> ChromeTrace<W> {
        let mut t = ChromeTrace {
            out,
            first: true,
            error: None,
            events: 0,
            from,
            to,
            open_flows: std::collections::HashMap::new(),
            next_flow: 1,
        };
        t.raw("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        // pid 0 is the idle/swapper process to trace viewers: the host is pid 1.
        t.meta(HOST_PID, None, "process_name", "host");
        for p in 0..pcpus {
            t.meta(HOST_PID, Some(p), "thread_name", &format!("pCPU {p}"));
        }
        for (i, (name, n)) in vms.iter().enumerate() {
            let pid = vm_pid(VmId(i as u32));
            t.meta(pid, None, "process_name", name);
            for v in 0..*n {
                t.meta(pid, Some(v), "thread_name", &format!("vCPU {v} threads"));
                t.meta(
                    pid,
                    Some(STATE_TID_BASE + v),
                    "thread_name",
                    &format!("vCPU {v} state"),
                );
                // Sort the state track right below the vCPU's thread track.
                t.sort(pid, v, 2 * v);
                t.sort(pid, STATE_TID_BASE + v, 2 * v + 1);
            }
        }
        t
    }

    pub fn error(&self) -> Option<&std::io::Error> {
        self.error.as_ref()
    }

    pub fn into_inner(self) -> W {
        self.out
    }

    fn raw(&mut self, s: &str) {
        if self.error.is_none() {
            if let Err(e) = self.out.write_all(s.as_bytes()) {
                self.error = Some(e);
            }
        }
    }

    fn event(&mut self, body: &str) {
        let sep = if self.first { "" } else { ",\n" };
        self.first = false;
        self.events += 1;
        let line = format!("{sep}{body}");
        self.raw(&line);
    }

    fn meta(&mut self, pid: u32, tid: Option<u32>, what: &str, name: &str) {
        let tid = tid.unwrap_or(0);
        self.event(&format!(
            "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"{what}\",\"args\":{{\"name\":{}}}}}",
            esc(name)
        ));
    }

    fn sort(&mut self, pid: u32, tid: u32, index: u32) {
        self.event(&format!(
            "{{\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"name\":\"thread_sort_index\",\"args\":{{\"sort_index\":{index}}}}}"
        ));
    }

    fn inside(&self, at: Nanos) -> bool {
        at >= self.from && at < self.to
    }

    fn slice(&mut self, pid: u32, tid: u32, name: &str, start: Nanos, end: Nanos) {
        let (start, end) = (start.max(self.from), end.min(self.to));
        if end <= start {
            return;
        }
        self.event(&format!(
            "{{\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"name\":{},\"ts\":{},\"dur\":{}}}",
            esc(name),
            us(start),
            us(end - start)
        ));
    }
}

impl<W: Write> TraceSink for ChromeTrace<W> {
    fn pcpu_slice(&mut self, p: PcpuId, name: &str, start: Nanos, end: Nanos) {
        self.slice(HOST_PID, p.0, name, start, end);
    }
    fn vcpu_slice(&mut self, vm: VmId, vcpu: u32, name: &str, start: Nanos, end: Nanos) {
        self.slice(vm_pid(vm), vcpu, name, start, end);
    }
    fn vcpu_instant(&mut self, vm: VmId, vcpu: u32, name: &str, at: Nanos) {
        if !self.inside(at) {
            return;
        }
        self.event(&format!(
            "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":{vcpu},\"name\":{},\"ts\":{}}}",
            vm_pid(vm),
            esc(name),
            us(at)
        ));
    }
    fn vcpu_state(&mut self, vm: VmId, vcpu: u32, state: &str, start: Nanos, end: Nanos) {
        self.slice(vm_pid(vm), STATE_TID_BASE + vcpu, state, start, end);
    }
    fn vcpu_flow(&mut self, vm: VmId, vcpu: u32, name: &str, key: u64, start: bool, at: Nanos) {
        if !self.inside(at) {
            return;
        }
        let id = if start {
            let id = self.next_flow;
            self.next_flow += 1;
            self.open_flows.insert(key, id);
            id
        } else {
            match self.open_flows.remove(&key) {
                Some(id) => id,
                None => return,
            }
        };
        // An instant anchors the arrow's end (flows bind to slices); "bp":"e" binds the
        // end to the enclosing slice.
        self.vcpu_instant(vm, vcpu, name, at);
        let (ph, bp) = if start {
            ("s", "")
        } else {
            ("f", ",\"bp\":\"e\"")
        };
        self.event(&format!(
            "{{\"ph\":\"{ph}\",\"id\":{id},\"pid\":{},\"tid\":{vcpu},\"name\":{},\"cat\":\"flow\",\"ts\":{}{bp}}}",
            vm_pid(vm),
            esc(name),
            us(at)
        ));
    }
    fn counter(&mut self, owner: CounterOwner, name: &str, at: Nanos, value: f64) {
        if !self.inside(at) {
            return;
        }
        let (pid, track) = match owner {
            CounterOwner::Pcpu(p) => (HOST_PID, format!("{name} pCPU {}", p.0)),
            CounterOwner::Vcpu(vm, v) => (vm_pid(vm), format!("{name} vCPU {v}")),
        };
        self.event(&format!(
            "{{\"ph\":\"C\",\"pid\":{pid},\"name\":{},\"ts\":{},\"args\":{{\"value\":{value}}}}}",
            esc(&track),
            us(at)
        ));
    }
    fn finish(&mut self) {
        self.raw("\n]}\n");
        if self.error.is_none() {
            if let Err(e) = self.out.flush() {
                self.error = Some(e);
            }
        }
    }
}
