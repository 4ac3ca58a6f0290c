//! NPB-like bulk-synchronous OpenMP kernels. Iteration counts are class C's (SP 400, BT
//! 200, LU 250, MG 20, IS 10, CG 75); barriers are libgomp's spin-then-block barriers
//! (GOMP_SPINCOUNT 300,000 spins ≈ 1 ms). Serial time per iteration and barriers per
//! iteration are assumed from the kernels' structure (docs/workloads.md).

use super::*;

const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "scale",
        default: "0.02",
        help: "fraction of the class C iteration count run",
    },
    ParamInfo {
        name: "grain",
        default: "0.1",
        help: "fraction of a class C iteration's work per iteration (0.1 ≈ a smaller grid)",
    },
    ParamInfo {
        name: "spin",
        default: "\"1ms\"",
        help: "barrier spin before blocking (libgomp default 300,000 spins)",
    },
    FOREVER,
];

#[derive(Clone, Copy)]
enum Kind {
    Bt,
    Cg,
    Ep,
    Is,
    Lu,
    Mg,
    Sp,
}

const ALL: [Kind; 7] = [
    Kind::Bt,
    Kind::Cg,
    Kind::Ep,
    Kind::Is,
    Kind::Lu,
    Kind::Mg,
    Kind::Sp,
];

/// (name, class C iterations, serial seconds per iteration (assumed)).
fn facts(k: Kind) -> (&'static str, f64, f64) {
    match k {
        Kind::Bt => ("bt", 200.0, 4.0),
        Kind::Cg => ("cg", 75.0, 2.0),
        // EP: 2^16 batches of 2^16 pairs (class C, M = 32); ≈120 s serial in all.
        Kind::Ep => ("ep", 65_536.0, 120.0 / 65_536.0),
        Kind::Is => ("is", 10.0, 0.5),
        Kind::Lu => ("lu", 250.0, 2.4),
        Kind::Mg => ("mg", 20.0, 2.0),
        Kind::Sp => ("sp", 400.0, 2.0),
    }
}

/// One kernel's program for thread `idx` of `t`: (iterations, body of one iteration,
/// prologue, epilogue).
#[allow(clippy::type_complexity)]
fn kernel(
    k: Kind,
    p: &Params,
    t: u32,
    idx: u32,
) -> Result<(u64, Vec<OpSpec>, Vec<OpSpec>, Vec<OpSpec>), WorkloadError> {
    let lead = idx == 0;
    let grain = p.float("grain", 1e-6, 1e3)?;
    let spin = p.dist("spin")?;
    let (name, its, serial) = facts(k);
    let n = p.scaled(its)?;
    let per_it = serial * 1e9 * grain / t as f64; // per thread
    let sb = |i: usize| spin_barrier(&format!("npb_{name}{i}"), spin.clone());
    let phases = |count: usize, share: f64| {
        let mut v = Vec::new();
        for i in 0..count {
            v.push(cpu(dlog(per_it * share / count as f64, 0.05)));
            v.push(sb(i));
        }
        v
    };
    let mut epi = Vec::new();
    let mut pro = Vec::new();
    let body = match k {
        // x/y/z solves, rhs, add
        Kind::Bt => phases(5, 1.0),
        // rhs, txinvr, x_solve, ninvr, y_solve, pinvr, z_solve, tzetar, add
        Kind::Sp => phases(9, 1.0),
        // 25 inner CG iterations of ≈5 reductions/parallel loops each
        Kind::Cg => phases(125, 1.0),
        // key ranking: local counts, prefix sums, redistribution
        Kind::Is => phases(3, 1.0),
        Kind::Ep => {
            epi.extend(critical("npb_ep_sum", dc(1_000.0)));
            epi.push(sb(0));
            vec![cpu(dlog(per_it, 0.02))]
        }
        // rhs, then the lower and upper wavefront sweeps over 160 k-planes each, between
        // barriers. In a sweep thread `idx` waits for thread idx-1's flag for the plane
        // and clears it (sync_left), computes its part of the plane, then waits until
        // its own flag has been cleared and sets it (sync_right): a one-slot pipeline
        // between neighbours, busy-waited with no limit (NPB3.3-OMP LU, ssor.f). A
        // flag is a pair of semaphores (set, cleared) waited on by spinning; the
        // consumer clears its producer's flag once at the start (isync = 0).
        Kind::Lu => {
            let forever = || Dist::constant(crate::sim::Nanos(u64::MAX));
            let wait = |sem: String| {
                OpSpec::SemSpinWait(crate::workload::program::SemSpinSpec {
                    sem,
                    spin: forever(),
                })
            };
            let post = |sem: String| OpSpec::SemPost(sem);
            let plane = per_it * 0.8 / 320.0;
            let mut step = Vec::new();
            if idx > 0 {
                step.push(wait(format!("npb_lu_set{}", idx - 1)));
                step.push(post(format!("npb_lu_clear{}", idx - 1)));
                pro.push(post(format!("npb_lu_clear{}", idx - 1)));
            }
            step.push(cpu(dlog(plane, 0.05)));
            if idx + 1 < t {
                step.push(wait(format!("npb_lu_clear{idx}")));
                step.push(post(format!("npb_lu_set{idx}")));
                // After the last plane: its flag cleared, as the next run's first
                // sync_right would wait (keeps the pair balanced when the suite loops).
                epi.push(wait(format!("npb_lu_clear{idx}")));
            }
            vec![
                cpu(dlog(per_it * 0.2, 0.05)),
                sb(0),
                rep(160, step.clone()),
                sb(2),
                rep(160, step),
                sb(1),
            ]
        }
        // V-cycle over 8 levels, work shrinking 8x per level, 2 barriers per level and
        // direction.
        Kind::Mg => {
            let w: Vec<f64> = (0..8).map(|l| 0.125f64.powi(l)).collect();
            let tot: f64 = 2.0 * w.iter().sum::<f64>();
            let mut v = Vec::new();
            let mut i = 0;
            for l in (0..8).chain((0..8).rev()) {
                for _ in 0..2 {
                    v.push(cpu(dlog(per_it * w[l] / tot / 2.0, 0.05)));
                    v.push(sb(i % 4));
                    i += 1;
                }
            }
            v
        }
    };
    let mut body = body;
    body.extend(count_if(lead));
    Ok((n, body, pro, epi))
}

/// The OpenMP team: one group per thread where the threads' programs differ (LU's
/// neighbour flags), else the lead thread and the rest.
fn team(
    k: &[Kind],
    t: u32,
    prog: impl Fn(u32) -> Result<Vec<OpSpec>, WorkloadError>,
) -> Result<Groups, WorkloadError> {
    if k.iter().any(|k| matches!(k, Kind::Lu)) && t > 1 {
        (0..t)
            .map(|i| Ok((format!("omp{i}"), 1, prog(i)?)))
            .collect()
    } else {
        let progs = [prog(0)?, prog(1.min(t - 1))?];
        Ok(lead_counts("omp", t, |lead| {
            progs[usize::from(!lead)].clone()
        }))
    }
}

fn single(k: Kind, p: &Params, t: u32) -> Result<Groups, WorkloadError> {
    let forever = p.boolean("forever")?;
    team(&[k], t, |i| {
        let (n, body, pro, epi) = kernel(k, p, t, i)?;
        let mut prog = pro;
        prog.push(outer(forever, n, body));
        prog.extend(epi);
        Ok(prog)
    })
}

macro_rules! npb_model {
    ($id:ident, $kind:expr, $name:literal, $desc:literal, $fp:expr) => {
        pub(super) const $id: ModelInfo = ModelInfo {
            name: $name,
            description: $desc,
            params: PARAMS,
            footprint_kib: $fp,
            queue_capacity: QUEUE_DEPTH,
            processes: Processes::One,
            build: |p, t| single($kind, p, t),
        };
    };
}

npb_model!(BT, Kind::Bt, "npb-bt", "NPB-BT-like: block-tridiagonal solver, 5 spin barriers per iteration (class C: 200 iterations)", 46_080);
npb_model!(CG, Kind::Cg, "npb-cg", "NPB-CG-like: conjugate gradient, ≈125 short barrier phases per iteration (class C: 75 iterations)", 65_536);
npb_model!(
    EP,
    Kind::Ep,
    "npb-ep",
    "NPB-EP-like: embarrassingly parallel random pairs, one reduction at the end",
    64
);
npb_model!(
    IS,
    Kind::Is,
    "npb-is",
    "NPB-IS-like: integer sort, 3 barriers per iteration (class C: 10 iterations)",
    65_536
);
npb_model!(LU, Kind::Lu, "npb-lu", "NPB-LU-like: SSOR with pipelined wavefront sweeps (neighbour flags busy-waited without limit) (class C: 250 iterations)", 38_912);
npb_model!(MG, Kind::Mg, "npb-mg", "NPB-MG-like: multigrid V-cycles, 32 barriers per iteration over shrinking levels (class C: 20 iterations)", 65_536);
npb_model!(SP, Kind::Sp, "npb-sp", "NPB-SP-like: scalar-pentadiagonal solver, 9 spin barriers per iteration (class C: 400 iterations)", 46_080);

pub(super) const SUITE: ModelInfo = ModelInfo {
    name: "npb-suite",
    description:
        "the seven NPB-like kernels (BT, CG, EP, IS, LU, MG, SP) one after another in one VM",
    params: PARAMS,
    footprint_kib: 65_536,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        let forever = p.boolean("forever")?;
        team(&ALL, t, |i| {
            let mut all = Vec::new();
            for k in ALL {
                let (n, body, pro, epi) = kernel(k, p, t, i)?;
                all.extend(pro);
                all.push(rep(n, body));
                all.extend(epi);
            }
            Ok(vec![outer(forever, 1, all)])
        })
    },
};
