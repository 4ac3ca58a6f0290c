//! A log-linear histogram of nanosecond values (HdrHistogram's layout): 128
//! sub-buckets per power of two, so a bucket is at most 1/128 (0.78%) of its values
//! wide, and values below 128 ns are exact. Quantiles interpolate linearly inside
//! their bucket, so their relative error is below 0.8%.
//!
//! Own buckets rather than the `hdrhistogram` crate: the same layout in ~200 lines,
//! no allocation per sample, and counts kept only for the window of buckets between the
//! smallest and the largest value seen (a histogram of microsecond latencies holds a
//! few hundred counters, not 7,424: the ~400 buckets below its smallest value are not
//! stored either).
//!
//! Counters are 32-bit, with the rare bucket past 2^32 samples carried exactly in a
//! side list: a host of a thousand VMs keeps a dozen histograms per VM, and each
//! recorded sample touches its counter's cache line — half the bytes, fewer misses
//! (about 4% of the run time at 1,024 pCPUs). The histogram's own record (window,
//! count, sum, extremes) is one aligned cache line, the rare parts (carries, the sum
//! past 2^64) boxed apart, so a sample touches two lines in all.

use serde::Serialize;

const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;
const NBUCKETS: usize = SUB * (64 - SUB_BITS as usize + 1);

/// The rarely needed parts of a histogram, boxed so that the histogram's own record
/// stays one cache line.
#[derive(Clone, Debug, Default)]
struct Cold {
    /// (bucket, times its counter wrapped past u32::MAX).
    carries: Vec<(u32, u64)>,
    /// Times the sum wrapped past u64::MAX.
    sum_wraps: u64,
}

/// One cache line: recording a sample touches this line and its counter's, nothing else
/// (on a host of a thousand VMs each is usually a miss).
#[derive(Clone, Debug)]
#[repr(align(64))]
pub struct Hist {
    /// Counts (modulo 2^32) of buckets `lo .. lo + counts.len()`: the window grows to
    /// take in the buckets seen, downwards as well as upwards, so buckets below the
    /// smallest value seen (a latency histogram's first ~400) take no memory.
    counts: Box<[u32]>,
    lo: u32,
    /// Counter carries and the sum's high part: almost always None.
    cold: Option<Box<Cold>>,
    n: u64,
    /// The sum modulo 2^64 (its wraps are in `cold`).
    sum: u64,
    max: u64,
    min: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            counts: Box::default(),
            lo: 0,
            cold: None,
            n: 0,
            sum: 0,
            max: 0,
            min: u64::MAX,
        }
    }
}

#[inline]
fn bucket(x: u64) -> usize {
    if x < SUB as u64 {
        return x as usize;
    }
    let e = 63 - x.leading_zeros(); // >= SUB_BITS
    let sub = (x >> (e - SUB_BITS)) as usize & (SUB - 1);
    (e - SUB_BITS + 1) as usize * SUB + sub
}

/// [lo, hi) of bucket i.
fn bounds(i: usize) -> (u64, u64) {
    if i < SUB {
        return (i as u64, i as u64 + 1);
    }
    let e = (i / SUB) as u32 + SUB_BITS - 1;
    let sub = (i % SUB) as u64;
    let width = 1u64 << (e - SUB_BITS);
    let lo = (1u64 << e) + sub * width;
    (lo, lo.saturating_add(width))
}

#[derive(Clone, Debug, Serialize)]
pub struct HistSummary {
    pub count: u64,
    /// NaN (null in JSON and Arrow) without samples, like every statistic below.
    pub mean_ns: f64,
    pub min_ns: Option<u64>,
    pub p50_ns: Option<u64>,
    pub p90_ns: Option<u64>,
    pub p99_ns: Option<u64>,
    pub max_ns: Option<u64>,
    /// Non-empty buckets: [lo_ns, hi_ns, count].
    pub buckets: Vec<[u64; 3]>,
}

impl Hist {
    #[inline]
    pub fn record(&mut self, x: u64) {
        let b = bucket(x);
        match self.counts.get_mut(b.wrapping_sub(self.lo as usize)) {
            Some(c) if *c != u32::MAX => *c += 1,
            _ => self.record_slow(b),
        }
        self.n += 1;
        let (sum, wrapped) = self.sum.overflowing_add(x);
        self.sum = sum;
        if wrapped {
            self.cold_mut().sum_wraps += 1;
        }
        self.max = self.max.max(x);
        self.min = self.min.min(x);
    }

    /// Counts a sample of bucket `b` outside the window, or whose counter wraps.
    #[cold]
    fn record_slow(&mut self, b: usize) {
        if b.wrapping_sub(self.lo as usize) >= self.counts.len() {
            self.cover(b, b + 1);
        }
        let c = &mut self.counts[b - self.lo as usize];
        if *c == u32::MAX {
            *c = 0;
            self.carry(b, 1);
        } else {
            *c += 1;
        }
    }

    /// One past the last bucket of the window.
    #[inline]
    fn hi(&self) -> usize {
        self.lo as usize + self.counts.len()
    }

    /// Grows the window to take in buckets `from .. to`, with room to spare on the side
    /// it grows — a quarter of the window (at least 16 buckets), so that a histogram
    /// reallocates a few times only (the window grows geometrically) without holding
    /// twice the counters it needs, as doubling did: on a host of a thousand VMs, each
    /// with a dozen histograms, doubling cost 10% of the run's memory.
    #[cold]
    fn cover(&mut self, from: usize, to: usize) {
        let (lo, hi) = if self.counts.is_empty() {
            (from, to)
        } else {
            (from.min(self.lo as usize), to.max(self.hi()))
        };
        let spare = (self.counts.len() / 4).max(16);
        let (lo, hi) = if self.counts.is_empty() {
            (lo, hi)
        } else if lo < self.lo as usize {
            (lo.saturating_sub(spare), hi)
        } else {
            (lo, (hi + spare).min(NBUCKETS))
        };
        let mut counts = vec![0u32; hi - lo].into_boxed_slice();
        if !self.counts.is_empty() {
            let off = self.lo as usize - lo;
            counts[off..off + self.counts.len()].copy_from_slice(&self.counts);
        }
        self.counts = counts;
        // Bucket indices are below NBUCKETS (7,424): they fit 32 bits.
        self.lo = lo as u32;
    }

    fn cold_mut(&mut self) -> &mut Cold {
        self.cold.get_or_insert_with(Box::default)
    }

    #[cold]
    fn carry(&mut self, b: usize, wraps: u64) {
        let carries = &mut self.cold_mut().carries;
        match carries.iter_mut().find(|(i, _)| *i as usize == b) {
            Some((_, w)) => *w += wraps,
            None => carries.push((b as u32, wraps)),
        }
    }

    /// The counter of bucket `i` modulo 2^32 (0 outside the window).
    #[inline]
    fn low_count(&self, i: usize) -> u32 {
        self.counts
            .get(i.wrapping_sub(self.lo as usize))
            .copied()
            .unwrap_or(0)
    }

    /// Samples in bucket `i`.
    #[inline]
    fn bucket_count(&self, i: usize) -> u64 {
        let low = self.low_count(i) as u64;
        let Some(cold) = &self.cold else {
            return low;
        };
        let wraps = cold
            .carries
            .iter()
            .find(|(b, _)| *b as usize == i)
            .map_or(0, |(_, w)| *w);
        low + (wraps << 32)
    }

    /// The exact sum of the samples.
    fn sum(&self) -> u128 {
        let wraps = self.cold.as_ref().map_or(0, |c| c.sum_wraps);
        ((wraps as u128) << 64) | self.sum as u128
    }

    /// The buckets that can hold samples: those from the smallest sample's to the
    /// largest's (every other count is 0; the window may extend beyond them).
    fn range(&self) -> std::ops::Range<usize> {
        if self.n == 0 {
            return 0..0;
        }
        bucket(self.min).max(self.lo as usize)..(bucket(self.max) + 1).min(self.hi())
    }

    /// The non-empty buckets with their counts, in bucket order (reversible). Without
    /// carries a bucket's count is its 32-bit counter, read straight off the window; a
    /// report walks thousands of windows of hundreds of buckets.
    fn nonzero_buckets(&self) -> impl DoubleEndedIterator<Item = (usize, u64)> + '_ {
        let r = self.range();
        let lo = self.lo as usize;
        let window = if r.is_empty() {
            &self.counts[..0]
        } else {
            &self.counts[r.start - lo..r.end - lo]
        };
        let plain = self.cold.as_ref().is_none_or(|c| c.carries.is_empty());
        window
            .iter()
            .enumerate()
            .map(move |(j, &c)| {
                let i = r.start + j;
                (
                    i,
                    if plain {
                        u64::from(c)
                    } else {
                        self.bucket_count(i)
                    },
                )
            })
            .filter(|&(_, c)| c > 0)
    }

    /// Forgets every sample (the end of a warm-up).
    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.cold = None;
        self.n = 0;
        self.sum = 0;
        self.min = u64::MAX;
        self.max = 0;
    }

    pub fn count(&self) -> u64 {
        self.n
    }

    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum() as f64 / self.n as f64
        }
    }

    /// The q-quantile (rounded to a nanosecond), interpolated linearly inside its
    /// bucket by rank and clamped to [min, max]; 0 without samples.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let target = self.rank(q);
        // The bucket holding the target-th sample, its count and the samples below it:
        // scanned from the nearer end (a high quantile from the top), with the same
        // result (the first bucket whose running count reaches the rank is non-empty).
        let found = if target > self.n / 2 {
            let mut above = 0;
            let mut hit = None;
            for (i, c) in self.nonzero_buckets().rev() {
                above += c;
                let below = self.n - above;
                if below < target {
                    hit = Some((i, c, below));
                    break;
                }
            }
            hit
        } else {
            let mut acc = 0;
            let mut hit = None;
            for (i, c) in self.nonzero_buckets() {
                if acc + c >= target {
                    hit = Some((i, c, acc));
                    break;
                }
                acc += c;
            }
            hit
        };
        let Some((i, c, acc)) = found else {
            return self.max;
        };
        self.interpolate(i, c, acc, target)
    }

    /// The rank of the q-quantile's sample (1-based), as `quantile` takes it.
    fn rank(&self, q: f64) -> u64 {
        ((q * self.n as f64).ceil() as u64).clamp(1, self.n)
    }

    /// The value of the `target`-th sample, which lies in bucket `i` (holding `c`
    /// samples, `acc` samples below it). The samples of a bucket are taken as spread
    /// evenly over it: the k-th of c sits at lo + (k - 0.5) / c of the width.
    fn interpolate(&self, i: usize, c: u64, acc: u64, target: u64) -> u64 {
        let (lo, hi) = bounds(i);
        let k = (target - acc) as f64;
        let x = lo as f64 + (hi - lo) as f64 * (k - 0.5) / c as f64;
        (x.round() as u64).clamp(self.min, self.max)
    }

    pub fn merge(&mut self, o: &Hist) {
        if !o.counts.is_empty() && (o.lo < self.lo || o.hi() > self.hi() || self.counts.is_empty())
        {
            self.cover(o.lo as usize, o.hi());
        }
        // Fast path (reports merge thousands of histograms): without carries on either
        // side and no counter passing u32::MAX, the merge is a plain element-wise sum
        // the compiler vectorizes. The check is a separate pass so both loops stay
        // branch-free.
        let off = (o.lo as usize).wrapping_sub(self.lo as usize);
        let dst: &mut [u32] = if o.counts.is_empty() {
            &mut []
        } else {
            &mut self.counts[off..off + o.counts.len()]
        };
        if self.cold.as_ref().is_none_or(|c| c.carries.is_empty())
            && o.cold.as_ref().is_none_or(|c| c.carries.is_empty())
            && dst
                .iter()
                .zip(o.counts.iter())
                .all(|(&a, &b)| a.checked_add(b).is_some())
        {
            for (a, &b) in dst.iter_mut().zip(o.counts.iter()) {
                *a += b;
            }
        } else {
            for i in o.range() {
                let total = self.bucket_count(i) + o.bucket_count(i);
                let known = self.bucket_count(i) >> 32;
                self.counts[i - self.lo as usize] = total as u32;
                let wraps = total >> 32;
                if wraps > known {
                    self.carry(i, wraps - known);
                }
            }
        }
        self.n += o.n;
        let total = self.sum() + o.sum();
        self.sum = total as u64;
        let wraps = (total >> 64) as u64;
        if wraps > 0 {
            self.cold_mut().sum_wraps = wraps;
        }
        self.max = self.max.max(o.max);
        self.min = self.min.min(o.min);
    }

    /// The mean for a report: NaN (written as null) without samples, since a mean over
    /// nothing is undefined, not zero.
    pub fn mean_or_nan(&self) -> f64 {
        if self.n == 0 {
            f64::NAN
        } else {
            self.mean()
        }
    }

    /// The q-quantile for a report: None (null) without samples.
    pub fn quantile_opt(&self, q: f64) -> Option<u64> {
        (self.n > 0).then(|| self.quantile(q))
    }

    /// The largest sample: None (null) without samples.
    pub fn max_opt(&self) -> Option<u64> {
        (self.n > 0).then_some(self.max)
    }

    /// Count, mean, extremes, the three reported quantiles and the non-empty buckets, in
    /// one walk of the window (a report summarizes thousands of histograms; three
    /// quantile scans each were half of building a 1,024-pCPU host's report). The
    /// quantiles are `quantile`'s: the first bucket whose running count reaches the rank
    /// is a non-empty one, so walking the non-empty buckets finds the same bucket.
    pub fn summary(&self) -> HistSummary {
        let mut buckets: Vec<[u64; 3]> = Vec::new();
        let mut quantiles = [None; 3];
        if self.n > 0 {
            let targets = [self.rank(0.5), self.rank(0.9), self.rank(0.99)];
            let mut next = 0;
            let mut acc = 0;
            buckets.reserve_exact(self.nonzero_buckets().count());
            for (i, c) in self.nonzero_buckets() {
                while next < targets.len() && acc + c >= targets[next] {
                    quantiles[next] = Some(self.interpolate(i, c, acc, targets[next]));
                    next += 1;
                }
                acc += c;
                let (lo, hi) = bounds(i);
                buckets.push([lo, hi, c]);
            }
            // Unreachable while the counts add up to n; `quantile` answers max then too.
            for q in quantiles.iter_mut().skip(next) {
                *q = Some(self.max);
            }
        }
        HistSummary {
            count: self.n,
            mean_ns: self.mean_or_nan(),
            min_ns: (self.n > 0).then_some(self.min),
            p50_ns: quantiles[0],
            p90_ns: quantiles[1],
            p99_ns: quantiles[2],
            max_ns: self.max_opt(),
            buckets,
        }
    }
}

#[cfg(test)]
#[path = "hist_reference.rs"]
mod reference;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    impl Hist {
        /// Sets bucket `b`'s counter (modulo 2^32) and the sample count, as if that many
        /// samples had been recorded (for the carry tests).
        fn force_count(&mut self, b: usize, c: u32, n: u64) {
            if b < self.lo as usize || b >= self.hi() {
                self.cover(b, b + 1);
            }
            let lo = self.lo as usize;
            self.counts[b - lo] = c;
            self.n = n;
        }
    }

    /// Everything a report reads of a histogram, the mean's bits included.
    fn reported(s: &HistSummary, q: [u64; 4], count: u64, mean: f64) -> String {
        format!(
            "{} {:x} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {} {:x}",
            s.count,
            s.mean_ns.to_bits(),
            s.min_ns,
            s.p50_ns,
            s.p90_ns,
            s.p99_ns,
            s.max_ns,
            s.buckets,
            q,
            count,
            mean.to_bits()
        )
    }

    fn reported_new(h: &Hist) -> String {
        let q = [0.0, 0.37, 0.999, 1.0].map(|q| h.quantile(q));
        reported(&h.summary(), q, h.count(), h.mean())
    }

    fn reported_old(h: &reference::Hist) -> String {
        let q = [0.0, 0.37, 0.999, 1.0].map(|q| h.quantile(q));
        reported(&h.summary(), q, h.count(), h.mean())
    }

    /// Samples spread over many octaves (so windows grow both ways) and a few repeats.
    fn samples() -> impl Strategy<Value = Vec<u64>> {
        proptest::collection::vec(
            prop_oneof![
                0u64..200,
                100u64..100_000,
                (0u32..64).prop_map(|e| 1u64 << e),
                any::<u64>(),
                1_000u64..20_000_000,
            ],
            0..300,
        )
    }

    proptest! {
        /// The windowed histogram reports exactly what the histogram from bucket 0 did,
        /// alone, merged (either way round, into empty ones too) and after a clear.
        #[test]
        fn same_reports_as_the_histogram_from_bucket_zero(
            xs in samples(), ys in samples(), zs in samples(), clear_at in 0usize..400,
        ) {
            let (mut a, mut b, mut c) = (Hist::default(), Hist::default(), Hist::default());
            let (mut ra, mut rb, mut rc) = (
                reference::Hist::default(),
                reference::Hist::default(),
                reference::Hist::default(),
            );
            for (i, &x) in xs.iter().enumerate() {
                if i == clear_at {
                    a.clear();
                    ra.clear();
                }
                a.record(x);
                ra.record(x);
            }
            for &y in &ys {
                b.record(y);
                rb.record(y);
            }
            for &z in &zs {
                c.record(z);
                rc.record(z);
            }
            prop_assert_eq!(reported_new(&a), reported_old(&ra));
            prop_assert_eq!(reported_new(&b), reported_old(&rb));
            let mut m = Hist::default();
            let mut rm = reference::Hist::default();
            for (h, r) in [(&c, &rc), (&a, &ra), (&b, &rb)] {
                m.merge(h);
                rm.merge(r);
                prop_assert_eq!(reported_new(&m), reported_old(&rm));
            }
            b.merge(&a);
            rb.merge(&ra);
            prop_assert_eq!(reported_new(&b), reported_old(&rb));
            m.clear();
            rm.clear();
            prop_assert_eq!(reported_new(&m), reported_old(&rm));
            m.merge(&c);
            rm.merge(&rc);
            prop_assert_eq!(reported_new(&m), reported_old(&rm));
        }
    }

    /// A histogram's own record is one cache line.
    #[test]
    fn record_is_one_cache_line() {
        assert_eq!(std::mem::size_of::<Hist>(), 64);
        assert_eq!(std::mem::align_of::<Hist>(), 64);
    }

    /// A sum past 2^64 stays exact (the mean of two samples near u64::MAX).
    #[test]
    fn sum_carries_past_u64() {
        let mut h = Hist::default();
        let mut r = reference::Hist::default();
        for x in [u64::MAX, u64::MAX - 7, 5] {
            h.record(x);
            r.record(x);
        }
        assert_eq!(h.sum(), u64::MAX as u128 * 2 - 2);
        let mut m = h.clone();
        m.merge(&h);
        let mut rm = r.clone();
        rm.merge(&r);
        assert_eq!(reported_new(&m), reported_old(&rm));
        assert_eq!(m.sum(), 2 * h.sum());
    }

    #[test]
    fn bucket_bounds_contain_values() {
        for x in [0u64, 1, 7, 8, 9, 15, 16, 100, 1_000_000, u64::MAX / 3] {
            let (lo, hi) = bounds(bucket(x));
            assert!(lo <= x && (x < hi || hi == u64::MAX), "{x}: [{lo},{hi})");
        }
    }

    /// The quantile by a scan from the first bucket only (the definition).
    fn quantile_forward(h: &Hist, q: f64) -> u64 {
        if h.n == 0 {
            return 0;
        }
        let target = ((q * h.n as f64).ceil() as u64).clamp(1, h.n);
        let mut acc = 0;
        for i in 0..NBUCKETS {
            let c = h.bucket_count(i);
            if acc + c >= target {
                let (lo, hi) = bounds(i);
                let x = lo as f64 + (hi - lo) as f64 * ((target - acc) as f64 - 0.5) / c as f64;
                return (x.round() as u64).clamp(h.min, h.max);
            }
            acc += c;
        }
        h.max
    }

    proptest! {
        /// The one-walk summary reports what `quantile` and the bucket counts say.
        #[test]
        fn summary_agrees_with_quantile(xs in proptest::collection::vec(0u64..2_000_000_000, 0..400)) {
            let mut h = Hist::default();
            for x in &xs { h.record(*x); }
            let s = h.summary();
            prop_assert_eq!(s.p50_ns, h.quantile_opt(0.5));
            prop_assert_eq!(s.p90_ns, h.quantile_opt(0.9));
            prop_assert_eq!(s.p99_ns, h.quantile_opt(0.99));
            let buckets: Vec<[u64; 3]> = (0..NBUCKETS)
                .filter(|&i| h.bucket_count(i) > 0)
                .map(|i| { let (lo, hi) = bounds(i); [lo, hi, h.bucket_count(i)] })
                .collect();
            prop_assert_eq!(s.buckets, buckets);
        }

        /// Scanning a high quantile from the top finds what the forward scan finds.
        #[test]
        fn quantile_from_either_end_agrees(xs in proptest::collection::vec(0u64..1_000_000_000, 1..400)) {
            let mut h = Hist::default();
            for x in &xs { h.record(*x); }
            for q in [0.0, 0.1, 0.5, 0.51, 0.9, 0.99, 0.999, 1.0] {
                prop_assert_eq!(h.quantile(q), quantile_forward(&h, q), "q {}", q);
            }
        }

        #[test]
        fn quantiles_within_relative_error(xs in proptest::collection::vec(1u64..10_000_000, 1..500)) {
            let mut h = Hist::default();
            for x in &xs { h.record(*x); }
            let mut s = xs.clone();
            s.sort();
            let exact = s[((0.5 * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
            let got = h.quantile(0.5);
            prop_assert!((got as f64 - exact as f64).abs() <= exact as f64 * 0.01 + 1.0);
            prop_assert_eq!(h.count(), xs.len() as u64);
        }
    }

    /// Percentiles of a known distribution (exponential, mean 100 us) are within 1% of
    /// the exact quantiles -ln(1 - q) * mean.
    #[test]
    fn percentiles_of_an_exponential_within_one_percent() {
        let n = 200_000u64;
        let mean = 100_000.0;
        let mut h = Hist::default();
        for i in 0..n {
            // Stratified inverse-CDF samples: the empirical quantiles are the exact ones.
            let u = (i as f64 + 0.5) / n as f64;
            h.record((-(1.0 - u).ln() * mean).round() as u64);
        }
        for q in [0.5, 0.9, 0.99, 0.999] {
            let exact = -(1.0f64 - q).ln() * mean;
            let got = h.quantile(q) as f64;
            assert!((got / exact - 1.0).abs() < 0.01, "q{q}: {got} vs {exact}");
        }
    }

    /// A bucket past 2^32 samples keeps its exact count, alone and merged.
    #[test]
    fn counters_carry_past_u32() {
        let mut h = Hist::default();
        h.record(5);
        h.force_count(5, u32::MAX - 1, u32::MAX as u64 - 1);
        for _ in 0..3 {
            h.record(5);
        }
        assert_eq!(h.bucket_count(5), u32::MAX as u64 + 2);
        let mut m = h.clone();
        m.merge(&h);
        assert_eq!(m.bucket_count(5), 2 * (u32::MAX as u64 + 2));
        assert_eq!(m.summary().buckets, vec![[5, 6, 2 * (u32::MAX as u64 + 2)]]);
        assert_eq!(m.quantile(1.0), 5);
        m.clear();
        assert_eq!(m.bucket_count(5), 0);
    }

    /// Two counters that each fit in 32 bits but whose sum does not: the merge leaves
    /// the fast path and carries.
    #[test]
    fn merge_carries_a_sum_past_u32() {
        let mut a = Hist::default();
        a.record(7);
        a.force_count(7, u32::MAX - 5, u32::MAX as u64 - 5);
        let mut b = Hist::default();
        b.record(7);
        b.force_count(7, 10, 10);
        a.merge(&b);
        assert_eq!(a.bucket_count(7), u32::MAX as u64 + 5);
    }

    proptest! {
        /// Merging histograms is recording all their samples into one.
        #[test]
        fn merge_is_recording_everything(
            xs in proptest::collection::vec(0u64..10_000_000, 0..300),
            ys in proptest::collection::vec(0u64..100_000_000_000, 0..300),
        ) {
            let (mut a, mut b, mut all) = (Hist::default(), Hist::default(), Hist::default());
            for &x in &xs {
                a.record(x);
                all.record(x);
            }
            for &y in &ys {
                b.record(y);
                all.record(y);
            }
            a.merge(&b);
            prop_assert_eq!(a.count(), all.count());
            prop_assert_eq!(a.summary().buckets, all.summary().buckets);
            prop_assert_eq!(a.quantile(0.5), all.quantile(0.5));
        }
    }

    /// Five values inside one old 12.5%-wide bucket are told apart.
    #[test]
    fn close_values_have_distinct_p99() {
        let ps: Vec<u64> = [500_000u64, 505_000, 510_000, 515_000, 520_000]
            .iter()
            .map(|&v| {
                let mut h = Hist::default();
                for _ in 0..980 {
                    h.record(1_000);
                }
                for _ in 0..20 {
                    h.record(v);
                }
                h.quantile(0.99)
            })
            .collect();
        for w in ps.windows(2) {
            assert!(w[0] < w[1], "{ps:?}");
        }
    }
}
