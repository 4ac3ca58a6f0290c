//! Per-entity load tracking (PELT, kernel/sched/pelt.c) as the host schedulers' task-group
//! shares use it: a load average that follows an entity's runnable weight with a
//! half-life of 32 periods of 1,024 × 1,024 ns (y^32 = 1/2), so that a VM whose vCPUs
//! halt between short bursts keeps most of its load on the pCPUs it ran on.
//!
//! The kernel accumulates in whole 1,024 ns steps and decays at period boundaries; here an
//! average is brought up to date lazily, when it is read or its input changes, by the
//! exact step response of the same geometric decay: after `n` steps at a constant input
//! `w` the average is `w + (avg − w)·y^(n/32)`. The decay is applied in steps of 1/32 of a
//! period (32,768 ns) on one grid of simulated time shared by every average, with the
//! kernel's own table of y^k in 32-bit fixed point (`runnable_avg_yN_inv`,
//! kernel/sched/sched-pelt.h) and a second table for the steps within a period, so it is
//! integer arithmetic, deterministic, and averages with equal inputs stay equal.

/// log2 of the decay step in ns: 1/32 of a PELT period (1,024 × 1,024 ns).
const STEP_SHIFT: u32 = 15;
/// y^k for k in 0..32, y^32 = 1/2, as (2^32 − 1)·y^k (kernel/sched/sched-pelt.h).
const Y_INV: [u64; 32] = [
    0xffffffff, 0xfa83b2da, 0xf5257d14, 0xefe4b99a, 0xeac0c6e6, 0xe5b906e6, 0xe0ccdeeb, 0xdbfbb796,
    0xd744fcc9, 0xd2a81d91, 0xce248c14, 0xc9b9bd85, 0xc5672a10, 0xc12c4cc9, 0xbd08a39e, 0xb8fbaf46,
    0xb504f333, 0xb123f581, 0xad583ee9, 0xa9a15ab4, 0xa5fed6a9, 0xa2704302, 0x9ef5325f, 0x9b8d39b9,
    0x9837f050, 0x94f4efa8, 0x91c3d373, 0x8ea4398a, 0x8b95c1e3, 0x88980e80, 0x85aac367, 0x82cd8698,
];
/// y^(k/32) for k in 0..32 (the steps within a period), as (2^32 − 1)·2^(−k/1024).
const Y_STEP: [u64; 32] = [
    0xffffffff, 0xffd3a750, 0xffa75651, 0xff7b0cfe, 0xff4ecb58, 0xff22915c, 0xfef65f09, 0xfeca345f,
    0xfe9e115b, 0xfe71f5fc, 0xfe45e242, 0xfe19d62a, 0xfdedd1b3, 0xfdc1d4dc, 0xfd95dfa5, 0xfd69f20a,
    0xfd3e0c0b, 0xfd122da8, 0xfce656dd, 0xfcba87ab, 0xfc8ec010, 0xfc63000a, 0xfc374798, 0xfc0b96b9,
    0xfbdfed6b, 0xfbb44bae, 0xfb88b180, 0xfb5d1edf, 0xfb3193cb, 0xfb061041, 0xfada9442, 0xfaaf1fca,
];
/// Beyond this many periods everything has decayed to zero (decay_load: 63 half-lives).
const DECAYED_PERIODS: u64 = 32 * 63;

/// `val`·y^(steps/32), rounded down (decay_load, with the sub-period steps).
fn decay(val: u64, steps: u64) -> u64 {
    let periods = steps >> 5;
    if periods > DECAYED_PERIODS {
        return 0;
    }
    let mut v = val >> (periods / 32);
    // Index 0 is y^0 = 1, stored as 2^32 − 1: skipping it keeps whole half-lives exact.
    let (k, j) = ((periods % 32) as usize, (steps & 31) as usize);
    if k > 0 {
        v = (v * Y_INV[k]) >> 32;
    }
    if j > 0 {
        v = (v * Y_STEP[j]) >> 32;
    }
    v
}

/// One load average: its value, the weight it follows, and the step it was last brought
/// up to. Values stay far below 2^32 (a VM of 288 runnable vCPUs is 294,912), so the
/// fixed-point products fit in 64 bits.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LoadAvg {
    avg: u64,
    input: u64,
    step: u64,
}

impl LoadAvg {
    /// Brought up to `now_ns` under its current input.
    #[inline]
    pub(crate) fn update(&mut self, now_ns: u64) {
        let step = now_ns >> STEP_SHIFT;
        let n = step.saturating_sub(self.step);
        if n == 0 {
            return;
        }
        self.step = step;
        self.avg = if self.avg >= self.input {
            self.input + decay(self.avg - self.input, n)
        } else {
            self.input - decay(self.input - self.avg, n)
        };
    }

    /// The average (as of its last update).
    #[inline]
    pub(crate) fn avg(&self) -> u64 {
        self.avg
    }

    /// The weight it follows (the runnable load now).
    #[inline]
    pub(crate) fn input(&self) -> u64 {
        self.input
    }

    /// Brought up to `now_ns`, then following `input` from there.
    #[inline]
    pub(crate) fn set_input(&mut self, now_ns: u64, input: u64) {
        self.update(now_ns);
        self.input = input;
    }

    /// Load attached (a task arriving with its average, attach_entity_load_avg).
    pub(crate) fn attach(&mut self, load: u64) {
        self.avg += load;
    }

    /// Load detached (a task leaving with its average, detach / remove_entity_load_avg);
    /// rounding can leave the sum a little below its parts, so it stops at zero.
    pub(crate) fn detach(&mut self, load: u64) {
        self.avg = self.avg.saturating_sub(load);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PERIOD_NS: u64 = 1024 * 1024;

    #[test]
    fn half_life_is_32_periods() {
        let mut a = LoadAvg::default();
        a.set_input(0, 1024);
        a.update(32 * PERIOD_NS);
        // 1024·(1 − 1/2): a whole half-life is exact.
        assert_eq!(a.avg(), 512);
        a.update(1_000 * PERIOD_NS);
        assert!(a.avg() >= 1023, "converges to its input: {}", a.avg());
        a.set_input(1_000 * PERIOD_NS, 0);
        a.update(1_032 * PERIOD_NS);
        assert!((511..=512).contains(&a.avg()), "{}", a.avg());
        a.update(10_000 * PERIOD_NS);
        assert_eq!(a.avg(), 0, "fully decayed");
    }

    #[test]
    fn a_step_within_a_period_decays_a_little() {
        let mut a = LoadAvg::default();
        a.attach(1 << 20);
        a.update(1 << STEP_SHIFT);
        // y^(1/32) = 2^(−1/1024) ≈ 0.999323
        assert_eq!(a.avg(), ((1u64 << 20) * Y_STEP[1]) >> 32);
        a.update((1 << STEP_SHIFT) + 100);
        assert_eq!(
            a.avg(),
            ((1u64 << 20) * Y_STEP[1]) >> 32,
            "no decay inside a step"
        );
    }

    #[test]
    fn decay_tables_are_monotone() {
        for k in 1..32 {
            assert!(Y_INV[k] < Y_INV[k - 1] && Y_STEP[k] < Y_STEP[k - 1]);
        }
        // The last sub-period step lies above the next period's first one.
        assert!(Y_STEP[31] > Y_INV[1]);
    }

    proptest! {
        /// Updating in pieces equals one update over the whole span, to within a unit per
        /// piece (the truncation), and the average stays between its start and its input.
        #[test]
        fn lazy_updates_compose(
            start in 0u64..300_000,
            input in 0u64..300_000,
            cuts in prop::collection::vec(1u64..50_000_000, 1..20),
        ) {
            let mut whole = LoadAvg::default();
            whole.attach(start);
            whole.set_input(0, input);
            let mut parts = whole;
            let mut t = 0;
            for c in &cuts {
                t += c;
                parts.update(t);
            }
            whole.update(t);
            let (lo, hi) = (start.min(input), start.max(input));
            prop_assert!((lo..=hi).contains(&whole.avg()));
            prop_assert!((lo..=hi).contains(&parts.avg()));
            let slack = cuts.len() as u64 + 2;
            prop_assert!(whole.avg().abs_diff(parts.avg()) <= slack,
                "{} vs {}", whole.avg(), parts.avg());
        }
    }
}
