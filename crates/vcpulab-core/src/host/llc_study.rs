//! The micro-slicing cache study (Ahn, Park, Huh, "Micro-sliced virtual processors to
//! hide the effect of discontinuous CPU availability for consolidated systems", MICRO
//! 2014): single-threaded contexts time-share one core round-robin with a fixed slice,
//! sharing its last-level cache (host/llc.rs), each context a synthetic post-L2 stream
//! with its benchmark's stack-distance profile (host/access.rs).
//!
//! Insertion policies, per context:
//! - `mru`, `lru`: every context inserts at that position;
//! - `preservation` (context preservation): the insertion is chosen per context by
//!   time sampling (llc::TimeSampling);
//! - `prefetch` (context prefetcher): MRU insertion; at switch-out the context's
//!   resident blocks that were reused are recorded, and at switch-in those no longer
//!   resident are prefetched (the traffic is counted; the fills are assumed to overlap
//!   with execution, so they cost no time);
//! - `preservation+prefetch`: both;
//! - `sip-best`: the best static insertion per context, found by running every
//!   combination of MRU/LRU (2^n runs) and keeping the one with the lowest sum of CPI
//!   relative to each context's solo CPI.
//!
//! Time: each simulated access is preceded by 1000 k / APKI instructions at the
//! context's base CPI (k the sampling factor) and costs its LLC hit or miss latency
//! divided by the context's MLP. A slice ends when its cycles are used up. The solo
//! reference is each context alone on the core for its share of the run (no switches).

use super::access::{AccessProfile, StackStream};
use super::llc::{key, Insertion, Llc, TimeSampling};
use crate::sim::rng::{Rng, Stream};
use serde::Serialize;

/// The study's insertion policy (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum StudyPolicy {
    #[serde(rename = "mru")]
    Mru,
    #[serde(rename = "lru")]
    Lru,
    #[serde(rename = "preservation")]
    Preservation,
    #[serde(rename = "prefetch")]
    Prefetch,
    #[serde(rename = "preservation+prefetch")]
    PreservationPrefetch,
    #[serde(rename = "sip-best")]
    SipBest,
}

impl StudyPolicy {
    pub const NAMES: &'static [&'static str] = &[
        "mru",
        "lru",
        "preservation",
        "prefetch",
        "preservation+prefetch",
        "sip-best",
    ];
    pub fn name(self) -> &'static str {
        match self {
            StudyPolicy::Mru => "mru",
            StudyPolicy::Lru => "lru",
            StudyPolicy::Preservation => "preservation",
            StudyPolicy::Prefetch => "prefetch",
            StudyPolicy::PreservationPrefetch => "preservation+prefetch",
            StudyPolicy::SipBest => "sip-best",
        }
    }
    pub fn parse(s: &str) -> Option<StudyPolicy> {
        Some(match s {
            "mru" => StudyPolicy::Mru,
            "lru" => StudyPolicy::Lru,
            "preservation" => StudyPolicy::Preservation,
            "prefetch" => StudyPolicy::Prefetch,
            "preservation+prefetch" => StudyPolicy::PreservationPrefetch,
            "sip-best" => StudyPolicy::SipBest,
            _ => return None,
        })
    }
}

/// The cache and timing of the study.
#[derive(Clone, Debug)]
pub struct StudyConfig {
    pub size_kib: u64,
    pub ways: usize,
    pub line_bytes: u64,
    /// Set-sampling factor k: 1/k of the sets (and of each context's lines) simulated.
    pub sample: u64,
    pub freq_ghz: f64,
    pub hit_cycles: f64,
    pub miss_cycles: f64,
    pub slice_ns: u64,
    /// Core time of the whole run (all contexts together).
    pub duration_ns: u64,
    /// Statistics start after this much core time.
    pub warmup_ns: u64,
    pub policy: StudyPolicy,
    pub seed: u64,
}

impl StudyConfig {
    /// Sets simulated (after sampling); errors name the offending key.
    pub fn sets(&self) -> Result<usize, String> {
        let lines = self.size_kib * 1024 / self.line_bytes.max(1);
        let full = lines / self.ways.max(1) as u64;
        if self.line_bytes == 0 || !self.line_bytes.is_power_of_two() {
            return Err(format!(
                "host.cache.llc.line_bytes = {}: must be a power of two",
                self.line_bytes
            ));
        }
        if full == 0 || !full.is_power_of_two() {
            return Err(format!(
                "host.cache.llc: size_kib = {} with ways = {} and line_bytes = {} gives {} sets; allowed: a power of two",
                self.size_kib, self.ways, self.line_bytes, full
            ));
        }
        if self.sample == 0 || !self.sample.is_power_of_two() || self.sample > full {
            return Err(format!(
                "host.cache.llc.sample = {}: allowed a power of two from 1 to the number of sets ({full})",
                self.sample
            ));
        }
        Ok((full / self.sample) as usize)
    }
}

/// One context of the study.
#[derive(Clone, Debug)]
pub struct StudyContext {
    pub name: String,
    pub profile: &'static AccessProfile,
}

/// Per-context counters of one run (after warm-up).
#[derive(Clone, Debug, Default)]
struct Counters {
    instructions: f64,
    cycles: f64,
    accesses: u64,
    misses: u64,
    prefetches: u64,
    quanta: u64,
    lru_quanta: u64,
}

/// One row per context: the `llc` table of the report.
#[derive(Clone, Debug, Serialize)]
pub struct LlcRow {
    pub vm: String,
    pub model: String,
    pub class: String,
    pub policy: String,
    pub slice_ms: f64,
    pub contexts: u32,
    /// The static insertion (mru/lru) or "time-sampled".
    pub insertion: String,
    /// Share of quanta run with LRU insertion.
    pub lru_quanta_frac: f64,
    pub instructions: f64,
    pub cpi: f64,
    pub cpi_solo: f64,
    /// (cpi / cpi_solo - 1) x 100: the slowdown from sharing the cache.
    pub extra_cpi_pct: f64,
    pub mpki: f64,
    pub mpki_solo: f64,
    /// Memory traffic (demand misses plus prefetches), bytes per kilo-instruction.
    pub traffic_bytes_per_ki: f64,
    pub prefetch_bytes_per_ki: f64,
    pub simulated_accesses: u64,
}

/// How each context inserts in one run.
#[derive(Clone, Copy, Debug)]
enum PerContext {
    Static(Insertion),
    Sampled,
}

struct Ctx {
    stream: StackStream,
    rng: Rng,
    /// Instructions between two simulated accesses.
    gap: f64,
    hit_cost: f64,
    miss_cost: f64,
    base_cpi: f64,
    sampler: TimeSampling,
    saved: Vec<u64>,
}

fn make_ctx(cfg: &StudyConfig, c: &StudyContext, index: usize) -> Ctx {
    let p = c.profile;
    let mut stream = StackStream::new(p, cfg.line_bytes, cfg.sample);
    stream.prime();
    let apki = p.apki().max(1e-9);
    Ctx {
        stream,
        rng: Rng::stream(cfg.seed, Stream::Cache, index as u64),
        gap: 1000.0 * cfg.sample as f64 / apki,
        // Each simulated access stands for `sample` real ones.
        hit_cost: cfg.hit_cycles / p.mlp * cfg.sample as f64,
        miss_cost: cfg.miss_cycles / p.mlp * cfg.sample as f64,
        base_cpi: p.base_cpi,
        sampler: TimeSampling::default(),
        saved: Vec::new(),
    }
}

/// Runs the contexts time-sharing one core; returns per-context counters.
fn run_shared(
    cfg: &StudyConfig,
    contexts: &[StudyContext],
    how: &[PerContext],
    prefetch: bool,
) -> Result<Vec<Counters>, String> {
    let sets = cfg.sets()?;
    let mut llc = Llc::new(sets, cfg.ways)?;
    let mut ctxs: Vec<Ctx> = contexts
        .iter()
        .enumerate()
        .map(|(i, c)| make_ctx(cfg, c, i))
        .collect();
    let mut out = vec![Counters::default(); contexts.len()];
    let cyc_per_ns = cfg.freq_ghz;
    let slice_cycles = (cfg.slice_ns as f64 * cyc_per_ns).max(1.0);
    let end_cycles = cfg.duration_ns as f64 * cyc_per_ns;
    let warm_cycles = cfg.warmup_ns as f64 * cyc_per_ns;
    let mut now = 0.0f64;
    let n = contexts.len();
    let mut turn = 0usize;
    while now < end_cycles {
        let i = turn % n;
        turn += 1;
        let c = &mut ctxs[i];
        let ins = match how[i] {
            PerContext::Static(x) => x,
            PerContext::Sampled => c.sampler.insertion(),
        };
        let counting = now >= warm_cycles;
        let mut prefetched = 0u64;
        if prefetch && n > 1 {
            for &k in &c.saved {
                if llc.prefetch(k, ins) {
                    prefetched += 1;
                }
            }
        }
        let ctx_id = i as u16;
        let limit = slice_cycles.min(end_cycles - now);
        let mut cycles = 0.0f64;
        let mut instr = 0.0f64;
        let mut accesses = 0u64;
        let mut misses = 0u64;
        while cycles < limit {
            let line = c.stream.next(&mut c.rng);
            let hit = llc.access(key(ctx_id, line), ins);
            accesses += 1;
            instr += c.gap;
            cycles += c.gap * c.base_cpi;
            if hit {
                cycles += c.hit_cost;
            } else {
                misses += 1;
                cycles += c.miss_cost;
            }
        }
        now += cycles;
        if let PerContext::Sampled = how[i] {
            c.sampler.end_quantum(misses, instr.round() as u64);
        }
        if prefetch && n > 1 {
            c.saved.clear();
            llc.reused_blocks_of(ctx_id, &mut c.saved);
        }
        if counting {
            let o = &mut out[i];
            o.instructions += instr;
            o.cycles += cycles;
            o.accesses += accesses;
            o.misses += misses;
            o.prefetches += prefetched;
            o.quanta += 1;
            if ins == Insertion::Lru {
                o.lru_quanta += 1;
            }
        }
    }
    Ok(out)
}

fn cpi(c: &Counters) -> f64 {
    if c.instructions > 0.0 {
        c.cycles / c.instructions
    } else {
        f64::NAN
    }
}

fn per_ki(count: u64, sample: u64, instr: f64) -> f64 {
    if instr > 0.0 {
        count as f64 * sample as f64 * 1000.0 / instr
    } else {
        f64::NAN
    }
}

/// Runs the study: the mix under `cfg.policy` and each context alone (its solo
/// reference, MRU insertion, its share of the run). One row per context.
pub fn run_study(cfg: &StudyConfig, contexts: &[StudyContext]) -> Result<Vec<LlcRow>, String> {
    if contexts.is_empty() {
        return Err("the cache study needs at least one VM".into());
    }
    if contexts.len() > u16::MAX as usize {
        return Err("too many contexts for the cache study".into());
    }
    let n = contexts.len();
    // Solo references: each context alone, for its share of the core time.
    let mut solo = Vec::with_capacity(n);
    for (i, c) in contexts.iter().enumerate() {
        let mut one = cfg.clone();
        one.duration_ns = cfg.duration_ns / n as u64;
        one.warmup_ns = cfg.warmup_ns / n as u64;
        one.seed = cfg.seed ^ (0x5010 + i as u64);
        let r = run_shared(
            &one,
            std::slice::from_ref(c),
            &[PerContext::Static(Insertion::Mru)],
            false,
        )?;
        solo.push(r[0].clone());
    }
    let (how, prefetch): (Vec<PerContext>, bool) = match cfg.policy {
        StudyPolicy::Mru => (vec![PerContext::Static(Insertion::Mru); n], false),
        StudyPolicy::Lru => (vec![PerContext::Static(Insertion::Lru); n], false),
        StudyPolicy::Preservation => (vec![PerContext::Sampled; n], false),
        StudyPolicy::Prefetch => (vec![PerContext::Static(Insertion::Mru); n], true),
        StudyPolicy::PreservationPrefetch => (vec![PerContext::Sampled; n], true),
        StudyPolicy::SipBest => {
            if n > 8 {
                return Err(format!(
                    "host.cache.llc.insertion = \"sip-best\" tries 2^n static combinations; allowed with at most 8 VMs, got {n}"
                ));
            }
            let mut best: Option<(f64, Vec<PerContext>)> = None;
            for mask in 0u32..(1 << n) {
                let how: Vec<PerContext> = (0..n)
                    .map(|i| {
                        PerContext::Static(if mask >> i & 1 == 1 {
                            Insertion::Lru
                        } else {
                            Insertion::Mru
                        })
                    })
                    .collect();
                let r = run_shared(cfg, contexts, &how, false)?;
                let score: f64 = r
                    .iter()
                    .zip(solo.iter())
                    .map(|(m, s)| cpi(m) / cpi(s))
                    .sum();
                if best.as_ref().is_none_or(|(b, _)| score < *b) {
                    best = Some((score, how));
                }
            }
            let (_, how) = best.ok_or("no SIP combination ran")?;
            (how, false)
        }
    };
    let mix = run_shared(cfg, contexts, &how, prefetch)?;
    let rows = contexts
        .iter()
        .zip(mix.iter().zip(solo.iter()))
        .zip(how.iter())
        .map(|((c, (m, s)), h)| {
            let cpi_mix = cpi(m);
            let cpi_solo = cpi(s);
            LlcRow {
                vm: c.name.clone(),
                model: c.profile.model.to_string(),
                class: c.profile.class.name().to_string(),
                policy: cfg.policy.name().to_string(),
                slice_ms: cfg.slice_ns as f64 / 1e6,
                contexts: n as u32,
                insertion: match h {
                    PerContext::Static(i) => i.name().to_string(),
                    PerContext::Sampled => "time-sampled".to_string(),
                },
                lru_quanta_frac: if m.quanta > 0 {
                    m.lru_quanta as f64 / m.quanta as f64
                } else {
                    f64::NAN
                },
                instructions: m.instructions,
                cpi: cpi_mix,
                cpi_solo,
                extra_cpi_pct: (cpi_mix / cpi_solo - 1.0) * 100.0,
                mpki: per_ki(m.misses, cfg.sample, m.instructions),
                mpki_solo: per_ki(s.misses, cfg.sample, s.instructions),
                traffic_bytes_per_ki: per_ki(m.misses + m.prefetches, cfg.sample, m.instructions)
                    * cfg.line_bytes as f64,
                prefetch_bytes_per_ki: per_ki(m.prefetches, cfg.sample, m.instructions)
                    * cfg.line_bytes as f64,
                simulated_accesses: m.accesses,
            }
        })
        .collect();
    Ok(rows)
}

/// The study's configuration and contexts from a scenario with run.mode =
/// "cache_study": one pCPU, Xen credit (its slice is the time slice), one vCPU per VM,
/// each VM a catalog model with an access profile, host.cache.model = "llc".
pub fn from_scenario(
    sc: &crate::scenario::Scenario,
) -> Result<(StudyConfig, Vec<StudyContext>), crate::scenario::ScenarioError> {
    use crate::scenario::{CacheModel, ScenarioError, SchedulerConfig};
    if sc.host.pcpus != 1 {
        return Err(ScenarioError::new(
            "host.pcpus",
            format!(
                "{}: run.mode = \"cache_study\" time-shares one core; allowed: 1",
                sc.host.pcpus
            ),
        ));
    }
    if sc.host.cache.model != CacheModel::Llc {
        return Err(ScenarioError::new(
            "host.cache.model",
            "run.mode = \"cache_study\" needs host.cache.model = \"llc\"",
        ));
    }
    if !sc.run.compare.is_empty() {
        return Err(ScenarioError::new(
            "run.compare",
            "run.mode = \"cache_study\" compares each VM with its solo run itself; leave run.compare empty",
        ));
    }
    let slice_ms = match &sc.host.scheduler {
        SchedulerConfig::Credit(c) => c.slice_ms,
        other => {
            return Err(ScenarioError::new(
                "host.scheduler.kind",
                format!(
                    "{:?}: run.mode = \"cache_study\" round-robins with a fixed slice; allowed: \"credit\" (its slice_ms)",
                    other.name()
                ),
            ))
        }
    };
    let mut contexts = Vec::new();
    for (i, vm) in sc.vm.iter().enumerate() {
        if vm.vcpus != 1 {
            return Err(ScenarioError::new(
                format!("vm.{i}.vcpus"),
                format!(
                    "{}: the cache study's contexts are single-threaded; allowed: 1",
                    vm.vcpus
                ),
            ));
        }
        let model = vm.workload.model.as_str();
        let profile = super::access::profile(model).ok_or_else(|| {
            ScenarioError::new(
                format!("vm.{i}.workload.model"),
                format!(
                    "{model:?} has no LLC access profile; allowed: {}",
                    super::access::profiled_models().join(", ")
                ),
            )
        })?;
        contexts.push(StudyContext {
            name: vm.name.clone().unwrap_or_else(|| format!("vm{i}")),
            profile,
        });
    }
    let l = &sc.host.cache.llc;
    let cfg = StudyConfig {
        size_kib: l.size_kib,
        ways: l.ways as usize,
        line_bytes: l.line_bytes,
        sample: l.sample,
        freq_ghz: sc.host.clock_ghz,
        hit_cycles: l.hit_cycles,
        miss_cycles: l.miss_cycles,
        slice_ns: (slice_ms * 1e6).round() as u64,
        duration_ns: sc.run.duration.0 .0,
        warmup_ns: sc.run.warmup.0 .0,
        policy: l.insertion,
        seed: sc.seed,
    };
    cfg.sets()
        .map_err(|e| ScenarioError::new("host.cache.llc", e))?;
    if cfg.ways == 0 || cfg.ways > 64 {
        return Err(ScenarioError::new(
            "host.cache.llc.ways",
            format!("{}: allowed 1 to 64", cfg.ways),
        ));
    }
    for (k, v) in [
        ("hit_cycles", cfg.hit_cycles),
        ("miss_cycles", cfg.miss_cycles),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(ScenarioError::new(
                format!("host.cache.llc.{k}"),
                format!("{v}: allowed a finite number >= 0"),
            ));
        }
    }
    if cfg.slice_ns == 0 {
        return Err(ScenarioError::new(
            "host.scheduler.slice_ms",
            "must be positive for the cache study",
        ));
    }
    Ok((cfg, contexts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::access::profile;

    fn cfg(policy: StudyPolicy, slice_ms: f64) -> StudyConfig {
        StudyConfig {
            size_kib: 4096,
            ways: 16,
            line_bytes: 64,
            sample: 64,
            freq_ghz: 3.0,
            hit_cycles: 30.0,
            miss_cycles: 200.0,
            slice_ns: (slice_ms * 1e6) as u64,
            duration_ns: 400_000_000,
            warmup_ns: 100_000_000,
            policy,
            seed: 1,
        }
    }

    fn ctxs(models: &[&str]) -> Vec<StudyContext> {
        models
            .iter()
            .enumerate()
            .map(|(i, m)| StudyContext {
                name: format!("vm{i}"),
                profile: profile(m).expect("profile"),
            })
            .collect()
    }

    #[test]
    fn deterministic_and_alone_equals_solo() {
        let c = ctxs(&["spec-omnetpp"]);
        let a = run_study(&cfg(StudyPolicy::Mru, 1.0), &c).expect("runs");
        let b = run_study(&cfg(StudyPolicy::Mru, 1.0), &c).expect("runs");
        assert_eq!(a[0].cpi, b[0].cpi);
        // Alone, the mix is the solo run with another seed: within noise.
        assert!(a[0].extra_cpi_pct.abs() < 3.0, "{}", a[0].extra_cpi_pct);
    }

    #[test]
    fn thrashing_neighbour_hurts_a_cache_friendly_context_and_lru_insertion_protects_it() {
        let c = ctxs(&["spec-omnetpp", "spec-libquantum"]);
        let mru = run_study(&cfg(StudyPolicy::Mru, 1.0), &c).expect("runs");
        assert!(mru[0].extra_cpi_pct > 5.0, "{:?}", mru[0]);
        let pres = run_study(&cfg(StudyPolicy::Preservation, 1.0), &c).expect("runs");
        assert!(pres[1].lru_quanta_frac > 0.5, "{:?}", pres[1]);
        assert!(pres[0].extra_cpi_pct < mru[0].extra_cpi_pct);
        let pf = run_study(&cfg(StudyPolicy::Prefetch, 1.0), &c).expect("runs");
        assert!(pf[0].prefetch_bytes_per_ki > 0.0);
    }

    #[test]
    fn bad_geometry_is_refused() {
        let mut c = cfg(StudyPolicy::Mru, 1.0);
        c.size_kib = 3000;
        assert!(c.sets().is_err());
        let mut c = cfg(StudyPolicy::Mru, 1.0);
        c.sample = 3;
        assert!(c.sets().unwrap_err().contains("sample"));
    }
}
