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

/// One kernel's program: (iterations, body of one iteration, epilogue).
fn kernel(
    k: Kind,
    p: &Params,
    t: u32,
    lead: bool,
) -> Result<(u64, Vec<OpSpec>, Vec<OpSpec>), WorkloadError> {
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
        // rhs, then the lower and upper wavefront sweeps over 160 k-planes synchronised
        // by busy-waited flags (modelled as a spin barrier with the same spin budget).
        Kind::Lu => {
            let mut v = vec![cpu(dlog(per_it * 0.2, 0.05)), sb(0)];
            let flag = spin_barrier("npb_luflag", spin.clone());
            let plane = per_it * 0.8 / 320.0;
            v.push(rep(320, vec![cpu(dlog(plane, 0.05)), flag]));
            v.push(sb(1));
            v
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
    Ok((n, body, epi))
}

fn single(k: Kind, p: &Params, t: u32) -> Result<Groups, WorkloadError> {
    let forever = p.boolean("forever")?;
    let progs = [kernel(k, p, t, true)?, kernel(k, p, t, false)?];
    Ok(lead_counts("omp", t, |lead| {
        let (n, body, epi) = progs[usize::from(!lead)].clone();
        let mut prog = vec![outer(forever, n, body)];
        prog.extend(epi);
        prog
    }))
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
npb_model!(LU, Kind::Lu, "npb-lu", "NPB-LU-like: SSOR with pipelined wavefront sweeps (busy-waited plane flags) (class C: 250 iterations)", 38_912);
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
        let mut progs = Vec::new();
        for lead in [true, false] {
            let mut all = Vec::new();
            for k in ALL {
                let (n, body, epi) = kernel(k, p, t, lead)?;
                all.push(rep(n, body));
                all.extend(epi);
            }
            progs.push(all);
        }
        Ok(lead_counts("omp", t, |lead| {
            vec![outer(forever, 1, progs[usize::from(!lead)].clone())]
        }))
    },
};
