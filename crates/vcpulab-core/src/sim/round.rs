//! Rounding to a whole number of nanoseconds (or KiB, or pages) on the dispatch path.
//!
//! `f64::round` is a call into the maths library on x86-64 (no instruction rounds half
//! away from zero), ~24 instructions, and the cache and TLB models make two or three
//! at every dispatch. `round_u64` gives the same result as `x.round() as u64` for every
//! `f64`, from a truncating conversion and one comparison.

/// 2^52: from here on every `f64` is a whole number.
const WHOLE_FROM: f64 = 4_503_599_627_370_496.0;

/// `x.round() as u64`, bit for bit: halves away from zero, negative values and NaN to
/// 0, values beyond `u64::MAX` to `u64::MAX`.
#[inline]
pub fn round_u64(x: f64) -> u64 {
    // Whole already (or infinite, or NaN): the conversion alone is exact (and
    // saturating, as `as` is).
    if x.is_nan() || x >= WHOLE_FROM {
        return x as u64;
    }
    // Below 2^52: `t` is x truncated toward zero (0 for negatives) and `x - t` is its
    // fractional part, exactly (both share x's binade or t is 0).
    let t = x as u64;
    if x - t as f64 >= 0.5 {
        t + 1
    } else {
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn edge_cases_agree_with_the_library() {
        let cases = [
            0.0,
            -0.0,
            0.5,
            -0.5,
            0.49999999999999994,
            1.5,
            2.5,
            -1.5,
            4_503_599_627_370_495.5,
            WHOLE_FROM,
            WHOLE_FROM + 2.0,
            1.8446744073709552e19,
            1e300,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            f64::EPSILON,
        ];
        for x in cases {
            assert_eq!(round_u64(x), x.round() as u64, "x = {x:e}");
        }
    }

    proptest! {
        #[test]
        fn agrees_with_the_library_on_any_bits(bits in any::<u64>()) {
            let x = f64::from_bits(bits);
            prop_assert_eq!(round_u64(x), x.round() as u64);
        }

        #[test]
        fn agrees_with_the_library_on_halves(n in 0u64..(1 << 53), half in any::<bool>()) {
            let x = n as f64 / 2.0 + if half { 0.0 } else { 0.25 };
            prop_assert_eq!(round_u64(x), x.round() as u64);
        }
    }
}
