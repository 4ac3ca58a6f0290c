//! Inter-processor interrupts inside a VM: reschedule IPIs for wake-ups, TLB-shootdown
//! IPIs (the sender waits for every target's acknowledgement, and a target
//! acknowledges only when its vCPU runs), and device interrupts. A halted target is
//! woken through the hypervisor; a preempted one handles the interrupt when it next
//! runs.

use crate::guest::thread::{Micro, ThreadActivity, ThreadState};
use crate::hv::irq::{Delivered, Irq};
use crate::hv::sched::wake_affine::Waker;
use crate::hv::vcpu::{HvState, VcpuActivity};
use crate::scenario::WakeIpi;
use crate::sim::world::{Ev, World};
use crate::sim::{Nanos, PcpuId, ThreadId, VcpuId};

/// Wake-up paths, as indices of the per-VM wake-latency histograms.
pub const PATH_SAME_VCPU: u8 = 0;
pub const PATH_RUNNING: u8 = 1;
pub const PATH_HALTED_IDLE_PCPU: u8 = 2;
pub const PATH_HALTED_BUSY_PCPU: u8 = 3;
pub const PATH_PREEMPTED: u8 = 4;
pub const PATH_NAMES: [&str; 5] = [
    "same_vcpu",
    "running_target",
    "halted_idle_pcpu",
    "halted_busy_pcpu",
    "preempted_target",
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpiKind {
    Resched,
    Tlb,
    /// No interrupt: the target polls and notices the wake-up by itself.
    Poke,
}

/// An IPI in flight. `thread`: the woken thread (reschedule) or the sender (TLB).
/// Its send time is not carried (events stay small): it is the arrival time minus the
/// fixed flight time of its kind. Nor is a shootdown's sending vCPU: it is its sending
/// thread's, which spins there until every target acknowledges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpiMsg {
    pub kind: IpiKind,
    /// The pCPU the sender ran on when its exit woke a halted target's thread
    /// (`NO_WAKER`: none, as with IPI virtualization); packed beside `kind`.
    waker_pcpu: u16,
    pub thread: ThreadId,
    /// A shootdown's generation, or another IPI's sending vCPU: one field, so that an
    /// event stays 16 bytes (20 made every push of the event heap measurably dearer).
    aux: u32,
}

const NO_WAKER: u16 = u16::MAX;

impl IpiMsg {
    /// An IPI `sender` sends (`gen`: a shootdown's generation, else unused); `waker`:
    /// who the host's wake-up of a halted target is done by (`World::waker_of`).
    pub fn new(
        kind: IpiKind,
        thread: ThreadId,
        gen: u32,
        sender: VcpuId,
        waker: Option<Waker>,
    ) -> IpiMsg {
        IpiMsg {
            kind,
            waker_pcpu: waker.map_or(NO_WAKER, |w| w.pcpu.0 as u16),
            thread,
            aux: if kind == IpiKind::Tlb { gen } else { sender.0 },
        }
    }

    /// A shootdown's generation (0 for other IPIs).
    pub fn gen(&self) -> u32 {
        if self.kind == IpiKind::Tlb {
            self.aux
        } else {
            0
        }
    }

    /// Who did the host's wake-up of a halted target; `vcpu_of` gives a thread's vCPU
    /// (a shootdown's sender is its thread's).
    pub fn waker(&self, vcpu_of: impl FnOnce(ThreadId) -> VcpuId) -> Option<Waker> {
        if self.waker_pcpu == NO_WAKER {
            return None;
        }
        let vcpu = if self.kind == IpiKind::Tlb {
            vcpu_of(self.thread)
        } else {
            VcpuId(self.aux)
        };
        Some(Waker {
            vcpu,
            pcpu: PcpuId(u32::from(self.waker_pcpu)),
        })
    }
}

/// The wake-up path an interrupt's delivery makes (the target's state when it arrives).
pub(crate) fn wake_path_of(how: Delivered) -> u8 {
    match how {
        Delivered::Running => PATH_RUNNING,
        Delivered::Preempted => PATH_PREEMPTED,
        Delivered::Woken(p) if p.pcpu_idle => PATH_HALTED_IDLE_PCPU,
        Delivered::Woken(_) => PATH_HALTED_BUSY_PCPU,
    }
}

impl World {
    fn vcpu_idle(&self, v: VcpuId) -> bool {
        let vc = &self.vcpus[v.idx()];
        // Gleaner's yielding thread stands in for the idle loop: where the guest counts a
        // CPU running only SCHED_IDLE tasks as idle (select_idle_sibling's
        // sched_idle_cpu(), Linux 5.4+) its vCPU is a placement target, unless the host
        // preempted it (KVM's vcpu_is_preempted()); before 5.4 idle_cpu() is false there.
        match vc.cur {
            // available_idle_cpu(): with vcpu_is_preempted() (Linux 4.10+, used for
            // wake placement since 4.17) an idle vCPU the host preempted is not idle.
            // idle_cpu(): a non-empty wake list makes a CPU busy.
            None => {
                vc.rq.is_empty()
                    && vc.wake_list.is_empty()
                    && !(self.vms[vc.vm.idx()].guest.vcpu_is_preempted
                        && vc.hv == HvState::Runnable)
            }
            Some(c) => {
                self.threads[c.idx()].yielder
                    && self.vms[vc.vm.idx()].balance.sched_idle_cpu
                    && vc.rq.is_empty()
                    && vc.is_running()
            }
        }
    }

    /// Wake-up placement (select_task_rq_fair): the target is the waking vCPU `waker`
    /// when the guest kernel's wake_affine rule takes it (hv/sched/wake_affine.rs), else
    /// the previous vCPU; then the target if idle, else an idle vCPU of the VM from it
    /// (select_idle_sibling over the VM's one cache domain; with a socket per vCPU the
    /// target alone), else the target (all within the thread's cpuset); a yielding
    /// thread's own vCPU. `waker`: None for a look that
    /// decides nothing (a timer's check whether its thread would move).
    pub(crate) fn select_wake_vcpu(&mut self, t: ThreadId, waker: Option<VcpuId>) -> VcpuId {
        if self.threads[t.idx()].yielder {
            // Gleaner's yielding threads are pinned to their vCPU.
            return self.threads[t.idx()].vcpu;
        }
        let prev = self.threads[t.idx()].vcpu;
        let target = waker.map_or(prev, |from| self.guest_affine_target(t, prev, from));
        let th = &self.threads[t.idx()];
        let vm = &self.vms[th.vm.idx()];
        let allowed = |v: VcpuId| vm.cpuset.contains(v.0 - vm.first_vcpu);
        let n = vm.nvcpus;
        let at = |i: usize| VcpuId(vm.first_vcpu + i as u32);
        if vm.guest.llc_per_vcpu && allowed(target) {
            // Each vCPU its own cache domain: select_idle_sibling searches the target's
            // last-level cache, the target alone, and returns it idle or not.
            return target;
        }
        let base = (target.0 - vm.first_vcpu) as usize;
        if let Some(i) = crate::hv::placement::prev_else_next_idle(
            base,
            n as usize,
            |i| allowed(at(i)),
            |i| self.vcpu_idle(at(i)),
        ) {
            return at(i);
        }
        if allowed(target) {
            return target;
        }
        (0..n)
            .map(|i| VcpuId(vm.first_vcpu + i))
            .find(|c| allowed(*c))
            .unwrap_or(prev)
    }

    /// The guest's wake_affine (select_task_rq_fair): `from`, the vCPU whose thread (or
    /// interrupt handler) wakes `t`, is the target instead of `t`'s previous vCPU when
    /// its runqueue is enough lighter (or, from Linux 4.14, idle while `prev` is not).
    /// Loads are runnable threads × nice-0 weight, SCHED_IDLE ones left out; the VM's
    /// vCPUs are one domain, sharing a cache unless each is a socket of its own.
    fn guest_affine_target(&mut self, t: ThreadId, prev: VcpuId, from: VcpuId) -> VcpuId {
        use crate::hv::sched::wake_affine::{AffineLoads, WakeAffine};
        let vmi = self.threads[t.idx()].vm.idx();
        let rule = self.vms[vmi].guest.wake_affine;
        if rule == WakeAffine::Off {
            return prev;
        }
        let (first, n) = (self.vms[vmi].first_vcpu, self.vms[vmi].nvcpus);
        let llc_per_vcpu = self.vms[vmi].guest.llc_per_vcpu;
        // wake_wide's factor is the waker's cache domain's size (sd_llc_size).
        let llc_size = if llc_per_vcpu { 1 } else { n };
        let wide = match self.vcpus[from.idx()].cur {
            Some(c) => {
                self.thread_flips
                    .record_and_check_wide(rule, llc_size, c.idx(), t.idx(), self.now)
            }
            None => false,
        };
        if from == prev || wide || !self.vms[vmi].cpuset.contains(from.0 - first) {
            return prev;
        }
        const NICE_0: u64 = 1024;
        let (this_nr, prev_nr) = (
            self.normal_runnable(from) as u64,
            self.normal_runnable(prev) as u64,
        );
        let loads = AffineLoads {
            this_load: this_nr * NICE_0,
            this_nr: this_nr as u32,
            this_idle: self.vcpu_idle(from),
            prev_load: prev_nr * NICE_0,
            prev_idle: self.vcpu_idle(prev),
            task_load: NICE_0,
        };
        // The lowest domain spanning both vCPUs: their shared cache's, or with a socket
        // per vCPU the top one (no shared cache: 4.14's wake_affine_idle passes).
        let level = if llc_per_vcpu {
            crate::host::topology::Level::Node
        } else {
            crate::host::topology::Level::Llc
        };
        if rule.affine(level, !llc_per_vcpu, &loads) {
            self.vms[vmi].guest_affine_wakes += 1;
            from
        } else {
            prev
        }
    }

    /// Puts the woken thread on vCPU `v`'s runqueue.
    fn enqueue_woken(&mut self, t: ThreadId, v: VcpuId, path: u8) {
        self.move_thread(t, v);
        let th = &mut self.threads[t.idx()];
        th.woken_at = Some(self.now);
        th.wake_path = path;
        self.activate_woken(t, v);
    }

    /// Puts the woken thread on vCPU `v`'s wake list (ttwu_queue_remote: its CPU is
    /// set, it is on no runqueue yet).
    fn queue_on_wake_list(&mut self, t: ThreadId, v: VcpuId, path: u8) {
        self.move_thread(t, v);
        let th = &mut self.threads[t.idx()];
        th.state = ThreadState::Waking;
        th.woken_at = Some(self.now);
        th.wake_path = path;
        self.vcpus[v.idx()].wake_list.push(t);
    }

    /// ttwu_do_activate: the woken thread `t` joins `v`'s runqueue, placed against its
    /// current minimum (place_entity), as the wake-up or the wake list's drain does it.
    pub(crate) fn activate_woken(&mut self, t: ThreadId, v: VcpuId) {
        let latency = self.vms[self.vcpus[v.idx()].vm.idx()].guest.latency;
        let min_vr = self.vcpus[v.idx()].min_vr;
        if self.guest_eevdf(v) {
            self.eevdf_place(v, t);
        }
        let eevdf = self.guest_eevdf(v);
        let th = &mut self.threads[t.idx()];
        th.state = ThreadState::Runnable;
        if !eevdf {
            th.vruntime = th.vruntime.max(min_vr.saturating_sub(latency / 2));
        }
        self.rq_push(v, t);
    }

    /// scheduler_ipi → sched_ttwu_pending: `v` handles a reschedule IPI and enqueues
    /// the threads on its wake list, in the order they were woken. Returns them (the
    /// list's buffer: hand it back with `return_wake_list`).
    fn drain_wake_list(&mut self, v: VcpuId) -> Vec<ThreadId> {
        let list = std::mem::take(&mut self.vcpus[v.idx()].wake_list);
        for &t in &list {
            self.activate_woken(t, v);
        }
        list
    }

    /// Gives a drained wake list's buffer back to `v` (emptied), so that its next
    /// wake-up does not allocate.
    fn return_wake_list(&mut self, v: VcpuId, mut list: Vec<ThreadId>) {
        list.clear();
        let vc = &mut self.vcpus[v.idx()];
        if vc.wake_list.is_empty() && list.capacity() > vc.wake_list.capacity() {
            vc.wake_list = list;
        }
    }

    /// Whether a wake-up onto `target` goes through its wake list (ttwu_queue →
    /// ttwu_queue_remote, later ttwu_queue_wakelist): every remote wake-up before
    /// Linux 3.3, across caches after, and from 6.0 (`guest.wake_list_idle`) one onto
    /// an idle CPU of the same cache too — `ttwu_queue_cond`'s `!nr_running`, which
    /// counts neither the idle task nor threads already on the wake list, and does not
    /// ask whether the host preempted the vCPU.
    fn uses_wake_list(&self, target: VcpuId) -> bool {
        let vc = &self.vcpus[target.idx()];
        let g = &self.vms[vc.vm.idx()].guest;
        g.ttwu_queue
            && (g.wake_ipi == WakeIpi::Always
                || g.llc_per_vcpu
                || (g.wake_list_idle && vc.cur.is_none() && vc.rq.is_empty()))
    }

    /// Thread-to-thread wake-up issued on vCPU `from`.
    pub(crate) fn send_wake(&mut self, from: VcpuId, w: ThreadId) {
        if self.threads[w.idx()].state != ThreadState::Blocked {
            self.threads[w.idx()].wake_pending = true;
            return;
        }
        let target = self.select_wake_vcpu(w, Some(from));
        if self.trace.is_some() {
            let now = self.now;
            let name = format!("wakes {}", self.threads[w.idx()].name);
            self.trace_flow(from, &name, World::wake_flow_key(now, w), true, now);
        }
        if target == from {
            self.enqueue_woken(w, target, PATH_SAME_VCPU);
            self.wakeup_resched_waker(from, w);
            return;
        }
        let remote = self.costs.remote_wake_ns;
        let polling = {
            let tv = &self.vcpus[target.idx()];
            tv.is_running() && tv.act == VcpuActivity::IdlePoll
        };
        if polling {
            // A polling idle loop sees the flag without an interrupt.
            self.enqueue_woken(w, target, PATH_RUNNING);
            let msg = IpiMsg::new(IpiKind::Poke, w, 0, from, self.waker_of(from, true));
            self.irq_send(IpiKind::Poke, from, &[target]);
            self.q
                .push(self.now + Nanos(remote), Ev::IpiArrive(target, msg));
            return;
        }
        if self.uses_wake_list(target) {
            // ttwu_queue_remote: the wakee waits on the target's wake list, on no
            // runqueue, until the target handles the IPI; one IPI per emptying of the
            // list (llist_add returns whether it was empty: `wake_ipi_outstanding`).
            self.queue_on_wake_list(w, target, PATH_RUNNING);
        } else {
            self.enqueue_woken(w, target, PATH_RUNNING);
            if self.wake_without_ipi(target, w) {
                return;
            }
        }
        if self.vcpus[target.idx()].wake_ipi_outstanding {
            // The target has not yet handled the reschedule IPI sent for an earlier
            // wake-up, which takes this wakee in too: Linux sends none now
            // (ttwu_queue_remote sends one only when llist_add finds the target's wake
            // list empty; resched_curr none while need_resched is set).
            if self.vcpus[target.idx()].hv == HvState::Runnable {
                self.threads[w.idx()].wake_path = PATH_PREEMPTED;
            }
            return;
        }
        self.vcpus[target.idx()].wake_ipi_outstanding = true;
        // The waker's ICR write exits (and kicks a halted target's thread) on its own
        // vCPU, inside the futex bucket lock when the kernel sends the IPI under it.
        let vm = self.vcpus[from.idx()].vm.idx();
        let exit = self.icr_write_cost(vm, target);
        if let Some(cur) = self.vcpus[from.idx()].cur {
            self.threads[cur.idx()]
                .micro
                .push_front(Micro::Exit { ns: exit });
        }
        self.protect_sender(from);
        let msg = IpiMsg::new(IpiKind::Resched, w, 0, from, self.waker_of(from, true));
        self.irq_send(IpiKind::Resched, from, &[target]);
        let flight = remote + self.icr_flight_ns();
        self.q
            .push(self.now + Nanos(flight), Ev::IpiArrive(target, msg));
    }

    /// No wake list (`guest.wake_ipi = "on-preempt"`, Linux 3.3+, between vCPUs
    /// sharing a last-level cache; or `guest.ttwu_queue` off): the waker enqueued `w`
    /// on `target` itself (ttwu_do_activate under the target's runqueue lock) and sends no IPI unless the target must reschedule — it idles, or
    /// check_preempt_curr finds that `w` preempts its current thread (after
    /// update_curr). True when no IPI is sent: `w` waits in the runqueue, and a running
    /// target computing work takes a step now, which re-arms it so that its tick sees
    /// `w` (a spinning target's next step does).
    fn wake_without_ipi(&mut self, target: VcpuId, w: ThreadId) -> bool {
        let Some(c) = self.vcpus[target.idx()].cur else {
            return false;
        };
        self.sync_progress(target);
        if self.wakeup_preempts(target, c, Some(w)) {
            return false;
        }
        let vc = &self.vcpus[target.idx()];
        if !vc.is_running() {
            self.threads[w.idx()].wake_path = PATH_PREEMPTED;
        } else if vc.act == VcpuActivity::Thread
            && self.threads[c.idx()].act == ThreadActivity::Work
        {
            // Re-armed by a step now, through the event loop: the target may be in the
            // middle of its own step further up this call stack (a waker that a poke from
            // the target let go on), and must not be continued inside it.
            let vc = &mut self.vcpus[target.idx()];
            vc.gen = vc.gen.wrapping_add(1);
            let at = self.now.max(vc.resume_at);
            self.push_step(target, at);
        }
        true
    }

    /// An IPI reaches `target`: handled now (running), at its next dispatch
    /// (preempted), or after waking it (halted).
    pub(crate) fn on_ipi_arrive(&mut self, target: VcpuId, msg: IpiMsg) {
        let flight = match msg.kind {
            IpiKind::Poke => self.costs.remote_wake_ns,
            IpiKind::Resched => self.costs.remote_wake_ns + self.icr_flight_ns(),
            IpiKind::Tlb => self.icr_flight_ns(),
        };
        let sent = Nanos(self.now.0.saturating_sub(flight));
        let tlb = (msg.kind == IpiKind::Tlb).then_some((msg.thread, msg.gen()));
        let woken = (msg.kind != IpiKind::Tlb).then_some(msg.thread);
        let how = self.irq_deliver(
            target,
            Irq::Ipi {
                kind: msg.kind,
                sent,
                tlb,
                waker: msg.waker(|t| self.threads[t.idx()].vcpu),
            },
        );
        // The wake-up path is decided by the target's state when the IPI arrives.
        if let Some(w) = woken {
            let th = &mut self.threads[w.idx()];
            if th.woken_at.is_some() {
                let busy_pcpu = matches!(how, Delivered::Woken(p) if !p.pcpu_idle);
                if busy_pcpu || th.vcpu == target {
                    th.wake_path = wake_path_of(how);
                }
            }
        }
        if how == Delivered::Running {
            if msg.kind == IpiKind::Poke {
                if self.vcpus[target.idx()].act == VcpuActivity::IdlePoll {
                    self.vcpu_continue(target);
                } else if self.vcpus[target.idx()].cur.is_none() {
                    // Stopped polling meanwhile: it needs a real interrupt after all.
                    self.handle_interrupt(target, IpiKind::Resched, sent, None, woken);
                }
            } else {
                self.handle_interrupt(target, msg.kind, sent, tlb, woken);
            }
        }
        // DCS: the IPI is a coordination signal for a target that waits for a pCPU.
        let urgent = match msg.kind {
            IpiKind::Tlb if self.dcs_tlb_co => Some(crate::hv::uvf::UrgentKind::TlbShootdown),
            IpiKind::Resched if self.dcs_resched_co[self.vcpus[target.idx()].vm.idx()] => {
                Some(crate::hv::uvf::UrgentKind::Resched)
            }
            _ => None,
        };
        if let Some(k) = urgent {
            self.make_urgent(target, k);
        }
    }

    /// The running vCPU `v` takes an interrupt sent at `sent`: it exits and the
    /// interrupt is injected (unless posted), then the guest handles it.
    pub(crate) fn handle_interrupt(
        &mut self,
        v: VcpuId,
        kind: IpiKind,
        sent: Nanos,
        tlb: Option<(ThreadId, u32)>,
        woken: Option<ThreadId>,
    ) {
        self.sync_progress(v);
        let drained = self.inject_ipi(v, kind, sent, tlb, false);
        if kind == IpiKind::Resched {
            if drained.is_empty() {
                // The waker enqueued its wakee itself (no wake list).
                self.wakeup_preempt(v, woken);
            } else {
                // check_preempt_curr for each thread the wake list held.
                self.wakeup_preempt_any(v, &drained);
            }
        }
        self.return_wake_list(v, drained);
        self.vcpu_continue(v);
    }

    /// A thread, or an interrupt handler, on `v` woke `w` onto `v` itself:
    /// check_preempt_wakeup (or check_preempt_wakeup_fair) may ask for a reschedule,
    /// which takes `v`'s current thread off as soon as the waking code is done — at its
    /// next step in guest/kernel.rs vcpu_continue, outside any kernel spin section —
    /// unless it has blocked or been preempted first.
    fn wakeup_resched_waker(&mut self, v: VcpuId, w: ThreadId) {
        let Some(c) = self.vcpus[v.idx()].cur.filter(|c| *c != w) else {
            return;
        };
        let resched = self.wakeup_preempts(v, c, Some(w));
        if resched {
            self.vcpus[v.idx()].need_resched = true;
        }
    }

    /// Wake-up preemption in the guest as the interrupt that queued `woken` on `v`
    /// returns (check_preempt_wakeup, or check_preempt_wakeup_fair on EEVDF guests, then
    /// the preemption on the interrupt's exit path): a woken thread far enough behind the
    /// current one takes the vCPU — never inside a kernel spin section, where preemption
    /// is off. The caller then continues `v`.
    fn wakeup_preempt(&mut self, v: VcpuId, woken: Option<ThreadId>) {
        let Some(c) = self.vcpus[v.idx()].cur else {
            return;
        };
        if self.wakeup_preempts(v, c, woken) && self.resched_now(v, c, false) {
            self.guest_preempt(v, c);
        }
    }

    /// Like `wakeup_preempt`, for the threads a wake list held: the current thread
    /// gives way if any of them preempts it (each activation's check_preempt_curr; the
    /// first that asks for a reschedule settles it).
    fn wakeup_preempt_any(&mut self, v: VcpuId, wakees: &[ThreadId]) {
        let Some(c) = self.vcpus[v.idx()].cur else {
            return;
        };
        let preempts = wakees.iter().any(|&w| self.wakeup_preempts(v, c, Some(w)));
        if preempts && self.resched_now(v, c, false) {
            self.guest_preempt(v, c);
        }
    }

    /// Injects an IPI sent at `sent` into `v`, which is running (`at_entry` false: an
    /// exit and injection, none with posted interrupts) or entering (injected with the
    /// entry), plus its EOI and, for a shootdown, the TLB flush; records its latency and
    /// schedules the shootdown's acknowledgement when the handler is done. A reschedule
    /// IPI's handler drains the wake list: the threads it enqueued are returned.
    fn inject_ipi(
        &mut self,
        v: VcpuId,
        kind: IpiKind,
        sent: Nanos,
        tlb: Option<(ThreadId, u32)>,
        at_entry: bool,
    ) -> Vec<ThreadId> {
        let now = self.now;
        let vm = self.vcpus[v.idx()].vm.idx();
        let mut cost = if at_entry {
            self.irq_at_entry_cost(vm)
        } else {
            self.irq_running_cost(vm)
        };
        if kind == IpiKind::Tlb {
            cost += self.costs.tlb_flush_ns;
        }
        let vc = &mut self.vcpus[v.idx()];
        if kind == IpiKind::Resched {
            // scheduler_ipi → sched_ttwu_pending: the wake list is drained.
            vc.wake_ipi_outstanding = false;
        }
        if kind == IpiKind::Tlb && vc.cur.is_none() {
            // A vCPU in lazy TLB mode leaves the mm (leave_mm, Linux before 4.19): it is
            // out of the process's mask until it runs one of its threads again.
            vc.mm = crate::hv::vcpu::NO_MM;
        }
        let done = vc.charge_overhead(now, Nanos(cost));
        let vm = vc.vm.idx();
        let lat = done.0.saturating_sub(sent.0);
        match kind {
            IpiKind::Tlb => self.vms[vm].ipi_tlb.record(lat),
            _ => self.vms[vm].ipi_resched.record(lat),
        }
        if let Some((sender, gen)) = tlb {
            self.q.push(done, Ev::TlbAck(sender, gen));
        }
        if kind == IpiKind::Resched && !self.vcpus[v.idx()].wake_list.is_empty() {
            self.drain_wake_list(v)
        } else {
            Vec::new()
        }
    }

    /// Interrupts that arrived while `v` was not running, handled as it resumes.
    pub(crate) fn process_pending(&mut self, v: VcpuId) {
        let vc = &self.vcpus[v.idx()];
        if vc.pending.is_empty() && vc.pending_irq.is_empty() && vc.pending_timer.is_none() {
            return;
        }
        let mut pend = std::mem::take(&mut self.vcpus[v.idx()].pending);
        let now = self.now;
        let mut resched = false;
        for &(kind, sent, tlb) in &pend {
            // Drained threads are in the runqueue, whose leftmost the check below sees.
            let drained = self.inject_ipi(v, kind, sent, tlb, true);
            self.return_wake_list(v, drained);
            resched |= kind == IpiKind::Resched;
        }
        // Give the buffer back (emptied) so the next interrupt does not allocate.
        pend.clear();
        if self.vcpus[v.idx()].pending.is_empty() {
            self.vcpus[v.idx()].pending = pend;
        }
        let irqs = std::mem::take(&mut self.vcpus[v.idx()].pending_irq);
        for (t, raised) in irqs {
            let vm = self.vcpus[v.idx()].vm.idx();
            let inject = self.irq_at_entry_cost(vm);
            let vc = &mut self.vcpus[v.idx()];
            let done = vc.add_overhead(now, Nanos(inject));
            let vm = vc.vm.idx();
            self.vms[vm]
                .irq_latency
                .record(done.0.saturating_sub(raised.0));
            self.send_wake(v, t);
        }
        // A timer interrupt that fell while `v` waited is injected now; the threads its
        // expiries woke were queued then (guest/timer.rs), and are checked for wake-up
        // preemption as it returns.
        if self.vcpus[v.idx()].pending_timer.take().is_some() {
            let inject = self.irq_at_entry_cost(self.vcpus[v.idx()].vm.idx());
            self.vcpus[v.idx()].add_overhead(now, Nanos(inject));
            resched = true;
        }
        // Threads woken onto `v` while it waited, whose reschedule IPI is injected now,
        // may preempt the current thread as the interrupt returns (a thread the device
        // interrupts wake here is handled by send_wake, as any wake-up onto the waker's
        // own vCPU).
        if resched {
            self.wakeup_preempt(v, None);
        }
    }

    /// Shoots down the TLBs of the other vCPUs in the mm CPU mask of `t`'s process
    /// (flush_tlb_others / flush_tlb_multi over mm_cpumask, arch/x86/mm/tlb.c): those
    /// running one of its threads or preempted while running one, and those idling in
    /// lazy TLB mode with its mm still loaded — skipped from Linux 4.19
    /// (`guest.tlb_skip_lazy`), and with KVM PV TLB flush preempted ones are skipped
    /// too (they flush at their next entry). The sender then waits, spinning, for every
    /// acknowledgement.
    pub(crate) fn tlb_shootdown(&mut self, t: ThreadId, v: VcpuId) {
        let vm = self.vcpus[v.idx()].vm;
        let (first, n) = (self.vms[vm.idx()].first_vcpu, self.vms[vm.idx()].nvcpus);
        let mm = self.threads[t.idx()].process;
        let th = &mut self.threads[t.idx()];
        th.tlb_gen = th.tlb_gen.wrapping_add(1);
        let gen = th.tlb_gen;
        let mut targets = std::mem::take(&mut self.irq_recipients);
        targets.clear();
        targets.extend(
            (0..n)
                .map(|i| VcpuId(first + i))
                .filter(|&tv| tv != v && self.tlb_target(vm.idx(), tv, mm)),
        );
        self.threads[t.idx()].acks_left = targets.len() as u32;
        self.threads[t.idx()].wait_start = self.now;
        // One ICR write (an exit) per target, x2APIC physical mode as the guests of the
        // studies send them; then the local flush.
        let exits = targets
            .iter()
            .map(|&tv| self.icr_write_cost(vm.idx(), tv))
            .sum();
        let th = &mut self.threads[t.idx()];
        th.micro.push_front(Micro::TlbWait);
        th.micro.push_front(Micro::Work {
            ns: self.costs.tlb_flush_ns,
            kernel: true,
        });
        th.micro.push_front(Micro::Exit { ns: exits });
        self.vms[vm.idx()].tlb_shootdowns += 1;
        self.irq_send(IpiKind::Tlb, v, &targets);
        let msg = IpiMsg::new(IpiKind::Tlb, t, gen, v, self.waker_of(v, true));
        let at = self.now + Nanos(self.icr_flight_ns());
        for &tv in &targets {
            self.q.push(at, Ev::IpiArrive(tv, msg));
        }
        self.irq_recipients = targets;
    }

    /// Whether `tv` (of VM `vm`) is sent a shootdown for process `mm`'s address space.
    fn tlb_target(&self, vm: usize, tv: VcpuId, mm: u16) -> bool {
        let g = &self.vms[vm].guest;
        let vc = &self.vcpus[tv.idx()];
        let lazy = vc.cur.is_none();
        vc.mm == mm && !(g.tlb_skip_lazy && lazy) && !(g.pv_tlb_flush && vc.hv == HvState::Runnable)
    }

    pub(crate) fn on_tlb_ack(&mut self, t: ThreadId, gen: u32) {
        let th = &mut self.threads[t.idx()];
        if th.tlb_gen != gen || th.acks_left == 0 {
            return;
        }
        th.acks_left -= 1;
        if th.acks_left == 0
            && th.act == ThreadActivity::TlbWait
            && self.vcpus[th.vcpu.idx()].cur == Some(t)
        {
            let v = th.vcpu;
            if self.vcpus[v.idx()].is_running() {
                self.sync_progress(v);
                self.vcpu_continue(v);
            }
        }
    }

    /// A device completion for thread `t`: the interrupt goes to the VM's vCPU 0.
    pub(crate) fn on_io_done(&mut self, t: ThreadId) {
        let vm = self.threads[t.idx()].vm;
        let irqv = VcpuId(self.vms[vm.idx()].first_vcpu);
        let how = self.irq_deliver(irqv, Irq::Device { thread: t });
        if how == Delivered::Running {
            self.send_wake(irqv, t);
            if self.vcpus[irqv.idx()].is_running() {
                self.vcpu_continue(irqv);
            }
        }
    }
}
