//! Seeded random streams. Each entity draws from its own stream derived from
//! (run seed, stream kind, entity index), so adding an entity does not perturb the
//! draws of the others. xoshiro256++ seeded through SplitMix64.

#[derive(Clone, Debug)]
pub struct Rng {
    s: [u64; 4],
}

fn splitmix64(x: &mut u64) -> u64 {
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

    /// Exponential with the given mean.
    #[inline]
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }

    /// Standard normal (Box–Muller; one value per call keeps the stream simple).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.f64();
        let u2 = self.f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
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
    fn exp_mean_is_close() {
        let mut r = Rng::new(1);
        let n = 100_000;
        let m: f64 = (0..n).map(|_| r.exp(10.0)).sum::<f64>() / n as f64;
        assert!((m - 10.0).abs() < 0.2, "{m}");
    }
}
