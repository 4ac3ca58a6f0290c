//! Duration distributions, written in scenarios as strings:
//! `"100us"`, `"exp(100us)"`, `"uniform(1us, 5us)"`, `"lognormal(100us, 0.5)"`
//! (median and sigma of the underlying normal), `"normal(100us, 10us)"` (clipped at 0),
//! `"empirical(1us, 2us, 5us)"` (equiprobable values).

use crate::sim::time::parse_duration;
use crate::sim::{Nanos, Rng};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Clone, Debug, PartialEq)]
pub enum DistKind {
    Const(u64),
    Exp(f64),
    Uniform(u64, u64),
    LogNormal { median: f64, sigma: f64 },
    Normal { mean: f64, sd: f64 },
    Empirical(Vec<u64>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Dist {
    pub kind: DistKind,
    text: String,
}

pub const DIST_HELP: &str = "a duration like \"100us\", or exp(100us), uniform(1us, 5us), \
lognormal(100us, 0.5), normal(100us, 10us), empirical(1us, 2us, 5us)";

impl Dist {
    pub fn constant(n: Nanos) -> Dist {
        Dist {
            kind: DistKind::Const(n.0),
            text: n.to_string(),
        }
    }

    /// exp(`mean` ns): what `parse` makes of "exp(<mean>ns)", without parsing (the
    /// catalog builds thousands of distributions per scenario).
    pub fn exp_ns(mean: u64) -> Dist {
        Dist {
            kind: DistKind::Exp(mean as f64),
            text: format!("exp({mean}ns)"),
        }
    }

    /// uniform(`lo` ns, `hi` ns), `lo` <= `hi`: what `parse` makes of
    /// "uniform(<lo>ns, <hi>ns)".
    pub fn uniform_ns(lo: u64, hi: u64) -> Dist {
        debug_assert!(lo <= hi);
        Dist {
            kind: DistKind::Uniform(lo, hi),
            text: format!("uniform({lo}ns, {hi}ns)"),
        }
    }

    /// lognormal(`median` ns, `sigma`), `sigma` in [0, 5]: what `parse` makes of
    /// "lognormal(<median>ns, <sigma>)".
    pub fn lognormal_ns(median: u64, sigma: f64) -> Dist {
        debug_assert!((0.0..=5.0).contains(&sigma));
        Dist {
            kind: DistKind::LogNormal {
                median: median as f64,
                sigma,
            },
            text: format!("lognormal({median}ns, {sigma})"),
        }
    }

    pub fn parse(s: &str) -> Result<Dist, String> {
        let t = s.trim();
        let bad = || format!("{t:?} is not a duration distribution; expected {DIST_HELP}");
        let kind = if let Some(open) = t.find('(') {
            if !t.ends_with(')') {
                return Err(bad());
            }
            let name = t[..open].trim();
            let args: Vec<&str> = t[open + 1..t.len() - 1].split(',').map(str::trim).collect();
            let dur = |a: &str| parse_duration(a).ok_or_else(bad);
            match (name, args.len()) {
                ("exp", 1) => DistKind::Exp(dur(args[0])?.0 as f64),
                ("uniform", 2) => {
                    let (a, b) = (dur(args[0])?.0, dur(args[1])?.0);
                    if a > b {
                        return Err(format!("{t:?}: uniform(lo, hi) needs lo <= hi"));
                    }
                    DistKind::Uniform(a, b)
                }
                ("lognormal", 2) => {
                    let sigma: f64 = args[1].parse().map_err(|_| bad())?;
                    if !(0.0..=5.0).contains(&sigma) {
                        return Err(format!("{t:?}: lognormal sigma must be in [0, 5]"));
                    }
                    DistKind::LogNormal {
                        median: dur(args[0])?.0 as f64,
                        sigma,
                    }
                }
                ("normal", 2) => DistKind::Normal {
                    mean: dur(args[0])?.0 as f64,
                    sd: dur(args[1])?.0 as f64,
                },
                ("empirical", n) if n >= 1 && !args[0].is_empty() => DistKind::Empirical(
                    args.iter()
                        .map(|a| dur(a).map(|d| d.0))
                        .collect::<Result<_, _>>()?,
                ),
                _ => return Err(bad()),
            }
        } else {
            DistKind::Const(parse_duration(t).ok_or_else(bad)?.0)
        };
        Ok(Dist {
            kind,
            text: t.to_string(),
        })
    }

    /// The mean of the distribution, in ns.
    pub fn mean(&self) -> f64 {
        match &self.kind {
            DistKind::Const(c) => *c as f64,
            DistKind::Exp(m) => *m,
            DistKind::Uniform(a, b) => (*a as f64 + *b as f64) / 2.0,
            DistKind::LogNormal { median, sigma } => median * (sigma * sigma / 2.0).exp(),
            DistKind::Normal { mean, .. } => *mean,
            DistKind::Empirical(v) => v.iter().sum::<u64>() as f64 / v.len() as f64,
        }
    }

    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> Nanos {
        // The common forms inline at the call site; the others are out of line, so
        // that the hot path saves no registers for them.
        match &self.kind {
            DistKind::Exp(m) => Nanos((rng.exp(*m) + 0.5) as u64),
            DistKind::Const(c) => Nanos(*c),
            _ => self.sample_other(rng),
        }
    }

    #[inline(never)]
    fn sample_other(&self, rng: &mut Rng) -> Nanos {
        Nanos(match &self.kind {
            // Drawn by `sample` itself; here for a total match only.
            DistKind::Const(_) | DistKind::Exp(_) => return self.sample(rng),
            DistKind::Uniform(a, b) => a + rng.below(b - a + 1),
            DistKind::LogNormal { median, sigma } => {
                (median * (sigma * rng.normal()).exp() + 0.5) as u64
            }
            DistKind::Normal { mean, sd } => ((mean + sd * rng.normal()).max(0.0) + 0.5) as u64,
            DistKind::Empirical(v) => v[rng.below(v.len() as u64) as usize],
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }
}

impl Serialize for Dist {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Dist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dist, D::Error> {
        let s = String::deserialize(d)?;
        Dist::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop_assert_eq, proptest};

    proptest! {
        /// The constructors the catalog uses make what parsing their text makes.
        #[test]
        fn constructors_equal_parsing_their_text(
            a in 0u64..10_000_000_000_000,
            b in 0u64..10_000_000_000_000,
            sigma in 0.0f64..=5.0,
        ) {
            let (lo, hi) = (a.min(b), a.max(b));
            for d in [Dist::exp_ns(a), Dist::uniform_ns(lo, hi), Dist::lognormal_ns(a, sigma)] {
                prop_assert_eq!(Dist::parse(d.text()), Ok(d.clone()));
            }
        }
    }
    #[test]
    fn parses_all_forms() {
        assert_eq!(Dist::parse("5us").unwrap().kind, DistKind::Const(5000));
        assert_eq!(Dist::parse("exp(1ms)").unwrap().kind, DistKind::Exp(1e6));
        assert_eq!(
            Dist::parse("uniform(1us, 2us)").unwrap().kind,
            DistKind::Uniform(1000, 2000)
        );
        assert!(Dist::parse("lognormal(1us, 0.5)").is_ok());
        assert_eq!(Dist::parse("empirical(1us,3us)").unwrap().mean(), 2000.0);
        assert!(Dist::parse("exp(1ms").is_err());
        assert!(Dist::parse("gamma(1ms)").is_err());
        assert!(Dist::parse("uniform(5us, 1us)").is_err());
    }
    #[test]
    fn sample_means() {
        let mut r = Rng::new(3);
        for s in [
            "exp(100us)",
            "uniform(0ns, 200us)",
            "lognormal(100us, 0.3)",
            "normal(100us, 5us)",
        ] {
            let d = Dist::parse(s).unwrap();
            let n = 50_000;
            let m = (0..n).map(|_| d.sample(&mut r).0 as f64).sum::<f64>() / n as f64;
            assert!(
                (m / d.mean() - 1.0).abs() < 0.03,
                "{s}: {m} vs {}",
                d.mean()
            );
        }
    }
}
