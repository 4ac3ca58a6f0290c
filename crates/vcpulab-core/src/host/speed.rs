//! The speed of a running vCPU's guest work, below the full speed of a lone core with
//! local memory: an SMT core shared with a busy sibling (host/smt.rs) and memory on
//! another NUMA node (host/numa.rs) each slow it, and the two multiply. Speeds are in
//! 1/65,536ths; the cache model's re-fetch stall (host/cache.rs) comes on top.

/// Full speed.
pub const ONE: u64 = 1 << 16;

/// `Vcpu::slow` flags: on an SMT core shared with a busy sibling; away from its VM's
/// memory node.
pub const SLOW_SMT: u8 = 1;
pub const SLOW_NUMA: u8 = 2;

/// The speed of a vCPU's work with `slow` flags: on a core shared with a busy sibling
/// (the SMT model's shared speed) and/or away from its memory (its VM's
/// `remote_speed`). Out of line: only SMT and NUMA hosts call it.
#[cold]
#[inline(never)]
pub fn slowed(smt: Option<crate::host::smt::Smt>, remote_speed: u64, slow: u8) -> u64 {
    let a = match smt {
        Some(s) if slow & SLOW_SMT != 0 => s.shared_speed(),
        _ => ONE,
    };
    combine(
        a,
        if slow & SLOW_NUMA != 0 {
            remote_speed
        } else {
            ONE
        },
    )
}

/// `a` then `b`.
#[inline]
pub fn combine(a: u64, b: u64) -> u64 {
    (a * b / ONE).max(1)
}

/// Work done in `ns` at `speed` (rounded down).
#[inline]
pub fn progress(speed: u64, ns: u64) -> u64 {
    (ns as u128 * speed as u128 / ONE as u128) as u64
}

/// Time `work_ns` of work takes at `speed` (rounded up: `progress` of it is at least
/// `work_ns`).
#[inline]
pub fn time_for(speed: u64, work_ns: u64) -> u64 {
    (work_ns as u128 * ONE as u128).div_ceil(speed.max(1) as u128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_for_then_progress_covers_the_work() {
        for speed in [1, 42_598, 48_000, ONE - 1, ONE] {
            for w in [1, 2, 3, 999, 1_000_003, 123_456_789] {
                let t = time_for(speed, w);
                assert!(progress(speed, t) >= w, "{speed} {w}");
                assert!(
                    progress(speed, t - 1) < w,
                    "{speed} {w}: {t} is not the least"
                );
            }
        }
        assert_eq!(combine(ONE, 42_598), 42_598);
        assert_eq!(combine(ONE / 2, ONE / 2), ONE / 4);
    }
}
