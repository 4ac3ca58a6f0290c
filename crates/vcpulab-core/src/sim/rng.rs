//! Seeded random streams. Each entity draws from its own stream derived from
//! (run seed, stream kind, entity index), so adding an entity does not perturb the
//! draws of the others. xoshiro256++ seeded through SplitMix64.

#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

pub(crate) fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Kinds of streams, so that e.g. thread 3 and vCPU 3 never share a stream.
#[derive(Clone, Copy, Debug)]
pub enum Stream {
    Thread = 1,
    Vcpu = 2,
    Vm = 3,
    Host = 4,
    Device = 5,
    /// Synthetic post-L2 address streams of the cache study (host/llc_study.rs).
    Cache = 6,
    /// Where a VM's futex objects fall in the guest's futex hash table (sim/build.rs).
    Futex = 7,
    /// The order in which the Linux host's aligned ticks are handled (sim/world.rs).
    TickOrder = 8,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let s = [
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
            splitmix64(&mut x),
        ];
        Rng { s }
    }

    /// The stream of entity `index` of kind `kind`, for run seed `seed`.
    pub fn stream(seed: u64, kind: Stream, index: u64) -> Rng {
        let mut x = seed ^ ((kind as u64) << 56) ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03);
        let mixed = splitmix64(&mut x) ^ splitmix64(&mut x);
        Rng::new(mixed)
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = (s[0].wrapping_add(s[3])).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in [0, n). n must be > 0.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next_u64() as u128 * n as u128) >> 64) as u64
    }

    /// Exponential with the given mean (the ziggurat method, through `rand_distr`'s
    /// `Exp1`: about a tenth of the instructions of inverting the CDF with a logarithm).
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        let e: f64 = rand_distr::Distribution::sample(&rand_distr::Exp1, self);
        mean * e
    }

    /// Standard normal (the ziggurat method, through `rand_distr`'s `StandardNormal`;
    /// Box–Muller's logarithm, square root and cosine per draw were 4% of a
    /// synchronization-heavy run's instructions).
    #[inline]
    pub fn normal(&mut self) -> f64 {
        rand_distr::Distribution::sample(&rand_distr::StandardNormal, self)
    }
}

/// The engine's generator is a `rand_core` generator, so the well-tested samplers of
/// `rand_distr` draw from the same per-entity streams.
impl rand_core::TryRng for Rng {
    type Error = std::convert::Infallible;

    #[inline]
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok((self.next_u64() >> 32) as u32)
    }

    #[inline]
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        Ok(self.next_u64())
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for chunk in dst.chunks_mut(8) {
            let bytes = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&bytes[..chunk.len()]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn streams_are_reproducible_and_distinct() {
        let mut a = Rng::stream(7, Stream::Thread, 3);
        let mut b = Rng::stream(7, Stream::Thread, 3);
        let mut c = Rng::stream(7, Stream::Vcpu, 3);
        let va: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..8).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }
    #[test]
    fn normal_moments_are_close() {
        let mut r = Rng::new(2);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| r.normal()).collect();
        let m = xs.iter().sum::<f64>() / n as f64;
        let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / n as f64;
        assert!(m.abs() < 0.01, "{m}");
        assert!((v - 1.0).abs() < 0.01, "{v}");
        let beyond2 = xs.iter().filter(|x| x.abs() > 2.0).count() as f64 / n as f64;
        assert!((beyond2 - 0.0455).abs() < 0.003, "{beyond2}");
    }
    #[test]
    fn exp_mean_is_close() {
        let mut r = Rng::new(1);
        let n = 100_000;
        let m: f64 = (0..n).map(|_| r.exp(10.0)).sum::<f64>() / n as f64;
        assert!((m - 10.0).abs() < 0.2, "{m}");
    }
}
