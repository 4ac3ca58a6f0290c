//! The wake path's exits and who pays them (docs/model.md §12). A cross-vCPU wake-up
//! and every other interrupt goes through KVM's local-APIC emulation
//! (arch/x86/kvm/lapic.c, vmx/vmx.c); which steps exit depends on the platform:
//!
//! - the sender's ICR write exits (x2APIC WRMSR / xAPIC APIC-write exit) unless the CPU
//!   virtualizes IPIs (IPIv); KVM emulates it (kvm_apic_send_ipi →
//!   kvm_irq_delivery_to_apic → __apic_accept_irq → kvm_vcpu_kick). For a halted target
//!   kvm_vcpu_kick → kvm_vcpu_wake_up does the host try_to_wake_up of its vCPU thread
//!   inside the same exit: the **sender** pays all of it, as CPU time (exit overhead);
//! - a running target without posted interrupts is forced out by the kick's host IPI
//!   (an external-interrupt exit), and the interrupt is injected on re-entry; with APICv
//!   the posted-interrupt notification is handled in guest mode, no exit;
//! - a target that was not running gets the interrupt injected at its next VM entry
//!   (inject_pending_event), no exit of its own;
//! - the guest's EOI write exits unless APICv virtualizes EOI or the guest uses KVM's
//!   PV EOI;
//! - a NOHZ guest reprograms its TSC-deadline timer when it enters and leaves idle;
//!   KVM intercepts that MSR on every platform, so each is an exit.
//!
//! Each function returns the time its step costs the vCPU that pays it and counts the
//! exits per VM (none in native mode, where the same costs are the native ones).

use crate::hv::vcpu::HvState;
use crate::sim::world::World;
use crate::sim::VcpuId;
use serde::Serialize;

/// Exits of the wake path, per VM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ApicExits {
    /// ICR writes (IPIs sent) that exited.
    pub icr: u64,
    /// Interrupts that forced a running vCPU out (no posted interrupts).
    pub irq: u64,
    /// EOI writes that exited.
    pub eoi: u64,
    /// TSC-deadline timer writes (idle entry and exit).
    pub timer: u64,
}

impl World {
    /// From the ICR write until the interrupt is at the target (the sender's exit and
    /// KVM's emulation; nothing with IPI virtualization).
    pub(crate) fn icr_flight_ns(&self) -> u64 {
        if self.ipi_virtualization {
            0
        } else {
            self.costs.vmexit_ns + self.costs.ipi_send_ns
        }
    }

    /// The sender's ICR write of an IPI to `target`: its cost on the sender (exit,
    /// emulation, and for a halted target the host's wake of the target's thread in
    /// kvm_vcpu_kick). With IPIv the CPU posts the interrupt and the host's wake-up
    /// vector handler wakes a blocked target: the sender pays nothing.
    pub(crate) fn icr_write_cost(&mut self, vm: usize, target: VcpuId) -> u64 {
        if self.ipi_virtualization {
            return 0;
        }
        if self.virtualized {
            self.vms[vm].exits.icr += 1;
        }
        let kick = if self.vcpus[target.idx()].hv == HvState::Halted {
            self.costs.kick_wake_ns
        } else {
            0
        };
        self.costs.vmexit_ns + self.costs.ipi_send_ns + kick
    }

    /// An interrupt taken by a running vCPU of VM `vm`: forced out and injected without
    /// posted interrupts; then its EOI.
    pub(crate) fn irq_running_cost(&mut self, vm: usize) -> u64 {
        let mut ns = 0;
        if !self.posted_interrupts {
            if self.virtualized {
                self.vms[vm].exits.irq += 1;
            }
            ns += self.costs.vmexit_ns + self.costs.ipi_deliver_ns;
        }
        ns + self.eoi_cost(vm)
    }

    /// An interrupt pending when a vCPU of VM `vm` enters: injected with the entry,
    /// then its EOI.
    pub(crate) fn irq_at_entry_cost(&mut self, vm: usize) -> u64 {
        self.costs.inject_ns + self.eoi_cost(vm)
    }

    /// The handler's EOI write: an exit unless APICv or the guest's PV EOI.
    fn eoi_cost(&mut self, vm: usize) -> u64 {
        if self.posted_interrupts || self.vms[vm].guest.pv_eoi {
            return 0;
        }
        if self.virtualized {
            self.vms[vm].exits.eoi += 1;
        }
        self.costs.vmexit_ns + self.costs.eoi_ns
    }

    /// A NOHZ idle entry or exit reprograms the guest's timer: one TSC-deadline write.
    pub(crate) fn timer_write_cost(&mut self, vm: usize) -> u64 {
        if !self.virtualized {
            return self.costs.timer_write_ns;
        }
        self.vms[vm].exits.timer += 1;
        self.costs.vmexit_ns + self.costs.timer_write_ns
    }
}
