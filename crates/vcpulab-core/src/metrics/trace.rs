//! Trace sinks. The Chrome trace-event JSON writer streams complete ("X") events as
//! they end — one track per pCPU showing vCPU slices, one per vCPU showing thread
//! slices — so memory stays bounded; the file opens in ui.perfetto.dev.

use crate::sim::{Nanos, PcpuId, VmId};
use std::io::Write;

pub trait TraceSink {
    /// A vCPU (or the switch into one) occupied pCPU `p` over [start, end).
    fn pcpu_slice(&mut self, p: PcpuId, name: &str, start: Nanos, end: Nanos);
    /// A thread ran on vCPU `vcpu` of `vm` over [start, end).
    fn vcpu_slice(&mut self, vm: VmId, vcpu: u32, name: &str, start: Nanos, end: Nanos);
    /// A point event on a vCPU track (IPI, PLE exit, lock hand-off).
    fn vcpu_instant(&mut self, vm: VmId, vcpu: u32, name: &str, at: Nanos);
    fn finish(&mut self);
}

pub struct ChromeTrace<W: Write> {
    out: W,
    first: bool,
    error: Option<std::io::Error>,
    pub events: u64,
}

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
        let mut t = ChromeTrace {
            out,
            first: true,
            error: None,
            events: 0,
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
                t.meta(pid, Some(v), "thread_name", &format!("vCPU {v}"));
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

    fn slice(&mut self, pid: u32, tid: u32, name: &str, start: Nanos, end: Nanos) {
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
        self.event(&format!(
            "{{\"ph\":\"i\",\"s\":\"t\",\"pid\":{},\"tid\":{vcpu},\"name\":{},\"ts\":{}}}",
            vm_pid(vm),
            esc(name),
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
