//! SPEC-CPU2006-like single-threaded contexts for the cache study: compute only, with a
//! cache-resident working set by class. CPU: fits the private L2 (256 KiB); CFR
//! (cache-friendly): fits the LLC and reuses it (4 MiB); THR (thrashing): streams through
//! far more than the LLC (64 MiB). Classes in docs/workloads.md.

use super::*;

const PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "work",
        default: "\"100ms\"",
        help: "CPU time per thread",
    },
    FOREVER,
];

pub(crate) const CPU_KIB: u64 = 256;
pub(crate) const CFR_KIB: u64 = 4_096;
pub(crate) const THR_KIB: u64 = 65_536;

fn build(p: &Params, t: u32) -> Result<Groups, WorkloadError> {
    let prog = chunked(p.dur("work")?, Nanos::from_ms(1), p.boolean("forever")?);
    Ok(vec![("main".into(), t, vec![prog])])
}

macro_rules! spec_model {
    ($id:ident, $name:literal, $class:literal, $fp:expr) => {
        pub(super) const $id: ModelInfo = ModelInfo {
            name: $name,
            description: concat!(
                "SPEC CPU2006 ",
                $class,
                "-class-like context (",
                $name,
                "): single-threaded compute with the class's cache footprint"
            ),
            params: PARAMS,
            footprint_kib: $fp,
            queue_capacity: QUEUE_DEPTH,
            processes: Processes::EachThread,
            build,
        };
    };
}

spec_model!(NAMD, "spec-namd", "CPU", CPU_KIB);
spec_model!(SJENG, "spec-sjeng", "CPU", CPU_KIB);
spec_model!(H264, "spec-h264", "CPU", CPU_KIB);
spec_model!(ASTAR, "spec-astar", "CPU", CPU_KIB);
spec_model!(SOPLEX, "spec-soplex", "CFR", CFR_KIB);
spec_model!(BZIP2, "spec-bzip2", "CFR", CFR_KIB);
spec_model!(OMNETPP, "spec-omnetpp", "CFR", CFR_KIB);
spec_model!(GCC, "spec-gcc", "CFR", CFR_KIB);
spec_model!(XALANCBMK, "spec-xalancbmk", "CFR", CFR_KIB);
spec_model!(MILC, "spec-milc", "THR", THR_KIB);
spec_model!(LIBQUANTUM, "spec-libquantum", "THR", THR_KIB);
spec_model!(MCF, "spec-mcf", "THR", THR_KIB);
