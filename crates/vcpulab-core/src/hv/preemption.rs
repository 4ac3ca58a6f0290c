//! Why a runnable vCPU lost its pCPU: the cause each lock-holder preemption is
//! counted under (the locks table's `lhp_*` columns), so that a study can tell the
//! preemptions its policy causes (a directed yield's boost, a co-schedule) from the
//! ones time-sharing causes anyway (a slice that ends, a wake-up that preempts).
//!
//! The cause is that of the reschedule the pCPU acted on: the earliest pending request
//! (`World::request_resched`) carries its own, the slice timer and the scheduler tick
//! theirs; a vCPU that yields gives its pCPU up itself.

/// What made a pCPU take a runnable vCPU off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum PreemptCause {
    /// Its time was up: the scheduler tick (`check_preempt_tick`), the slice timer,
    /// credit's accounting, a cap's throttling.
    #[default]
    Slice,
    /// A woken vCPU preempted it (`check_preempt_wakeup`, credit's wake-up tickle),
    /// or the pCPU was told to pick again by a wake-up elsewhere.
    Wakeup,
    /// Another vCPU's directed yield (PLE's `kvm_vcpu_on_spin` → `yield_to`) made a
    /// vCPU queued on this pCPU the next pick and rescheduled it.
    DirectedYield,
    /// It gave the pCPU up itself: its own PLE exit's yield, a co-scheduling yield.
    /// A waiter that yielded while it spun and was then handed the lock (a ticket
    /// lock's FIFO hand-off) is a holder preempted for this cause.
    OwnYield,
    /// A coordination policy or the scheduler's own decision: DCS's urgent vCPUs,
    /// co-scheduling, gangs and relaxed co-stops, balancing's pushes.
    Coordination,
}

/// The number of causes.
pub const CAUSES: usize = 5;

/// A count per cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByCause(pub [u64; CAUSES]);

impl ByCause {
    pub fn add(&mut self, c: PreemptCause) {
        self.0[c as usize] += 1;
    }

    pub fn get(&self, c: PreemptCause) -> u64 {
        self.0[c as usize]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_cause() {
        let mut b = ByCause::default();
        b.add(PreemptCause::DirectedYield);
        b.add(PreemptCause::DirectedYield);
        b.add(PreemptCause::OwnYield);
        assert_eq!(b.get(PreemptCause::DirectedYield), 2);
        assert_eq!(b.get(PreemptCause::Slice), 0);
        assert_eq!(b.total(), 3);
    }
}
