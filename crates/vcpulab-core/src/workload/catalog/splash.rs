//! SPLASH-2x-like models. Locks are pthread mutexes; SPLASH's barrier is a mutex +
//! condvar blocking barrier (no spinning), modelled by the language's futex `barrier`.
//! The number of distinct lock and barrier sites in each loop follows the static call
//! sites (barrier / lock / array-lock): cholesky 4/7/0, lu_ncb 5/1/0, volrend 13/8/6,
//! water_nsquared 9/5/3, water_spatial 9/8/0. Dynamic counts and compute times are not
//! published: see docs/workloads.md for the assumptions.

use super::*;

const fn scale(default: &'static str) -> ParamInfo {
    ParamInfo {
        name: "scale",
        default,
        help: SCALE_HELP,
    }
}

// ---------------------------------------------------------------- cholesky

pub(super) const CHOLESKY: ModelInfo = ModelInfo {
    name: "cholesky",
    description: "cholesky-like: supernodal fan-out factorization from a shared task queue; 7 lock sites, 4 barriers",
    params: &[scale("1"), FOREVER],
    footprint_kib: 4_096,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // (assumed) 2,000 tasks of ≈200 us each, lognormal sigma 1 (supernodes vary).
        let tasks = p.scaled(2_000.0)?.div_ceil(t as u64);
        let task = 200_000.0 / 1.65;
        let forever = p.boolean("forever")?;
        let mut g = Vec::new();
        for i in 0..t {
            let off = mix(i as u64);
            let mut body = critical("ch_taskq", dc(500.0)); // get a task
            body.extend(critical("ch_mem", dc(300.0))); // allocate an update block
            body.push(cpu(dlog(task, 1.0)));
            body.extend(critical(&format!("ch_col{}", off % 32), dc(2_000.0)));
            body.extend(critical(&format!("ch_col{}", (off + 13) % 32), dc(2_000.0)));
            body.extend(critical("ch_mem", dc(300.0))); // free it
            body.extend(critical("ch_taskq", dc(500.0))); // enqueue the dependent task
            body.push(count(1));
            let mut prog = vec![cpu(dc(500_000.0 / t as f64)), barrier("ch_b0")];
            let mut step = vec![rep(tasks, body), barrier("ch_b1")];
            step.extend(critical("ch_done", dc(300.0)));
            step.extend([cpu(dlog(2e6 / t as f64, 0.2)), barrier("ch_b2")]);
            prog.push(outer(forever, 1, step));
            prog.push(barrier("ch_b3"));
            g.push((format!("t{i}"), 1, prog));
        }
        Ok(g)
    },
};

// ---------------------------------------------------------------- lu_ncb

pub(super) const LU_NCB: ModelInfo = ModelInfo {
    name: "lu_ncb",
    description: "lu_ncb-like: blocked dense LU (non-contiguous blocks); per step the owner factors the diagonal, then perimeter and interior updates, 3 barriers per step",
    params: &[
        scale("0.05"),
        ParamInfo {
            name: "blocks",
            default: "32",
            help: "blocks per matrix dimension (steps)",
        },
        FOREVER,
    ],
    footprint_kib: 31_872,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        let s = p.float("scale", 1e-6, 1e3)?;
        let k = p.int("blocks", 2, 4_096)? as u64;
        let forever = p.boolean("forever")?;
        // (assumed) 2/3 n^3 flops for n = 2048 at 1 flop/ns, spread over block updates.
        let total = 2.0 / 3.0 * 2048f64.powi(3) * s;
        let units: f64 = (0..k)
            .map(|j| {
                let r = (k - j - 1) as f64;
                1.0 + 2.0 * r + r * r
            })
            .sum();
        let u = total / units;
        let mut g = Vec::new();
        for i in 0..t {
            let mut steps = Vec::new();
            for j in 0..k {
                let r = (k - j - 1) as f64;
                if j % t as u64 == i as u64 {
                    steps.push(cpu(dc(u)));
                }
                steps.push(barrier("lu_a"));
                if r > 0.0 {
                    steps.push(cpu(dlog(2.0 * r * u / t as f64, 0.1)));
                }
                steps.push(barrier("lu_b"));
                if r > 0.0 {
                    steps.push(cpu(dlog(r * r * u / t as f64, 0.1)));
                }
                steps.push(barrier("lu_c"));
                if i == 0 {
                    steps.push(count(1));
                }
            }
            let mut prog = vec![barrier("lu_init"), outer(forever, 1, steps)];
            prog.extend(critical("lu_stats", dc(500.0)));
            prog.push(barrier("lu_end"));
            g.push((format!("t{i}"), 1, prog));
        }
        Ok(g)
    },
};

// ---------------------------------------------------------------- volrend

pub(super) const VOLREND: ModelInfo = ModelInfo {
    name: "volrend",
    description: "volrend-like: ray-cast frames; image blocks from per-thread queues (array locks) with stealing, global counters, barriers per frame",
    params: &[
        scale("1"),
        ParamInfo {
            name: "frames",
            default: "4",
            help: "frames rendered",
        },
        FOREVER,
    ],
    footprint_kib: 2_752,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        let s = p.float("scale", 1e-6, 1e3)?;
        let frames = p.int("frames", 1, 1_000_000)? as u64;
        let forever = p.boolean("forever")?;
        // (assumed) 100 ms of CPU per frame in 1,024 blocks; 20% of blocks are stolen.
        let blocks = ((1_024.0 * s).round() as u64).div_ceil(t as u64).max(1);
        let block = 100e6 / 1_024.0;
        let own = (blocks * 4).div_ceil(5);
        let steal = blocks - own;
        let mut g = Vec::new();
        for i in 0..t {
            let mut prog = Vec::new();
            // setup: normals, opacity, octree (3 barriers)
            for b in 0..3 {
                prog.push(cpu(dlog(5e6 * s / t as f64, 0.1)));
                prog.push(barrier(&format!("vr_setup{b}")));
            }
            let mut own_b = critical(&format!("vr_q{i}"), dc(300.0));
            own_b.push(cpu(dlog(block, 0.5)));
            let mut steal_b = critical(&format!("vr_q{}", (i + 1) % t), dc(300.0));
            steal_b.push(cpu(dlog(block, 0.5)));
            let mut frame = vec![
                barrier("vr_f0"),
                cpu(dc(50_000.0)),
                barrier("vr_f1"),
                rep(own, own_b),
            ];
            if steal > 0 {
                frame.push(rep(steal, steal_b));
            }
            frame.extend(critical("vr_count", dc(300.0)));
            frame.push(barrier("vr_f2"));
            if i == 0 {
                frame.push(cpu(dc(1e6 * s))); // write the image
                frame.push(count(1));
            }
            frame.push(barrier("vr_f3"));
            prog.push(outer(forever, frames, frame));
            g.push((format!("t{i}"), 1, prog));
        }
        Ok(g)
    },
};

// ---------------------------------------------------------------- water

fn water(
    p: &Params,
    t: u32,
    prefix: &str,
    step_cpu: f64,
    mol_locks: f64,
    sum_sites: usize,
) -> Result<Groups, WorkloadError> {
    let s = p.float("scale", 1e-6, 1e3)?;
    let steps = p.int("steps", 1, 1_000_000)? as u64;
    let forever = p.boolean("forever")?;
    let per = step_cpu * s / t as f64;
    let locks = ((mol_locks * s) / t as f64).round() as u64;
    let mut g = Vec::new();
    for i in 0..t {
        let off = mix(i as u64);
        let mut prog = Vec::new();
        for b in 0..3 {
            prog.push(cpu(dlog(per * 0.02, 0.1)));
            prog.push(barrier(&format!("{prefix}_setup{b}")));
        }
        let mut step = Vec::new();
        // predic, intraf, interf, correc, bndry, kineti/poteng: 6 barriers per step
        let shares = [0.05, 0.10, 0.70, 0.05, 0.02, 0.08];
        for (ph, sh) in shares.iter().enumerate() {
            if ph == 2 && locks > 0 {
                let mut body = Vec::new();
                for j in 0..4u64 {
                    body.push(cpu(dexp(per * sh / (4 * locks) as f64)));
                    body.extend(critical(
                        &format!("{prefix}_mol{}", (off + j * 5) % 64),
                        dc(400.0),
                    ));
                }
                step.push(rep(locks.div_ceil(4), body));
            } else {
                step.push(cpu(dlog(per * sh, 0.1)));
            }
            if ph >= 2 && ph - 2 < sum_sites {
                step.extend(critical(&format!("{prefix}_sum{}", ph - 2), dc(500.0)));
            }
            step.push(barrier(&format!("{prefix}_b{ph}")));
        }
        for extra in 4..sum_sites {
            step.extend(critical(&format!("{prefix}_sum{extra}"), dc(500.0)));
        }
        if i == 0 {
            step.push(count(1));
        }
        prog.push(outer(forever, steps, step));
        g.push((format!("t{i}"), 1, prog));
    }
    Ok(g)
}

const STEPS: ParamInfo = ParamInfo {
    name: "steps",
    default: "3",
    help: "time steps simulated",
};

pub(super) const WATER_NSQUARED: ModelInfo = ModelInfo {
    name: "water_nsquared",
    description: "water_nsquared-like: O(n^2) molecular dynamics; per-molecule array locks in the force phase, global-sum locks, 6 barriers per step",
    params: &[scale("0.05"), STEPS, FOREVER],
    footprint_kib: 1_856,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // (assumed) 4,096 molecules: 8.4 M pairs x 100 ns per step; a molecule lock per
        // updated molecule (n/2 per thread-pair sweep).
        water(p, t, "wn", 4_096.0 * 4_096.0 / 2.0 * 100.0, 4_096.0 * 4.0, 5)
    },
};

pub(super) const WATER_SPATIAL: ModelInfo = ModelInfo {
    name: "water_spatial",
    description: "water_spatial-like: cell-list molecular dynamics; only global-sum locks (8 sites), 6 barriers per step",
    params: &[scale("0.1"), STEPS, FOREVER],
    footprint_kib: 41_024,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // (assumed) 4,096 molecules in cells: 200 ms of CPU per step, no molecule locks.
        water(p, t, "ws", 200e6, 0.0, 8)
    },
};
