//! Simulated time: integer nanoseconds.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A point in simulated time or a duration, in integer nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Nanos(pub u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);
    pub const MAX: Nanos = Nanos(u64::MAX);

    pub const fn from_us(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }
    pub const fn from_ms(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }
    pub fn from_secs_f64(s: f64) -> Nanos {
        Nanos((s * 1e9).round() as u64)
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub fn saturating_sub(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(o.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    #[inline]
    fn add(self, o: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(o.0))
    }
}
impl AddAssign for Nanos {
    #[inline]
    fn add_assign(&mut self, o: Nanos) {
        self.0 = self.0.saturating_add(o.0);
    }
}
impl Sub for Nanos {
    type Output = Nanos;
    #[inline]
    fn sub(self, o: Nanos) -> Nanos {
        debug_assert!(self.0 >= o.0, "negative duration {} - {}", self.0, o.0);
        Nanos(self.0.saturating_sub(o.0))
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        if n >= 1_000_000_000 && n.is_multiple_of(1_000_000) {
            write!(f, "{}s", n as f64 / 1e9)
        } else if n >= 1_000_000 && n.is_multiple_of(1_000) {
            write!(f, "{}ms", n as f64 / 1e6)
        } else if n >= 1_000 {
            write!(f, "{}us", n as f64 / 1e3)
        } else {
            write!(f, "{n}ns")
        }
    }
}

/// Parses "10ms", "2.5us", "1s", "300ns", "0". Returns None on anything else.
pub fn parse_duration(s: &str) -> Option<Nanos> {
    let s = s.trim();
    if s == "0" {
        return Some(Nanos::ZERO);
    }
    let idx = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (num, unit) = s.split_at(idx);
    let v: f64 = num.trim().parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    let mult = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    let n = v * mult;
    if n > 1e19 {
        return None;
    }
    Some(Nanos(n.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn parses_units() {
        assert_eq!(parse_duration("10ms"), Some(Nanos(10_000_000)));
        assert_eq!(parse_duration("2.5us"), Some(Nanos(2_500)));
        assert_eq!(parse_duration("1s"), Some(Nanos(1_000_000_000)));
        assert_eq!(parse_duration("0.1ms"), Some(Nanos(100_000)));
        assert_eq!(parse_duration("0"), Some(Nanos(0)));
        assert_eq!(parse_duration("10"), None);
        assert_eq!(parse_duration("-1ms"), None);
        assert_eq!(parse_duration("5 parsecs"), None);
    }
    #[test]
    fn displays_round_trip() {
        for s in ["30ms", "1s", "100us", "7ns"] {
            let n = parse_duration(s).unwrap();
            assert_eq!(parse_duration(&n.to_string()), Some(n));
        }
    }
}
