//! Interrupt delivery to a vCPU, on the hypervisor's side: the one path every IPI,
//! device interrupt, timer interrupt and wake-up kick takes (KVM: kvm_vcpu_kick,
//! kvm_apic_send_ipi, __apic_accept_irq). What happens depends on where the target is:
//! - halted: it is woken (kvm_vcpu_wake_up) and the interrupt is injected at its entry;
//! - preempted (runnable): the interrupt waits for its next entry;
//! - running: it takes the interrupt now; if the host was halt-polling for it
//!   (kvm_vcpu_halt), the poll ends with a hit.
//!
//! The guest decides what the interrupt means once it has it; it never looks at the
//! hypervisor's state to deliver one. An [`IrqPolicy`] observes every send and every
//! delivery (DCS treats IPIs as coordination signals).

use crate::guest::ipi::IpiKind;
use crate::hv::sched::wake_affine::Waker;
use crate::hv::vcpu::{HvState, VcpuActivity};
use crate::sim::world::World;
use crate::sim::{Nanos, PcpuId, ThreadId, VcpuId};

/// An interrupt on its way to a vCPU, with what the guest needs to handle it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Irq {
    /// An IPI from another vCPU of the VM, sent at `sent`; `tlb` names a shootdown's
    /// sender and generation. A `Poke` is no interrupt: a polling idle loop sees the
    /// wake-up flag by itself (a halted target still needs waking).
    Ipi {
        kind: IpiKind,
        sent: Nanos,
        tlb: Option<(ThreadId, u32)>,
        waker: Option<Waker>,
    },
    /// A device completion for `thread`, routed to the VM's vCPU 0.
    Device { thread: ThreadId },
    /// The local timer of a sleeping thread.
    Timer,
    /// A kick: pv unlock's KVM_HC_KICK_CPU, or a thread made runnable on the vCPU
    /// from outside (a cpuset migration, Gleaner's unparked yielder). `only_idle`: it
    /// matters only to a vCPU without a current thread; `waker`: the kicking vCPU's
    /// hypercall exit (a pv kick).
    Kick {
        only_idle: bool,
        waker: Option<Waker>,
    },
}

/// The class of an interrupt, as a policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IrqClass {
    Ipi(IpiKind),
    Device,
    Timer,
    Kick,
}

impl Irq {
    /// Who does the host's wake-up of a halted target: the sender's exit, if any
    /// (hv/sched/wake_affine.rs).
    pub fn waker(&self) -> Option<Waker> {
        match *self {
            Irq::Ipi { waker, .. } | Irq::Kick { waker, .. } => waker,
            Irq::Device { .. } | Irq::Timer => None,
        }
    }

    pub fn class(&self) -> IrqClass {
        match self {
            Irq::Ipi { kind, .. } => IrqClass::Ipi(*kind),
            Irq::Device { .. } => IrqClass::Device,
            Irq::Timer => IrqClass::Timer,
            Irq::Kick { .. } => IrqClass::Kick,
        }
    }
}

/// Where the target was when the interrupt reached it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivered {
    /// Running on a pCPU: the guest handles the interrupt now.
    Running,
    /// Preempted: the interrupt (if any) waits for its next entry.
    Preempted,
    /// Halted: woken, and placed on a pCPU's queue.
    Woken(WakePlacement),
}

/// Where a woken vCPU was queued, and whether that pCPU was idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakePlacement {
    pub pcpu: PcpuId,
    pub pcpu_idle: bool,
}

/// A hypervisor policy that reacts to interrupts. `None` today; DCS next.
pub trait IrqPolicy {
    /// A vCPU (`sender`) sends an interrupt of `class` to `recipients`.
    fn on_send(&mut self, _class: IrqClass, _sender: VcpuId, _recipients: &[VcpuId]) {}
    /// An interrupt of `class` reached `target`.
    fn on_deliver(&mut self, _class: IrqClass, _target: VcpuId, _how: Delivered) {}
}

/// No policy: interrupts only deliver.
pub struct NoIrqPolicy;

impl IrqPolicy for NoIrqPolicy {}

impl World {
    /// Who wakes a halted target of `sender`'s IPI (`by_icr`) or pv kick: the sender's
    /// exit on its pCPU, which does the host's wake-up of the target's thread
    /// (kvm_vcpu_kick). None in native mode, and for an IPI with IPI virtualization:
    /// the CPU posts it and KVM's wake-up vector handler wakes a blocked target on the
    /// pCPU it blocked on (pi_wakeup_handler).
    pub(crate) fn waker_of(&self, sender: VcpuId, by_icr: bool) -> Option<Waker> {
        if !self.virtualized || (by_icr && self.ipi_virtualization) {
            return None;
        }
        match self.vcpus[sender.idx()].hv {
            HvState::Running(p) => Some(Waker {
                vcpu: sender,
                pcpu: p,
            }),
            _ => None,
        }
    }

    /// `sender` sends IPIs of `kind` to `recipients` (observed by the policy); the
    /// caller schedules their arrival.
    pub(crate) fn irq_send(&mut self, kind: IpiKind, sender: VcpuId, recipients: &[VcpuId]) {
        self.irq_policy
            .on_send(IrqClass::Ipi(kind), sender, recipients);
        if self.trace.is_some() {
            let now = self.now;
            for &r in recipients {
                let name = format!("{kind:?} IPI to vCPU {}", self.vcpus[r.idx()].index);
                self.trace_flow(sender, &name, World::ipi_flow_key(now, r), true, now);
            }
        }
    }

    /// Delivers `irq` to vCPU `v`: wakes it if halted, queues the interrupt for its
    /// next entry if it is preempted, ends the host's halt polling if it takes the
    /// interrupt while running. The guest then handles a `Running` delivery.
    pub(crate) fn irq_deliver(&mut self, v: VcpuId, irq: Irq) -> Delivered {
        let now = self.now;
        if let (Some(_), Irq::Ipi { kind, sent, .. }) = (self.trace.as_ref(), irq) {
            let name = format!("{kind:?} IPI arrives");
            self.trace_flow(v, &name, World::ipi_flow_key(sent, v), false, now);
        }
        let how = match self.vcpus[v.idx()].hv {
            HvState::Halted => {
                self.irq_queue_for_entry(v, irq, now);
                Delivered::Woken(self.hv_wake_vcpu(v, true, irq.waker()))
            }
            HvState::Runnable => {
                match irq {
                    Irq::Ipi {
                        kind: IpiKind::Poke,
                        ..
                    } => {}
                    // The timer interrupt stays pending in the vAPIC until the entry
                    // (a halted vCPU's wake-up path pays its own timer work:
                    // hv/wake_path.rs).
                    Irq::Timer => {
                        self.vcpus[v.idx()].pending_timer.get_or_insert(now);
                    }
                    _ => self.irq_queue_for_entry(v, irq, now),
                }
                Delivered::Preempted
            }
            HvState::Running(_) => {
                self.irq_take_running(v, irq);
                Delivered::Running
            }
        };
        self.irq_policy.on_deliver(irq.class(), v, how);
        how
    }

    /// The interrupt waits for `v`'s entry, where it is injected (a halted target's
    /// poke becomes a real reschedule IPI: its sender saw it halted).
    fn irq_queue_for_entry(&mut self, v: VcpuId, irq: Irq, now: Nanos) {
        let vc = &mut self.vcpus[v.idx()];
        match irq {
            Irq::Ipi {
                kind, sent, tlb, ..
            } => {
                let kind = if kind == IpiKind::Poke {
                    IpiKind::Resched
                } else {
                    kind
                };
                vc.pending.push((kind, sent, tlb));
            }
            Irq::Device { thread } => vc.pending_irq.push((thread, now)),
            Irq::Timer | Irq::Kick { .. } => {}
        }
    }

    /// The running `v` takes `irq`: the exit and injection a device or timer interrupt
    /// costs, and the end of the host's halt polling when the guest has something to do
    /// (a poke or a kick for a vCPU whose current thread is pv-halted leaves it polling).
    fn irq_take_running(&mut self, v: VcpuId, irq: Irq) {
        let guest_needed = match irq {
            Irq::Ipi {
                kind: IpiKind::Poke,
                ..
            }
            | Irq::Kick {
                only_idle: true, ..
            } => self.vcpus[v.idx()].cur.is_none(),
            _ => true,
        };
        if let Irq::Device { .. } = irq {
            // Charged before the poll ends, whose entry then replaces this cost (the
            // order of the code this replaced; the timer path charges after).
            let lat = self.irq_charge_running(v);
            let vm = self.vcpus[v.idx()].vm.idx();
            self.vms[vm].irq_latency.record(lat);
        }
        if guest_needed && self.vcpus[v.idx()].act == VcpuActivity::HostPoll {
            self.end_host_poll(v, true);
        }
        if let Irq::Timer = irq {
            self.irq_charge_running(v);
        }
    }

    /// Charges the running `v` the exit, injection and EOI of an interrupt; returns how
    /// long until it resumes the guest's work.
    fn irq_charge_running(&mut self, v: VcpuId) -> u64 {
        let now = self.now;
        self.sync_progress(v);
        let vm = self.vcpus[v.idx()].vm.idx();
        let deliver = Nanos(self.irq_running_cost(vm));
        let resumes = self.vcpus[v.idx()].charge_overhead(now, deliver);
        (resumes - now).0
    }
}
