//! A set of pCPUs (up to 128), parsed from Linux-style CPU lists ("0-3,6").

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CpuMask(pub u128);

pub const MAX_PCPUS: u32 = 128;

impl CpuMask {
    pub fn all(n: u32) -> CpuMask {
        if n >= 128 {
            CpuMask(u128::MAX)
        } else {
            CpuMask((1u128 << n) - 1)
        }
    }
    pub fn single(p: u32) -> CpuMask {
        CpuMask(1u128 << p)
    }
    #[inline]
    pub fn contains(self, p: u32) -> bool {
        p < 128 && self.0 >> p & 1 == 1
    }
    pub fn count(self) -> u32 {
        self.0.count_ones()
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn iter(self) -> impl Iterator<Item = u32> {
        let mut m = self.0;
        std::iter::from_fn(move || {
            if m == 0 {
                None
            } else {
                let i = m.trailing_zeros();
                m &= m - 1;
                Some(i)
            }
        })
    }

    /// Parses "0-3,6" for a host of `n` pCPUs.
    pub fn parse(s: &str, n: u32) -> Result<CpuMask, String> {
        let mut m = 0u128;
        for part in s.split(',').map(str::trim) {
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (a.trim(), b.trim()),
                None => (part, part),
            };
            let (a, b): (u32, u32) = match (a.parse(), b.parse()) {
                (Ok(a), Ok(b)) if a <= b => (a, b),
                _ => return Err(format!("{s:?} is not a CPU list like \"0-3,6\"")),
            };
            if b >= n {
                return Err(format!(
                    "{s:?} names pCPU {b}, but the host has pCPUs 0-{}",
                    n - 1
                ));
            }
            for p in a..=b {
                m |= 1u128 << p;
            }
        }
        Ok(CpuMask(m))
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
}
