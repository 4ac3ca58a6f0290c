//! A set-associative last-level cache with per-access insertion position, and the
//! time-sampling rule of context preservation.
//!
//! Each set keeps its ways in recency order (index 0 = MRU, last = LRU). A hit moves
//! the block to MRU. A miss evicts the LRU block and inserts the new one at the MRU
//! position (classic LRU) or at the LRU position (LRU insertion, "LIP" in Qureshi et al.,
//! "Adaptive insertion policies for high performance caching", ISCA 2007): a block
//! inserted at LRU is the next victim unless it is reused first, so a context whose
//! blocks have no reuse does not push other contexts' blocks out.
//!
//! Blocks are named by a 64-bit key: the owning context in the top 16 bits, the line
//! number in the context's own address space below. Each block carries a reuse bit (hit
//! at least once since it was filled), which the context prefetcher uses to skip blocks
//! without reuse.

/// Where a filled block enters its set's recency stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Insertion {
    Mru,
    Lru,
}

impl Insertion {
    pub fn name(self) -> &'static str {
        match self {
            Insertion::Mru => "mru",
            Insertion::Lru => "lru",
        }
    }
}

const EMPTY: u64 = u64::MAX;
const CTX_SHIFT: u32 = 48;
/// Largest line number a context may use (the key keeps 48 bits for it).
pub const MAX_LINE: u64 = (1 << CTX_SHIFT) - 1;

/// The key of line `line` of context `ctx`.
#[inline]
pub fn key(ctx: u16, line: u64) -> u64 {
    ((ctx as u64) << CTX_SHIFT) | (line & MAX_LINE)
}

#[inline]
fn owner(key: u64) -> u16 {
    (key >> CTX_SHIFT) as u16
}

/// Moves `v[..pos]` one place down (dropping `v[pos]`) and puts `top` at `v[0]`: a
/// plain loop, cheaper than `rotate_right`'s memmove call for 16 elements.
#[inline]
fn shift_down<T: Copy>(v: &mut [T], pos: usize, top: T) {
    for j in (1..=pos).rev() {
        v[j] = v[j - 1];
    }
    v[0] = top;
}

/// The cache: `sets` sets of `ways` blocks.
#[derive(Clone, Debug)]
pub struct Llc {
    ways: usize,
    set_mask: u64,
    /// sets x ways keys, each set in recency order (MRU first).
    keys: Vec<u64>,
    /// Reuse bit per block, same layout as `keys`.
    reused: Vec<bool>,
}

impl Llc {
    /// `sets` must be a power of two, `ways` at least 1.
    pub fn new(sets: usize, ways: usize) -> Result<Llc, String> {
        if sets == 0 || !sets.is_power_of_two() {
            return Err(format!(
                "the number of sets must be a power of two, got {sets}"
            ));
        }
        if ways == 0 || ways > 64 {
            return Err(format!("ways must be within 1..=64, got {ways}"));
        }
        Ok(Llc {
            ways,
            set_mask: sets as u64 - 1,
            keys: vec![EMPTY; sets * ways],
            reused: vec![false; sets * ways],
        })
    }

    pub fn sets(&self) -> usize {
        (self.set_mask + 1) as usize
    }

    pub fn ways(&self) -> usize {
        self.ways
    }

    /// The set a key maps to: the line number's low bits, offset per context so that
    /// contexts' line 0s do not all share set 0 (physical pages are scattered).
    #[inline]
    pub fn set_of(&self, key: u64) -> usize {
        let ctx = owner(key) as u64;
        ((key & MAX_LINE).wrapping_add(ctx.wrapping_mul(0x9E37_79B9)) & self.set_mask) as usize
    }

    /// A demand access. Returns true on a hit (the block moves to MRU and is marked
    /// reused); on a miss the LRU block is evicted and the key is filled at `ins`.
    #[inline]
    pub fn access(&mut self, key: u64, ins: Insertion) -> bool {
        let base = self.set_of(key) * self.ways;
        let w = self.ways;
        let keys = &mut self.keys[base..base + w];
        if let Some(pos) = keys.iter().position(|&k| k == key) {
            shift_down(keys, pos, key);
            shift_down(&mut self.reused[base..base + w], pos, true);
            return true;
        }
        self.fill_at(base, key, ins);
        false
    }

    /// A prefetch fill: inserts the key at `ins` unless it is already present. Returns
    /// true when the block was fetched from memory.
    pub fn prefetch(&mut self, key: u64, ins: Insertion) -> bool {
        let base = self.set_of(key) * self.ways;
        if self.keys[base..base + self.ways].contains(&key) {
            return false;
        }
        self.fill_at(base, key, ins);
        true
    }

    #[inline]
    fn fill_at(&mut self, base: usize, key: u64, ins: Insertion) {
        let w = self.ways;
        match ins {
            Insertion::Mru => {
                shift_down(&mut self.keys[base..base + w], w - 1, key);
                shift_down(&mut self.reused[base..base + w], w - 1, false);
            }
            Insertion::Lru => {
                // Valid blocks occupy the front of the set and empty ways the back (fills
                // at MRU shift toward the back, hits rotate within the valid front), so
                // the first empty way, if any, is the LRU position among the valid ones.
                let pos = self.keys[base..base + w]
                    .iter()
                    .position(|&k| k == EMPTY)
                    .unwrap_or(w - 1);
                self.keys[base + pos] = key;
                self.reused[base + pos] = false;
            }
        }
    }

    /// Whether the key is resident (no state change).
    pub fn contains(&self, key: u64) -> bool {
        let base = self.set_of(key) * self.ways;
        self.keys[base..base + self.ways].contains(&key)
    }

    /// Appends to `out` the keys of context `ctx`'s resident blocks that were reused
    /// since they were filled, LRU-most first within each set (so that prefetching them
    /// in order at MRU restores their recency order).
    pub fn reused_blocks_of(&self, ctx: u16, out: &mut Vec<u64>) {
        for set in self
            .keys
            .chunks_exact(self.ways)
            .zip(self.reused.chunks_exact(self.ways))
        {
            for (&k, &r) in set.0.iter().zip(set.1.iter()).rev() {
                if r && k != EMPTY && owner(k) == ctx {
                    out.push(k);
                }
            }
        }
    }

    /// Blocks of context `ctx` resident now.
    pub fn occupancy(&self, ctx: u16) -> usize {
        self.keys
            .iter()
            .filter(|&&k| k != EMPTY && owner(k) == ctx)
            .count()
    }

    /// The keys of one set in recency order (MRU first), EMPTY slots omitted; for tests.
    pub fn set_contents(&self, set: usize) -> Vec<u64> {
        self.keys[set * self.ways..(set + 1) * self.ways]
            .iter()
            .copied()
            .filter(|&k| k != EMPTY)
            .collect()
    }
}

/// Context preservation's time sampling (one per context): in every period of 10
/// quanta, quantum 0 tries MRU insertion and quantum 1 tries LRU insertion; the other 8
/// use whichever of the two last trials missed less (misses per instruction, so that a
/// quantum that ran more instructions is not penalized), LRU on a tie.
///
/// The trials are back to back, as the policy is described. The second inherits the
/// blocks the first inserted (an MRU trial refills what LRU quanta let decay; the LRU
/// trial right after it hits on them), which leans the choice towards LRU when the two
/// are close: the "LRU on a tie" the policy wants for contexts whose own misses do not
/// depend on the insertion, but also, at times, for a cache-friendly context.
/// docs/model.md gives the effect of spacing the trials half a period apart instead.
#[derive(Clone, Debug, Default)]
pub struct TimeSampling {
    quantum: u64,
    /// (misses, instructions) of the last MRU and LRU trial quanta.
    mru_trial: Option<(u64, u64)>,
    lru_trial: Option<(u64, u64)>,
}

/// What a quantum is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantumRole {
    TryMru,
    TryLru,
    Use(Insertion),
}

pub const SAMPLING_PERIOD: u64 = 10;

/// The insertion that missed less, LRU on a tie. Miss counts are compared per
/// instruction: misses_a / instr_a against misses_b / instr_b, cross-multiplied so that
/// equal rates compare exactly equal.
pub fn choose(mru: (u64, u64), lru: (u64, u64)) -> Insertion {
    let mru_rate = mru.0 as u128 * lru.1.max(1) as u128;
    let lru_rate = lru.0 as u128 * mru.1.max(1) as u128;
    if mru_rate < lru_rate {
        Insertion::Mru
    } else {
        Insertion::Lru
    }
}

impl TimeSampling {
    /// The role of the next quantum.
    pub fn role(&self) -> QuantumRole {
        match self.quantum % SAMPLING_PERIOD {
            0 => QuantumRole::TryMru,
            1 => QuantumRole::TryLru,
            _ => match (self.mru_trial, self.lru_trial) {
                (Some(m), Some(l)) => QuantumRole::Use(choose(m, l)),
                _ => QuantumRole::Use(Insertion::Lru),
            },
        }
    }

    pub fn insertion(&self) -> Insertion {
        match self.role() {
            QuantumRole::TryMru => Insertion::Mru,
            QuantumRole::TryLru => Insertion::Lru,
            QuantumRole::Use(i) => i,
        }
    }

    /// Records the quantum that just ended (its own misses and instructions).
    pub fn end_quantum(&mut self, misses: u64, instructions: u64) {
        match self.role() {
            QuantumRole::TryMru => self.mru_trial = Some((misses, instructions)),
            QuantumRole::TryLru => self.lru_trial = Some((misses, instructions)),
            QuantumRole::Use(_) => {}
        }
        self.quantum += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One set of 4 ways; keys of context 0 with line numbers that all map to set 0.
    fn one_set() -> Llc {
        Llc::new(1, 4).expect("valid")
    }

    fn seq(c: &mut Llc, lines: &[u64], ins: Insertion) -> String {
        lines
            .iter()
            .map(|&l| if c.access(key(0, l), ins) { 'H' } else { 'm' })
            .collect()
    }

    #[test]
    fn lru_insertion_hand_computed() {
        // MRU insertion (classic LRU), 4 ways: A B C D A E B A C D
        // A m [A]; B m [B A]; C m [C B A]; D m [D C B A]; A H [A D C B]; E m evicts B
        // [E A D C]; B m evicts C [B E A D]; A H [A B E D]; C m evicts D [C A B E];
        // D m evicts E [D C A B].
        let mut c = one_set();
        assert_eq!(
            seq(&mut c, &[1, 2, 3, 4, 1, 5, 2, 1, 3, 4], Insertion::Mru),
            "mmmmHmmHmm"
        );
        assert_eq!(
            c.set_contents(0),
            vec![key(0, 4), key(0, 3), key(0, 1), key(0, 2)]
        );
    }

    #[test]
    fn lru_position_insertion_hand_computed() {
        // LRU insertion, 4 ways, same sequence A B C D A E B A C D. Empty ways are
        // filled first, each new block below the valid ones (the LRU position):
        // A m [A]; B m [A B]; C m [A B C]; D m [A B C D]; A H [A B C D];
        // E m replaces the LRU block D [A B C E]; B H [B A C E]; A H [A B C E];
        // C H [C A B E]; D m replaces E [C A B D].
        let mut c = one_set();
        assert_eq!(
            seq(&mut c, &[1, 2, 3, 4, 1, 5, 2, 1, 3, 4], Insertion::Lru),
            "mmmmHmHHHm"
        );
        assert_eq!(
            c.set_contents(0),
            vec![key(0, 3), key(0, 1), key(0, 2), key(0, 4)]
        );
        // Once the set is full, a stream of new blocks only ever replaces the LRU way.
        assert_eq!(seq(&mut c, &[5, 6, 7, 3, 1, 2], Insertion::Lru), "mmmHHH");
        assert_eq!(
            c.set_contents(0),
            vec![key(0, 2), key(0, 1), key(0, 3), key(0, 7)]
        );
    }

    #[test]
    fn lru_insertion_protects_another_contexts_blocks() {
        let mut c = one_set();
        for l in 1..=4 {
            c.access(key(1, l), Insertion::Mru);
        }
        // Context 2 streams 100 distinct lines at LRU: context 1 keeps 3 of its 4 ways.
        let mut c2 = c.clone();
        for l in 0..100 {
            c2.access(key(2, l), Insertion::Lru);
        }
        assert_eq!(c2.occupancy(1), 3);
        // The same stream at MRU evicts all of them.
        for l in 0..100 {
            c.access(key(2, l), Insertion::Mru);
        }
        assert_eq!(c.occupancy(1), 0);
    }

    #[test]
    fn prefetch_fills_only_missing_blocks_and_reuse_bits_select_blocks() {
        let mut c = Llc::new(1, 4).expect("valid");
        c.access(key(0, 1), Insertion::Mru);
        c.access(key(0, 2), Insertion::Mru);
        c.access(key(0, 1), Insertion::Mru); // 1 reused, 2 not
        let mut out = Vec::new();
        c.reused_blocks_of(0, &mut out);
        assert_eq!(out, vec![key(0, 1)]);
        assert!(!c.prefetch(key(0, 1), Insertion::Mru));
        assert!(c.prefetch(key(0, 3), Insertion::Mru));
        assert!(c.contains(key(0, 3)));
    }

    #[test]
    fn time_sampling_trials_and_choices() {
        let mut t = TimeSampling::default();
        assert_eq!(t.role(), QuantumRole::TryMru);
        t.end_quantum(100, 1000); // MRU trial: 0.1 misses/instr
        assert_eq!(t.role(), QuantumRole::TryLru);
        t.end_quantum(50, 1000); // LRU trial: 0.05
        for _ in 2..10 {
            assert_eq!(t.role(), QuantumRole::Use(Insertion::Lru));
            t.end_quantum(7, 1000); // non-trial quanta do not change the choice
        }
        // Next period: MRU misses less now.
        assert_eq!(t.role(), QuantumRole::TryMru);
        t.end_quantum(10, 1000);
        t.end_quantum(40, 1000);
        assert_eq!(t.role(), QuantumRole::Use(Insertion::Mru));
        assert_eq!(t.insertion(), Insertion::Mru);
        // A tie (same rate, different lengths) picks LRU.
        let mut t = TimeSampling::default();
        t.end_quantum(20, 2000);
        t.end_quantum(10, 1000);
        assert_eq!(t.role(), QuantumRole::Use(Insertion::Lru));
        // No misses at all in either trial: a tie, LRU.
        assert_eq!(choose((0, 500), (0, 900)), Insertion::Lru);
        // Rates, not counts: 30 misses in 3000 instr beat 20 in 1000.
        assert_eq!(choose((30, 3000), (20, 1000)), Insertion::Mru);
    }

    proptest! {
        /// A context whose working set fits in the ways of each set never misses after
        /// warm-up when it runs alone, whatever its insertion position.
        #[test]
        fn fitting_working_set_never_misses_after_warmup(
            sets_log in 0u32..5,
            ways in 1usize..17,
            fill_frac in 0.1f64..1.0,
            lru in any::<bool>(),
            order in proptest::collection::vec(any::<u32>(), 1..400),
        ) {
            let sets = 1usize << sets_log;
            let mut c = Llc::new(sets, ways).expect("valid");
            let ins = if lru { Insertion::Lru } else { Insertion::Mru };
            // A working set of at most `ways` lines per set: lines l with l mod sets
            // spread evenly (the set index is the line's low bits plus a per-context
            // offset, a bijection on each block of `sets` consecutive lines).
            let per_set = ((ways as f64 * fill_frac).ceil() as usize).clamp(1, ways);
            let n = (sets * per_set) as u64;
            // Warm-up: touch every line twice (with LRU insertion a block is only safe
            // from the next fill once it has been reused).
            for l in 0..n {
                c.access(key(3, l), ins);
                c.access(key(3, l), ins);
            }
            for x in order {
                let l = x as u64 % n;
                prop_assert!(c.access(key(3, l), ins), "miss on line {} after warm-up", l);
            }
        }
    }
}
