//! A set of CPUs (up to `MAX_PCPUS`), parsed from Linux-style CPU lists ("0-3,6"): a
//! host's pCPUs, or a VM's vCPUs (a guest cpuset; VMs have up to as many vCPUs as hosts
//! have pCPUs). A fixed array of words: `Copy`, no allocation, `contains` in O(1).
//!
//! Beside the words, a bitmap of the words that are not zero (`used`): the set
//! operations visit those words only, so a mask of a 16-pCPU host costs one word's work
//! however wide the type is (a build whose masks had one word ran 3.3% fewer
//! instructions on a 16-pCPU host than with 16 words; docs/performance.md).

const WORDS: usize = 16;
// `used` has a bit per word.
const _: () = assert!(WORDS <= 16);

/// Invariant: bit i of `used` is set exactly when word i is not zero (so the derived
/// equality and hash compare sets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct CpuMask {
    words: [u64; WORDS],
    used: u16,
}

/// The largest host (and the largest mask) the simulator handles.
pub const MAX_PCPUS: u32 = (WORDS * 64) as u32;

/// The indices of the set bits of `bits`, lowest first.
#[inline]
fn bit_indices(mut bits: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        if bits == 0 {
            return None;
        }
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        Some(i)
    })
}

impl CpuMask {
    pub fn all(n: u32) -> CpuMask {
        let n = n.min(MAX_PCPUS) as usize;
        let mut m = CpuMask::default();
        for (i, word) in m.words.iter_mut().enumerate() {
            let lo = i * 64;
            if n >= lo + 64 {
                *word = u64::MAX;
            } else if n > lo {
                *word = (1u64 << (n - lo)) - 1;
            }
            if *word != 0 {
                m.used |= 1 << i;
            }
        }
        m
    }
    pub fn single(p: u32) -> CpuMask {
        let mut m = CpuMask::default();
        m.insert(p);
        m
    }
    #[inline]
    pub fn insert(&mut self, p: u32) {
        if p < MAX_PCPUS {
            let i = (p / 64) as usize;
            self.words[i] |= 1u64 << (p % 64);
            self.used |= 1 << i;
        }
    }
    #[inline]
    pub fn contains(self, p: u32) -> bool {
        p < MAX_PCPUS && self.words[(p / 64) as usize] >> (p % 64) & 1 == 1
    }
    pub fn count(self) -> u32 {
        bit_indices(u32::from(self.used))
            .map(|i| self.words[i].count_ones())
            .sum()
    }
    pub fn is_empty(self) -> bool {
        self.used == 0
    }
    pub fn iter(self) -> impl Iterator<Item = u32> {
        let words = self.words;
        let mut rest = u32::from(self.used);
        let mut i = 0usize;
        let mut m = 0u64;
        std::iter::from_fn(move || loop {
            if m != 0 {
                let b = m.trailing_zeros();
                m &= m - 1;
                return Some(i as u32 * 64 + b);
            }
            if rest == 0 {
                return None;
            }
            i = rest.trailing_zeros() as usize;
            rest &= rest - 1;
            m = words[i];
        })
    }
    #[inline]
    pub fn remove(&mut self, p: u32) {
        if p < MAX_PCPUS {
            let i = (p / 64) as usize;
            self.words[i] &= !(1u64 << (p % 64));
            if self.words[i] == 0 {
                self.used &= !(1 << i);
            }
        }
    }
    /// The CPUs in both masks.
    #[inline]
    pub fn and(self, o: CpuMask) -> CpuMask {
        let mut m = CpuMask::default();
        for i in bit_indices(u32::from(self.used & o.used)) {
            let w = self.words[i] & o.words[i];
            if w != 0 {
                m.words[i] = w;
                m.used |= 1 << i;
            }
        }
        m
    }
    /// The first CPU of the mask at or after `start`, wrapping around (None: empty).
    pub fn first_from(self, start: u32) -> Option<u32> {
        let start = start % MAX_PCPUS;
        let (sw, sb) = ((start / 64) as usize, start % 64);
        let first_in = |i: usize, w: u64| Some(i as u32 * 64 + w.trailing_zeros());
        let head = self.words[sw] & (u64::MAX << sb);
        if head != 0 {
            return first_in(sw, head);
        }
        let used = u32::from(self.used);
        // The words after `sw`, then (wrapping) those before it, then `sw`'s low bits.
        let after = used & !((2u32 << sw) - 1);
        if let Some(i) = bit_indices(after).next() {
            return first_in(i, self.words[i]);
        }
        let before = used & ((1u32 << sw) - 1);
        if let Some(i) = bit_indices(before).next() {
            return first_in(i, self.words[i]);
        }
        let tail = self.words[sw] & !(u64::MAX << sb);
        if tail != 0 {
            return first_in(sw, tail);
        }
        None
    }

    /// The highest CPU of the mask (None: empty).
    pub fn last(self) -> Option<u32> {
        if self.used == 0 {
            return None;
        }
        let i = 15 - self.used.leading_zeros() as usize;
        Some(i as u32 * 64 + 63 - self.words[i].leading_zeros())
    }

    /// Parses "0-3,6" for a host of `n` pCPUs.
    pub fn parse(s: &str, n: u32) -> Result<CpuMask, String> {
        Self::parse_of(s, n, "pCPU", "the host has pCPUs")
    }

    /// Parses "0-3,6" as a set of a VM's `n` vCPUs (a guest cpuset).
    pub fn parse_vcpus(s: &str, n: u32) -> Result<CpuMask, String> {
        Self::parse_of(s, n, "vCPU", "the VM has vCPUs")
    }

    fn parse_of(s: &str, n: u32, cpu: &str, has: &str) -> Result<CpuMask, String> {
        let mut m = CpuMask::default();
        for part in s.split(',').map(str::trim) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let (a, b): (u32, u32) = match (a.parse(), b.parse()) {
                (Ok(a), Ok(b)) if a <= b => (a, b),
                _ => return Err(format!("{s:?} is not a CPU list like \"0-3,6\"")),
            };
            if b >= n || b >= MAX_PCPUS {
                return Err(format!(
                    "{s:?} names {cpu} {b}, but {has} 0-{}",
                    n.min(MAX_PCPUS) - 1
                ));
            }
            for p in a..=b {
                m.insert(p);
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// A mask and the set it should hold, built by inserts and removes (CPUs drawn
    /// from a few words, so that words empty out and fill again).
    fn built(ops: &[(bool, u32)]) -> (CpuMask, BTreeSet<u32>) {
        let (mut m, mut r) = (CpuMask::default(), BTreeSet::new());
        for &(add, p) in ops {
            if add {
                m.insert(p);
                r.insert(p);
            } else {
                m.remove(p);
                r.remove(&p);
            }
        }
        (m, r)
    }

    fn cpu() -> impl Strategy<Value = u32> {
        prop_oneof![
            0u32..70,
            0u32..MAX_PCPUS,
            (0u32..16).prop_map(|w| w * 64 + 63)
        ]
    }

    proptest! {
        #[test]
        fn operations_match_a_set(
            a in proptest::collection::vec((any::<bool>(), cpu()), 0..40),
            b in proptest::collection::vec((any::<bool>(), cpu()), 0..40),
            start in 0u32..MAX_PCPUS,
            n in 0u32..=MAX_PCPUS,
        ) {
            let (ma, ra) = built(&a);
            let (mb, rb) = built(&b);
            prop_assert_eq!(ma.iter().collect::<Vec<_>>(), ra.iter().copied().collect::<Vec<_>>());
            prop_assert_eq!(ma.count() as usize, ra.len());
            prop_assert_eq!(ma.is_empty(), ra.is_empty());
            prop_assert_eq!(ma.last(), ra.iter().next_back().copied());
            let inter: BTreeSet<u32> = ra.intersection(&rb).copied().collect();
            let mi = ma.and(mb);
            prop_assert_eq!(mi.iter().collect::<Vec<_>>(), inter.iter().copied().collect::<Vec<_>>());
            // Equal sets are equal masks, however they were built.
            let (rebuilt, _) = built(&inter.iter().map(|&p| (true, p)).collect::<Vec<_>>());
            prop_assert_eq!(mi, rebuilt);
            let want = ra.range(start..).next().or_else(|| ra.iter().next()).copied();
            prop_assert_eq!(ma.first_from(start), want);
            for p in [start, start / 2, 63, 64] {
                prop_assert_eq!(ma.contains(p), ra.contains(&p));
            }
            let all = CpuMask::all(n);
            prop_assert_eq!(all.count(), n);
            prop_assert_eq!(all.and(ma).count() as usize, ra.range(..n).count());
        }
    }
    #[test]
    fn parses_lists() {
        assert_eq!(CpuMask::parse("0-3", 8).unwrap().count(), 4);
        let m = CpuMask::parse("1,3-4", 8).unwrap();
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![1, 3, 4]);
        assert!(CpuMask::parse("0-8", 8).is_err());
        assert!(CpuMask::parse("3-1", 8).is_err());
        assert!(CpuMask::parse("x", 8).is_err());
        assert_eq!(CpuMask::all(128).count(), 128);
    }

    #[test]
    fn wide_masks_keep_every_cpu() {
        let m = CpuMask::parse("150-199,1000", 1024).unwrap();
        assert_eq!(m.count(), 51);
        assert_eq!(m.iter().next(), Some(150));
        assert_eq!(m.iter().last(), Some(1000));
        assert!(m.contains(199) && !m.contains(22) && !m.contains(200));
        assert_eq!(m.last(), Some(1000));
        assert_eq!(CpuMask::default().last(), None);
        assert_eq!(CpuMask::single(63).last(), Some(63));
        assert_eq!(CpuMask::single(64).last(), Some(64));
        assert_eq!(CpuMask::all(1024).count(), 1024);
        assert_eq!(CpuMask::all(1024).last(), Some(1023));
        assert_eq!(CpuMask::all(70).iter().count(), 70);
        let e = CpuMask::parse_vcpus("0-200", 200).unwrap_err();
        assert!(e.contains("vCPU 200") && e.contains("0-199"), "{e}");
        assert!(CpuMask::parse("1024", 2048).is_err());
    }

    #[test]
    fn first_from_wraps_around() {
        let m = CpuMask::parse("3,70,900", 1024).unwrap();
        assert_eq!(m.first_from(0), Some(3));
        assert_eq!(m.first_from(3), Some(3));
        assert_eq!(m.first_from(4), Some(70));
        assert_eq!(m.first_from(71), Some(900));
        assert_eq!(m.first_from(901), Some(3));
        assert_eq!(CpuMask::default().first_from(5), None);
        let mut a = CpuMask::all(8);
        a.remove(0);
        assert_eq!(a.and(CpuMask::single(0)).first_from(0), None);
        assert_eq!(
            a.and(CpuMask::parse("0,5", 8).unwrap()).first_from(6),
            Some(5)
        );
    }
}
