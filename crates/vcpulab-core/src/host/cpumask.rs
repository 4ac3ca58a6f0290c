//! A set of CPUs (up to `MAX_PCPUS`), parsed from Linux-style CPU lists ("0-3,6"): a
//! host's pCPUs, or a VM's vCPUs (a guest cpuset; VMs have up to as many vCPUs as hosts
//! have pCPUs). A fixed array of words: `Copy`, no allocation, `contains` in O(1).

const WORDS: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct CpuMask([u64; WORDS]);

/// The largest host (and the largest mask) the simulator handles.
pub const MAX_PCPUS: u32 = (WORDS * 64) as u32;

impl CpuMask {
    pub fn all(n: u32) -> CpuMask {
        let n = n.min(MAX_PCPUS) as usize;
        let mut w = [0u64; WORDS];
        for (i, word) in w.iter_mut().enumerate() {
            let lo = i * 64;
            if n >= lo + 64 {
                *word = u64::MAX;
            } else if n > lo {
                *word = (1u64 << (n - lo)) - 1;
            }
        }
        CpuMask(w)
    }
    pub fn single(p: u32) -> CpuMask {
        let mut m = CpuMask::default();
        m.insert(p);
        m
    }
    #[inline]
    pub fn insert(&mut self, p: u32) {
        if p < MAX_PCPUS {
            self.0[(p / 64) as usize] |= 1u64 << (p % 64);
        }
    }
    #[inline]
    pub fn contains(self, p: u32) -> bool {
        p < MAX_PCPUS && self.0[(p / 64) as usize] >> (p % 64) & 1 == 1
    }
    pub fn count(self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }
    pub fn is_empty(self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }
    pub fn iter(self) -> impl Iterator<Item = u32> {
        let words = self.0;
        let mut i = 0usize;
        let mut m = words[0];
        std::iter::from_fn(move || loop {
            if m != 0 {
                let b = m.trailing_zeros();
                m &= m - 1;
                return Some(i as u32 * 64 + b);
            }
            i += 1;
            if i >= WORDS {
                return None;
            }
            m = words[i];
        })
    }
    #[inline]
    pub fn remove(&mut self, p: u32) {
        if p < MAX_PCPUS {
            self.0[(p / 64) as usize] &= !(1u64 << (p % 64));
        }
    }
    /// The CPUs in both masks.
    #[inline]
    pub fn and(self, o: CpuMask) -> CpuMask {
        let mut w = self.0;
        for (a, b) in w.iter_mut().zip(o.0.iter()) {
            *a &= *b;
        }
        CpuMask(w)
    }
    /// The first CPU of the mask at or after `start`, wrapping around (None: empty).
    pub fn first_from(self, start: u32) -> Option<u32> {
        let start = start % MAX_PCPUS;
        let (sw, sb) = ((start / 64) as usize, start % 64);
        let head = self.0[sw] & (u64::MAX << sb);
        if head != 0 {
            return Some(sw as u32 * 64 + head.trailing_zeros());
        }
        for k in 1..=WORDS {
            let i = (sw + k) % WORDS;
            let w = if i == sw {
                self.0[i] & !(u64::MAX << sb)
            } else {
                self.0[i]
            };
            if w != 0 {
                return Some(i as u32 * 64 + w.trailing_zeros());
            }
        }
        None
    }

    /// The highest CPU of the mask (None: empty).
    pub fn last(self) -> Option<u32> {
        (0..WORDS)
            .rev()
            .find(|&i| self.0[i] != 0)
            .map(|i| i as u32 * 64 + 63 - self.0[i].leading_zeros())
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
