//! The histogram as it was before its counts became a window over the buckets seen
//! and its record one cache line (a Vec from bucket 0, a u128 sum, carries inline): kept
//! for the tests only, which check that the current one reports exactly the same.
#![allow(dead_code)]

use super::HistSummary;

const SUB_BITS: u32 = 7;
const SUB: usize = 1 << SUB_BITS;
const NBUCKETS: usize = SUB * (64 - SUB_BITS as usize + 1);

#[derive(Clone, Debug)]
pub struct Hist {
    /// Counts of buckets 0..len modulo 2^32, grown on demand up to NBUCKETS.
    counts: Vec<u32>,
    /// (bucket, times its counter wrapped past u32::MAX): almost always empty.
    carries: Vec<(u32, u64)>,
    n: u64,
    sum: u128,
    max: u64,
    min: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            counts: Vec::new(),
            carries: Vec::new(),
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

impl Hist {
    #[inline]
    pub fn record(&mut self, x: u64) {
        let b = bucket(x);
        if b >= self.counts.len() {
            self.counts.resize((b + 1).min(NBUCKETS), 0);
        }
        let c = &mut self.counts[b];
        if *c == u32::MAX {
            *c = 0;
            self.carry(b, 1);
        } else {
            *c += 1;
        }
        self.n += 1;
        self.sum += x as u128;
        self.max = self.max.max(x);
        self.min = self.min.min(x);
    }

    #[cold]
    fn carry(&mut self, b: usize, wraps: u64) {
        match self.carries.iter_mut().find(|(i, _)| *i as usize == b) {
            Some((_, w)) => *w += wraps,
            None => self.carries.push((b as u32, wraps)),
        }
    }

    /// Samples in bucket `i`.
    #[inline]
    fn bucket_count(&self, i: usize) -> u64 {
        let low = self.counts[i] as u64;
        if self.carries.is_empty() {
            return low;
        }
        let wraps = self
            .carries
            .iter()
            .find(|(b, _)| *b as usize == i)
            .map_or(0, |(_, w)| *w);
        low + (wraps << 32)
    }

    /// Forgets every sample (the end of a warm-up).
    pub fn clear(&mut self) {
        self.counts.fill(0);
        self.carries.clear();
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
            self.sum as f64 / self.n as f64
        }
    }

    /// The q-quantile (rounded to a nanosecond), interpolated linearly inside its
    /// bucket by rank and clamped to [min, max]; 0 without samples.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let target = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        // The bucket holding the target-th sample, and the samples below it: scanned
        // from the nearer end (a high quantile from the top), with the same result.
        let found = if target > self.n / 2 {
            let mut above = 0;
            let mut hit = None;
            for i in (0..self.counts.len()).rev() {
                let c = self.bucket_count(i);
                above += c;
                let below = self.n - above;
                if c > 0 && below < target {
                    hit = Some((i, below));
                    break;
                }
            }
            hit
        } else {
            let mut acc = 0;
            let mut hit = None;
            for i in 0..self.counts.len() {
                let c = self.bucket_count(i);
                if acc + c >= target {
                    hit = Some((i, acc));
                    break;
                }
                acc += c;
            }
            hit
        };
        let Some((i, acc)) = found else {
            return self.max;
        };
        let c = self.bucket_count(i);
        let (lo, hi) = bounds(i);
        // The samples of a bucket are taken as spread evenly over it: the k-th of c sits
        // at lo + (k - 0.5) / c of the width.
        let k = (target - acc) as f64;
        let x = lo as f64 + (hi - lo) as f64 * (k - 0.5) / c as f64;
        (x.round() as u64).clamp(self.min, self.max)
    }

    pub fn merge(&mut self, o: &Hist) {
        if o.counts.len() > self.counts.len() {
            self.counts.resize(o.counts.len(), 0);
        }
        // Fast path (reports merge thousands of histograms): without carries on either
        // side and no counter passing u32::MAX, the merge is a plain element-wise sum
        // the compiler vectorizes. The check is a separate pass so both loops stay
        // branch-free.
        let dst = &mut self.counts[..o.counts.len()];
        if self.carries.is_empty()
            && o.carries.is_empty()
            && dst
                .iter()
                .zip(&o.counts)
                .all(|(&a, &b)| a.checked_add(b).is_some())
        {
            for (a, &b) in dst.iter_mut().zip(&o.counts) {
                *a += b;
            }
            self.n += o.n;
            self.sum += o.sum;
            self.max = self.max.max(o.max);
            self.min = self.min.min(o.min);
            return;
        }
        for i in 0..o.counts.len() {
            let total = self.bucket_count(i) + o.bucket_count(i);
            self.counts[i] = total as u32;
            let wraps = total >> 32;
            let known = self.bucket_count(i) >> 32;
            if wraps > known {
                self.carry(i, wraps - known);
            }
        }
        self.n += o.n;
        self.sum += o.sum;
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

    pub fn summary(&self) -> HistSummary {
        HistSummary {
            count: self.n,
            mean_ns: self.mean_or_nan(),
            min_ns: (self.n > 0).then_some(self.min),
            p50_ns: self.quantile_opt(0.5),
            p90_ns: self.quantile_opt(0.9),
            p99_ns: self.quantile_opt(0.99),
            max_ns: self.max_opt(),
            buckets: (0..self.counts.len())
                .map(|i| (i, self.bucket_count(i)))
                .filter(|(_, c)| *c > 0)
                .map(|(i, c)| {
                    let (lo, hi) = bounds(i);
                    [lo, hi, c]
                })
                .collect(),
        }
    }
}
