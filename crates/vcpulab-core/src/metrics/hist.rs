//! A log-linear histogram of nanosecond values with fixed memory: 8 sub-buckets per
//! power of two (relative error under 12.5%), exact below 8 ns.

use serde::Serialize;

const SUB_BITS: u32 = 3;
const SUB: usize = 1 << SUB_BITS;
const NBUCKETS: usize = SUB * (64 - SUB_BITS as usize + 1);

#[derive(Clone, Debug)]
pub struct Hist {
    counts: Box<[u64; NBUCKETS]>,
    n: u64,
    sum: u128,
    max: u64,
    min: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            counts: Box::new([0; NBUCKETS]),
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
    pub mean_ns: f64,
    pub min_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
    /// Non-empty buckets: [lo_ns, hi_ns, count].
    pub buckets: Vec<[u64; 3]>,
}

impl Hist {
    #[inline]
    pub fn record(&mut self, x: u64) {
        self.counts[bucket(x)] += 1;
        self.n += 1;
        self.sum += x as u128;
        self.max = self.max.max(x);
        self.min = self.min.min(x);
    }

    /// Forgets every sample (the end of a warm-up).
    pub fn clear(&mut self) {
        self.counts.fill(0);
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

    /// The q-quantile, reported as the midpoint of its bucket (clamped to [min, max]).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let target = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= target {
                let (lo, hi) = bounds(i);
                return (lo + (hi - lo - 1) / 2).clamp(self.min, self.max);
            }
        }
        self.max
    }

    pub fn merge(&mut self, o: &Hist) {
        for (a, b) in self.counts.iter_mut().zip(o.counts.iter()) {
            *a += b;
        }
        self.n += o.n;
        self.sum += o.sum;
        self.max = self.max.max(o.max);
        self.min = self.min.min(o.min);
    }

    pub fn summary(&self) -> HistSummary {
        HistSummary {
            count: self.n,
            mean_ns: self.mean(),
            min_ns: if self.n == 0 { 0 } else { self.min },
            p50_ns: self.quantile(0.5),
            p90_ns: self.quantile(0.9),
            p99_ns: self.quantile(0.99),
            max_ns: self.max,
            buckets: self
                .counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, c)| {
                    let (lo, hi) = bounds(i);
                    [lo, hi, *c]
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bucket_bounds_contain_values() {
        for x in [0u64, 1, 7, 8, 9, 15, 16, 100, 1_000_000, u64::MAX / 3] {
            let (lo, hi) = bounds(bucket(x));
            assert!(lo <= x && (x < hi || hi == u64::MAX), "{x}: [{lo},{hi})");
        }
    }

    proptest! {
        #[test]
        fn quantiles_within_relative_error(xs in proptest::collection::vec(1u64..10_000_000, 1..500)) {
            let mut h = Hist::default();
            for x in &xs { h.record(*x); }
            let mut s = xs.clone();
            s.sort();
            let exact = s[((0.5 * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
            let got = h.quantile(0.5);
            prop_assert!((got as f64 - exact as f64).abs() <= exact as f64 * 0.125 + 1.0);
            prop_assert_eq!(h.count(), xs.len() as u64);
        }
    }
}
