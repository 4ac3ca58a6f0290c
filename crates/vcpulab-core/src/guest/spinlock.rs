//! Guest kernel spinlocks, one behaviour per kind that real kernels have (docs/model.md
//! "Kernel spinlocks" has a section per kind with its kernel file and function):
//!
//! - `ticket`: FIFO; the unlock hands the lock to the next ticket, owned but idle while
//!   that waiter's vCPU does not run (lock-waiter preemption).
//! - `pv-ticket` (Linux 3.12–4.1): ticket order; a waiter spins SPIN_THRESHOLD, then
//!   halts (kvm_lock_spinning); the unlocker hands over and kicks (kvm_unlock_kick).
//! - `qspinlock` (kernel/locking/qspinlock.c): a pending waiter, then an MCS queue; the
//!   unlock frees the lock and the next in line takes it when it runs.
//! - `pv-qspinlock` (kernel/locking/qspinlock_paravirt.h): no pending waiter; queue
//!   nodes halt after SPIN_THRESHOLD (earlier when the previous node is not running),
//!   the head halts after SPIN_THRESHOLD, the unlocker kicks a halted head, and while the
//!   head is not spinning (pending bit clear) arrivals may steal a free lock.
//! - `tas` (virt_spin_lock): unfair test-and-set.
//!
//! Every kind where all waiters spin on the lock word (ticket kinds, tas) pays a cache
//! line hand-off that grows with the spinners; the queued kinds pay one transfer.

use crate::guest::sync::Flow;
use crate::guest::thread::{Micro, ThreadActivity};
use crate::hv::preemption::{ByCause, PreemptCause};
use crate::metrics::Hist;
use crate::scenario::SpinlockKind;
use crate::sim::world::{LockEvent, World};
use crate::sim::{LockId, Nanos, ThreadId, VcpuId, VmId};
use std::collections::VecDeque;

/// One kernel spinlock.
#[derive(Clone, Debug)]
pub struct SpinLock {
    pub kind: SpinlockKind,
    pub holder: Option<ThreadId>,
    /// Waiters in line: ticket order (ticket kinds); the pending waiter, then the MCS
    /// queue from its head (qspinlock); the MCS queue from its head (pv-qspinlock); the
    /// spinners in arrival order, which gives them no priority (tas).
    pub waiters: VecDeque<ThreadId>,
    /// pv-qspinlock: arrivals spinning in the hybrid unfair trylock, not queued yet.
    pub stealers: Vec<ThreadId>,
    /// pv-qspinlock: the pending bit, set by a queue head while it actively spins on the
    /// lock word (set_pending), which turns lock stealing off.
    pub pending: bool,
    /// pv-qspinlock: _Q_SLOW_VAL — a halted head is hashed, so the next unlock kicks it
    /// (once: the unlock clears it).
    pub slow: bool,
    /// When the current holder acquired (or was handed) it.
    pub since: Nanos,
    pub class: u32,
    /// A lock-holder-preemption episode has been counted for the current holder.
    pub lhp_counted: bool,
}

impl SpinLock {
    pub fn new(kind: SpinlockKind, class: u32) -> SpinLock {
        SpinLock {
            kind,
            holder: None,
            waiters: VecDeque::new(),
            stealers: Vec::new(),
            pending: false,
            slow: false,
            since: Nanos::ZERO,
            class,
            lhp_counted: false,
        }
    }

    /// Whether anybody waits for it (queued, pending or trying to steal).
    pub fn contended(&self) -> bool {
        !self.waiters.is_empty() || !self.stealers.is_empty()
    }

    /// Whether every waiter spins on the lock word itself (so a release invalidates
    /// the line in all their caches).
    fn all_spin_on_word(&self) -> bool {
        matches!(
            self.kind,
            SpinlockKind::Ticket | SpinlockKind::PvTicket | SpinlockKind::Tas
        )
    }
}

/// What kind of lock a statistics class counts (the report's `locks.kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockClassKind {
    /// A guest kernel spinlock (a named lock site, a futex bucket, a semaphore's
    /// wait_lock).
    Spinlock,
    /// A user-space mutex (pthread-like: spin, then futex sleep).
    UserMutex,
    /// A guest kernel mutex (`kmutex_lock`: spin on a running owner, then sleep).
    KernelMutex,
    /// A guest kernel read-write semaphore (`rw_read` / `rw_write`).
    Rwsem,
    /// A user read-write lock (InnoDB's rw_lock_t: `rw_spin_read` / `rw_spin_write`).
    UserRwlock,
}

impl LockClassKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LockClassKind::Spinlock => "kernel",
            LockClassKind::UserMutex => "user",
            LockClassKind::KernelMutex => "kernel-mutex",
            LockClassKind::Rwsem => "rwsem",
            LockClassKind::UserRwlock => "user-rwlock",
        }
    }
}

/// Statistics of a class of locks (a named kernel lock, a VM's futex buckets, a
/// named user-space mutex of the workload, a kernel mutex or a read-write semaphore).
#[derive(Clone, Debug)]
pub struct LockClass {
    pub vm: VmId,
    pub name: String,
    pub kind: LockClassKind,
    pub acquisitions: u64,
    pub contended: u64,
    pub wait: Hist,
    pub hold: Hist,
    pub lhp: u64,
    /// `lhp` by what took the holder's vCPU (or thread) off.
    pub lhp_by: ByCause,
    pub lwp: u64,
    /// pv kinds: waiters that halted their vCPU (pv_wait / kvm_lock_spinning).
    pub halts: u64,
    /// pv kinds: kicks of a halted waiter by the unlocker (KVM_HC_KICK_CPU).
    pub kicks: u64,
    /// pv-qspinlock: acquisitions ahead of the queue (the hybrid unfair trylock).
    pub steals: u64,
}

impl LockClass {
    /// A lock-holder preemption, for `cause`.
    pub fn count_lhp(&mut self, cause: PreemptCause) {
        self.lhp += 1;
        self.lhp_by.add(cause);
    }

    /// An acquisition at `now` by a thread that first failed to take the lock at
    /// `since` (`Nanos::MAX`: it took it at once): every acquisition records its wait,
    /// 0 when uncontended (a mutex, rw-semaphore or user lock; spinlocks count in
    /// guest/spinlock.rs's own paths).
    pub fn count_acquisition(&mut self, since: Nanos, now: Nanos) {
        self.acquisitions += 1;
        if since != Nanos::MAX {
            self.contended += 1;
            self.wait.record(now.0.saturating_sub(since.0));
        } else {
            self.wait.record(0);
        }
    }

    pub fn new(vm: VmId, name: String) -> LockClass {
        LockClass {
            vm,
            name,
            kind: LockClassKind::Spinlock,
            acquisitions: 0,
            contended: 0,
            wait: Hist::default(),
            hold: Hist::default(),
            lhp: 0,
            lhp_by: ByCause::default(),
            lwp: 0,
            halts: 0,
            kicks: 0,
            steals: 0,
        }
    }
}

/// pv_wait_early checks the previous node every 256 (PV_PREV_CHECK_MASK + 1) of the
/// SPIN_THRESHOLD = 2^15 iterations.
const PREV_CHECK_FRACTION: u64 = (1 << 15) / 256;

impl World {
    pub(crate) fn vcpu_runs_thread(&self, t: ThreadId) -> bool {
        let v = self.threads[t.idx()].vcpu;
        let vc = &self.vcpus[v.idx()];
        vc.is_running() && vc.cur == Some(t)
    }

    /// Whether `t` is spinning on a running vCPU (not halted, not preempted).
    fn spins_now(&self, t: ThreadId) -> bool {
        matches!(self.threads[t.idx()].act, ThreadActivity::SpinLock(_)) && self.vcpu_runs_thread(t)
    }

    /// The running spinner `t`'s vCPU re-checks at once what it waits for.
    fn poke(&mut self, t: ThreadId) {
        let v = self.threads[t.idx()].vcpu;
        self.sync_progress(v);
        self.vcpu_continue(v);
    }

    /// Tries to take kernel spinlock `l`; on contention the thread starts spinning.
    pub(crate) fn klock(&mut self, t: ThreadId, l: LockId) -> Flow {
        let now = self.now;
        let lk = &self.locks[l.idx()];
        let free = lk.holder.is_none()
            && match lk.kind {
                SpinlockKind::Tas => true,
                // The lock word is zero only with nobody pending or queued (and the
                // next ticket is the one drawn only when nobody waits).
                SpinlockKind::Ticket | SpinlockKind::PvTicket | SpinlockKind::Qspinlock => {
                    lk.waiters.is_empty()
                }
                // Fast path on an empty queue; otherwise the hybrid unfair trylock takes
                // a free lock unless the head spins (pending).
                SpinlockKind::PvQspinlock => lk.waiters.is_empty() || !lk.pending,
            };
        let steal = free && lk.kind == SpinlockKind::PvQspinlock && !lk.waiters.is_empty();
        let class = lk.class as usize;
        let head_running = steal && lk.waiters.front().is_some_and(|h| self.spins_now(*h));
        if let Some(log) = self.lock_log.as_mut() {
            log.push(LockEvent::Arrive(l, t, now));
            if free {
                log.push(LockEvent::Acquire(l, t, now));
            }
            if steal {
                log.push(LockEvent::Steal {
                    lock: l,
                    thief: t,
                    head_running,
                });
            }
        }
        if free {
            let lk = &mut self.locks[l.idx()];
            lk.holder = Some(t);
            lk.since = now;
            lk.lhp_counted = false;
            let c = &mut self.lock_classes[class];
            c.acquisitions += 1;
            c.steals += steal as u64;
            c.wait.record(0);
            self.threads[t.idx()].held.push(l);
            return Flow::Next;
        }
        let lk = &mut self.locks[l.idx()];
        if lk.kind == SpinlockKind::PvQspinlock && !lk.waiters.is_empty() && !lk.pending {
            // pv_hybrid_queued_unfair_trylock: spin trying to steal while there is a
            // queue and its head does not spin.
            lk.stealers.push(t);
        } else {
            lk.waiters.push_back(t);
        }
        self.lock_classes[class].contended += 1;
        // Lock-holder preemption: the holder's vCPU is not running while we spin.
        if let Some(h) = self.locks[l.idx()].holder {
            if !self.locks[l.idx()].lhp_counted && !self.vcpu_runs_thread(h) {
                self.locks[l.idx()].lhp_counted = true;
                // Its vCPU is off, for the cause it was taken off for.
                let cause = self.vcpus[self.threads[h.idx()].vcpu.idx()].stop_cause;
                self.lock_classes[class].count_lhp(cause);
                self.trace_lock_event("lock-holder preempted", h, class);
            }
        }
        let budget = self.pv_spin_budget(t);
        let th = &mut self.threads[t.idx()];
        th.act = ThreadActivity::SpinLock(l);
        th.wait_start = now;
        th.spin_left = budget;
        Flow::Wait
    }

    fn pv_spin_budget(&self, t: ThreadId) -> u64 {
        let v = self.threads[t.idx()].vcpu;
        self.vms[self.vcpus[v.idx()].vm.idx()].guest.pv_spin
    }

    /// Whether the spinning (or pv-halted) thread `t` gets lock `l` now; takes it if so.
    pub(crate) fn spin_lock_ready(&mut self, t: ThreadId, l: LockId) -> bool {
        let lk = &self.locks[l.idx()];
        let free = lk.holder.is_none();
        let head = lk.waiters.front() == Some(&t);
        let take = match lk.kind {
            // Handed over at release.
            SpinlockKind::Ticket | SpinlockKind::PvTicket => lk.holder == Some(t),
            SpinlockKind::Tas => free,
            // The pending waiter, or the queue head once nobody is pending.
            SpinlockKind::Qspinlock => free && head,
            SpinlockKind::PvQspinlock => free && (head || !lk.pending && lk.stealers.contains(&t)),
        };
        if take {
            self.lock_acquired(t, l);
            return true;
        }
        if lk.kind == SpinlockKind::PvQspinlock
            && self.threads[t.idx()].act == ThreadActivity::SpinLock(l)
        {
            if head {
                self.pvq_head_spins(l, t);
            } else {
                self.pvq_wait_early(l, t);
            }
        }
        false
    }

    /// pv_wait_head_or_lock: the running head sets the pending bit (no more stealing)
    /// and spins a fresh SPIN_THRESHOLD; arrivals trying to steal queue up behind.
    fn pvq_head_spins(&mut self, l: LockId, t: ThreadId) {
        let lk = &mut self.locks[l.idx()];
        if lk.pending {
            return;
        }
        lk.pending = true;
        let stealers = std::mem::take(&mut lk.stealers);
        lk.waiters.extend(stealers);
        let budget = self.pv_spin_budget(t);
        self.threads[t.idx()].spin_left = budget;
    }

    /// pv_wait_early: a queue node whose previous node is halted, or (with
    /// vcpu_is_preempted) whose previous node's vCPU is preempted, halts at its next
    /// check, within 256 of the 2^15 spins.
    fn pvq_wait_early(&mut self, l: LockId, t: ThreadId) {
        let lk = &self.locks[l.idx()];
        let Some(i) = lk.waiters.iter().position(|w| *w == t) else {
            return;
        };
        if i == 0 {
            return;
        }
        let prev = lk.waiters[i - 1];
        let vm = self.threads[t.idx()].vm.idx();
        let halted = matches!(self.threads[prev.idx()].act, ThreadActivity::PvHalt(_));
        let preempted = self.vms[vm].guest.vcpu_is_preempted && !self.vcpu_runs_thread(prev);
        if halted || preempted {
            let check = (self.vms[vm].guest.pv_spin / PREV_CHECK_FRACTION).max(1);
            let th = &mut self.threads[t.idx()];
            th.spin_left = th.spin_left.min(check);
        }
    }

    /// The pv-qspinlock node after `t` re-checks its previous node now (`t` halted or
    /// its vCPU was preempted).
    fn pvq_poke_successor(&mut self, l: LockId, t: ThreadId) {
        let lk = &self.locks[l.idx()];
        let Some(i) = lk.waiters.iter().position(|w| *w == t) else {
            return;
        };
        if let Some(&n) = lk.waiters.get(i + 1) {
            if self.spins_now(n) {
                self.poke(n);
            }
        }
    }

    /// The vCPU of `v` was preempted: a pv-qspinlock waiter's successor notices it
    /// through vcpu_is_preempted, and so do writers spinning on a read-write semaphore
    /// or kernel mutex its thread owns (owner_on_cpu; rwsem_spin_step decides whether
    /// the semaphore's kernel looks).
    pub(crate) fn spin_waiter_preempted(&mut self, v: VcpuId) {
        let Some(t) = self.vcpus[v.idx()].cur else {
            return;
        };
        if self.rwsem_spinning > 0 {
            let g = &self.vms[self.threads[t.idx()].vm.idx()].guest;
            if g.vcpu_is_preempted {
                self.rwsem_owner_left(t);
            }
        }
        if let ThreadActivity::SpinLock(l) = self.threads[t.idx()].act {
            if self.locks[l.idx()].kind == SpinlockKind::PvQspinlock
                && self.vms[self.threads[t.idx()].vm.idx()]
                    .guest
                    .vcpu_is_preempted
            {
                self.pvq_poke_successor(l, t);
            }
        }
    }

    /// The spinning (or pv-halted) thread `t` got lock `l`.
    fn lock_acquired(&mut self, t: ThreadId, l: LockId) {
        let now = self.now;
        if let Some(log) = self.lock_log.as_mut() {
            log.push(LockEvent::Acquire(l, t, now));
        }
        // The line hand-off: one transfer, plus, where every waiter spins on the lock
        // word, the other spinners' re-reads the new owner waits behind (on average
        // half of them).
        let lk = &self.locks[l.idx()];
        let others = if lk.all_spin_on_word() {
            lk.waiters
                .iter()
                .filter(|w| **w != t && self.spins_now(**w))
                .count() as u64
        } else {
            0
        };
        let handoff = self.costs.spin_handoff_ns + self.costs.spin_handoff_ns * others / 2;
        let th = &mut self.threads[t.idx()];
        th.pv_halted = false;
        let waited = now.0.saturating_sub(th.wait_start.0);
        th.act = ThreadActivity::Work;
        th.remaining = Nanos::ZERO;
        th.held.push(l);
        th.debt += Nanos(handoff);
        let lk = &mut self.locks[l.idx()];
        let mut stole = false;
        if lk.waiters.front() == Some(&t) {
            lk.waiters.pop_front();
        } else if let Some(i) = lk.waiters.iter().position(|w| *w == t) {
            lk.waiters.remove(i);
        } else if let Some(i) = lk.stealers.iter().position(|w| *w == t) {
            lk.stealers.swap_remove(i);
            stole = true;
        }
        if lk.holder != Some(t) {
            lk.since = now;
        }
        lk.holder = Some(t);
        lk.lhp_counted = false;
        let mut new_head = None;
        if lk.kind == SpinlockKind::PvQspinlock && !stole {
            // trylock_clear_pending (or the halted head's own xchg: unhashed); the MCS
            // hand-off makes the next node the head.
            lk.pending = false;
            lk.slow = false;
            if lk.waiters.is_empty() {
                // No queue left: the stealers stop trying and queue up.
                let s = std::mem::take(&mut lk.stealers);
                lk.waiters.extend(s);
            }
            new_head = lk.waiters.front().copied();
            // pv_kick_node: a halted new head is hashed for the unlocker to kick.
            if let Some(h) = new_head {
                if matches!(self.threads[h.idx()].act, ThreadActivity::PvHalt(_)) {
                    self.locks[l.idx()].slow = true;
                }
            }
        }
        if stole {
            let head_running = self.locks[l.idx()]
                .waiters
                .front()
                .is_some_and(|h| self.spins_now(*h));
            if let Some(log) = self.lock_log.as_mut() {
                log.push(LockEvent::Steal {
                    lock: l,
                    thief: t,
                    head_running,
                });
            }
        }
        let lk = &self.locks[l.idx()];
        let c = &mut self.lock_classes[lk.class as usize];
        c.acquisitions += 1;
        c.steals += stole as u64;
        c.wait.record(waited);
        if let Some(h) = new_head {
            if self.spins_now(h) {
                self.poke(h);
            }
        }
    }

    /// Releases kernel spinlock `l` held by `t`, handing it on as its kind does.
    pub(crate) fn kunlock(&mut self, t: ThreadId, l: LockId) {
        let now = self.now;
        {
            let th = &mut self.threads[t.idx()];
            if let Some(i) = th.held.iter().position(|x| *x == l) {
                th.held.swap_remove(i);
            }
        }
        if let Some(log) = self.lock_log.as_mut() {
            log.push(LockEvent::Release(l, t, now));
        }
        let lk = &mut self.locks[l.idx()];
        debug_assert_eq!(lk.holder, Some(t), "unlock by a non-holder");
        let held = now.0.saturating_sub(lk.since.0);
        let class = lk.class as usize;
        self.lock_classes[class].hold.record(held);
        lk.holder = None;
        lk.since = now;
        match lk.kind {
            SpinlockKind::Ticket | SpinlockKind::PvTicket => {
                // The next ticket owns the lock from now on (__ticket_spin_unlock).
                let Some(n) = lk.waiters.pop_front() else {
                    return;
                };
                lk.holder = Some(n);
                if matches!(self.threads[n.idx()].act, ThreadActivity::PvHalt(_)) {
                    // kvm_unlock_kick: a hypercall by the unlocker.
                    self.pv_kick(t, n, class);
                } else if self.vcpu_runs_thread(n) {
                    self.poke(n);
                } else {
                    // Lock-waiter preemption: the lock is taken but idle while its
                    // owner's vCPU does not run, and everyone behind it spins.
                    self.lock_classes[class].lwp += 1;
                    self.trace_lock_event("lock-waiter preempted", n, class);
                }
            }
            SpinlockKind::Tas => {
                // Unfair: the first waiter spinning on a running vCPU wins; if none
                // runs, the lock stays free for whoever comes first.
                let lk = &self.locks[l.idx()];
                let winner = lk.waiters.iter().copied().find(|w| self.spins_now(*w));
                if let Some(w) = winner {
                    self.poke(w);
                }
            }
            SpinlockKind::Qspinlock => {
                // queued_spin_unlock frees the lock word; the pending waiter or the
                // queue head takes it when it runs, nobody else can.
                let Some(n) = lk.waiters.front().copied() else {
                    return;
                };
                if self.spins_now(n) {
                    self.poke(n);
                } else {
                    self.lock_classes[class].lwp += 1;
                    self.trace_lock_event("lock-waiter preempted", n, class);
                }
            }
            SpinlockKind::PvQspinlock => {
                let head = lk.waiters.front().copied();
                let pending = lk.pending;
                // A stealer on a running vCPU takes the free lock unless the head spins.
                let mut stolen = false;
                if !pending {
                    let lk = &self.locks[l.idx()];
                    let thief = lk.stealers.iter().copied().find(|w| self.spins_now(*w));
                    if let Some(w) = thief {
                        self.poke(w);
                        stolen = true;
                    }
                }
                let Some(h) = head else { return };
                if self.locks[l.idx()].slow {
                    // __pv_queued_spin_unlock_slowpath: unhash, release, pv_kick.
                    self.locks[l.idx()].slow = false;
                    self.pv_kick(t, h, class);
                } else if self.spins_now(h) {
                    self.poke(h);
                } else if !stolen {
                    self.lock_classes[class].lwp += 1;
                    self.trace_lock_event("lock-waiter preempted", h, class);
                }
            }
        }
    }

    /// The unlocker `t` kicks the halted waiter `n` (KVM_HC_KICK_CPU: a hypercall, an
    /// exit even with IPI virtualization). The host then does what an emulated ICR
    /// write does (arch/x86/kvm/x86.c `kvm_pv_kick_cpu_op` → kvm_irq_delivery_to_apic
    /// with APIC_DM_REMRD → `__apic_accept_irq` → kvm_vcpu_kick): the delivery, and the
    /// wake of a halted waiter's thread.
    fn pv_kick(&mut self, t: ThreadId, n: ThreadId, class: usize) {
        let nv = self.threads[n.idx()].vcpu;
        let wake = if self.vcpus[nv.idx()].hv == crate::hv::vcpu::HvState::Halted {
            self.costs.kick_wake_ns
        } else {
            0
        };
        let kick = self.costs.vmexit_ns + self.costs.ipi_send_ns + wake;
        self.threads[t.idx()].micro.push_front(Micro::Work {
            ns: kick,
            kernel: true,
        });
        self.lock_classes[class].kicks += 1;
        let by = self.threads[t.idx()].vcpu;
        self.kick_vcpu(nv, Some(by));
    }

    /// The pv spin budget of `t`, spinning for `l`, ran out.
    pub(crate) fn spin_lock_exhausted(&mut self, t: ThreadId, l: LockId) {
        let lk = &mut self.locks[l.idx()];
        let class = lk.class as usize;
        if lk.kind == SpinlockKind::PvQspinlock {
            if lk.stealers.contains(&t) {
                // The hybrid trylock has no threshold: keep trying.
                let budget = self.pv_spin_budget(t);
                self.threads[t.idx()].spin_left = budget;
                return;
            }
            if lk.waiters.front() == Some(&t) {
                // clear_pending, pv_hash, _Q_SLOW_VAL, pv_wait: stealing is on again.
                lk.pending = false;
                lk.slow = true;
            }
        }
        self.threads[t.idx()].act = ThreadActivity::PvHalt(l);
        self.lock_classes[class].halts += 1;
        if self.locks[l.idx()].kind == SpinlockKind::PvQspinlock {
            self.pvq_poke_successor(l, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticket_kinds_and_tas_spin_on_the_word_queued_kinds_do_not() {
        for (k, all) in [
            (SpinlockKind::Ticket, true),
            (SpinlockKind::PvTicket, true),
            (SpinlockKind::Tas, true),
            (SpinlockKind::Qspinlock, false),
            (SpinlockKind::PvQspinlock, false),
        ] {
            assert_eq!(SpinLock::new(k, 0).all_spin_on_word(), all, "{k:?}");
        }
    }

    #[test]
    fn only_the_pv_kinds_halt() {
        assert!(SpinlockKind::PvTicket.is_pv() && SpinlockKind::PvQspinlock.is_pv());
        assert!(!SpinlockKind::Ticket.is_pv() && !SpinlockKind::Qspinlock.is_pv());
        assert!(!SpinlockKind::Tas.is_pv());
    }

    #[test]
    fn old_names_read_as_the_kinds_they_modelled() {
        #[derive(serde::Deserialize)]
        struct G {
            k: SpinlockKind,
        }
        let k = |s: &str| toml::from_str::<G>(&format!("k = \"{s}\"")).map(|g| g.k);
        assert_eq!(k("pv").ok(), Some(SpinlockKind::PvTicket));
        assert_eq!(k("queued").ok(), Some(SpinlockKind::Qspinlock));
        assert_eq!(k("pv-qspinlock").ok(), Some(SpinlockKind::PvQspinlock));
        assert!(k("mcs").is_err());
    }
}
