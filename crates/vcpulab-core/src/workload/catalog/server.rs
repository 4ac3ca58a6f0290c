//! Server and system models: kernbench, dbench, ebizzy, sysbench OLTP / MySQL, iperf.
//! Kernel spinlock hold times default to uniform(200ns, 1.4us): most kernel spinlocks are
//! held for less than 2^12 cycles (≈1.4 us at 3 GHz), per the KVM PLE-window comment.

use super::*;

// ---------------------------------------------------------------- kernbench

pub(super) const KERNBENCH: ModelInfo = ModelInfo {
    name: "kernbench",
    description: "kernbench-like: make -jN: short compile processes; compute bursts, syscalls under kernel spinlocks (fork/exec, page cache), blocking waits; ≈8% kernel time",
    params: &[
        ParamInfo {
            name: "jobs",
            default: "16",
            help: "compile jobs (processes) in all, run by `threads` make workers (-j)",
        },
        ParamInfo {
            name: "cycles",
            default: "30",
            help: "compute/block cycles per job (a real cc1 job has ≈800)",
        },
        FOREVER,
    ],
    footprint_kib: 8_192,
    build: |p, t| {
        // 16 CPUs, -j16: 3919 s user, 339 s system, 575 s elapsed, 1.61 M sleeps. Per
        // sleep: 2.43 ms user, 0.21 ms kernel, 3.07 ms asleep (derived).
        let jobs = p.int("jobs", 1, 1_000_000)? as u64;
        let cycles = p.int("cycles", 1, 1_000_000)? as u64;
        let forever = p.boolean("forever")?;
        let (user, kernel, asleep) = (2.43e6, 0.21e6, 3.07e6);
        // kernel time per cycle: 8 short spinlock sections (page cache, dentries, LRU,
        // files) plus lock-free syscall work.
        let sections = 8.0 * 800.0;
        let cycle = vec![
            cpu(dexp(user)),
            kspin("kb_i_pages", khold()),
            kspin("kb_dcache", khold()),
            kern(dexp((kernel - sections) / 2.0)),
            kspin("kb_lru", khold()),
            kspin("kb_files", khold()),
            kspin("kb_i_pages", khold()),
            kspin("kb_dcache", khold()),
            kern(dexp((kernel - sections) / 2.0)),
            kspin("kb_lru", khold()),
            kspin("kb_zone", khold()),
            io(dexp(asleep)),
            count(1),
        ];
        let job = vec![
            // fork + exec + exit of the job's process (assumed 150 us of kernel work)
            kspin("kb_tasklist", khold()),
            kern(dexp(100_000.0)),
            kspin("kb_mm", khold()),
            rep(cycles, cycle),
            kern(dexp(50_000.0)),
            kspin("kb_tasklist", khold()),
        ];
        Ok(split_groups("make", jobs, t, forever, job))
    },
};

// ---------------------------------------------------------------- dbench

pub(super) const DBENCH: ModelInfo = ModelInfo {
    name: "dbench",
    description: "dbench-like: clients replaying file-server operations through the file system: syscalls under a few hot dentry/inode/journal spinlocks, occasional I/O",
    params: &[
        ParamInfo {
            name: "ops",
            default: "8000",
            help: "file-system operations in all, split over the clients",
        },
        FOREVER,
    ],
    footprint_kib: 1_024,
    build: |p, t| {
        // (assumed) an operation: 3 us user, 12 us kernel with 4 spinlock sections on 3
        // hot locks; one op in 32 waits for the disk (journal commit, 200 us).
        let ops = p.int("ops", 1, 100_000_000)? as u64;
        let forever = p.boolean("forever")?;
        let mut body = Vec::new();
        for j in 0..32 {
            body.push(cpu(dexp(3_000.0)));
            body.push(kern(dexp(4_000.0)));
            body.push(kspin("db_dcache", khold()));
            body.push(kspin("db_inode", khold()));
            body.push(kern(dexp(4_000.0)));
            body.push(kspin("db_dcache", khold()));
            body.push(kspin(if j % 4 == 0 { "db_journal" } else { "db_inode" }, khold()));
            body.push(kern(dexp(2_000.0)));
            if j == 31 {
                body.push(io(dexp(200_000.0)));
            }
            body.push(count(1));
        }
        Ok(split_groups("client", ops.div_ceil(32), t, forever, body))
    },
};

// ---------------------------------------------------------------- ebizzy

pub(super) const EBIZZY: ModelInfo = ModelInfo {
    name: "ebizzy",
    description: "ebizzy-like: 2 x threads; each loop mmaps 512 KiB, copies, binary-searches, munmaps (TLB shootdown)",
    params: &[
        ParamInfo {
            name: "iterations",
            default: "2400",
            help: "loops in all, split over the 2 x threads workers",
        },
        FOREVER,
    ],
    footprint_kib: 5_120,
    build: |p, t| {
        // 512 KiB per loop (ebizzy -m). (assumed) mmap 3 us + 128 page faults x 0.5 us,
        // copy 512 KiB at ≈10 GB/s = 50 us, search 20 us, munmap 15 us + shootdown. The
        // mmap/munmap write side of mmap_sem is modelled as a mutex.
        let n = p.int("iterations", 1, 100_000_000)? as u64;
        let forever = p.boolean("forever")?;
        let body = vec![
            lock("eb_mmap_sem"),
            kern(dc(3_000.0)),
            unlock("eb_mmap_sem"),
            kern(dexp(64_000.0)),
            kspin("eb_zone", khold()),
            cpu(dlog(50_000.0, 0.1)),
            cpu(dlog(20_000.0, 0.3)),
            lock("eb_mmap_sem"),
            kern(dc(15_000.0)),
            kspin("eb_zone", khold()),
            tlb(),
            unlock("eb_mmap_sem"),
            count(1),
        ];
        Ok(split_groups("worker", n, 2 * t, forever, body))
    },
};

// ---------------------------------------------------------------- sysbench OLTP / MySQL

const OLTP_PARAMS: &[ParamInfo] = &[
    ParamInfo {
        name: "transactions",
        default: "200",
        help: "transactions in all, split over the connections",
    },
    ParamInfo {
        name: "rtt",
        default: "\"exp(30us)\"",
        help: "wait for the client's next statement (network round trip)",
    },
    ParamInfo {
        name: "fsync",
        default: "\"exp(100us)\"",
        help: "redo-log flush at COMMIT",
    },
    FOREVER,
];

fn oltp(p: &Params, t: u32, prefix: &str) -> Result<Groups, WorkloadError> {
    let n = p.int("transactions", 1, 100_000_000)? as u64;
    let rtt = p.dist("rtt")?;
    let fsync = p.dist("fsync")?;
    let forever = p.boolean("forever")?;
    let m = |s: &str| format!("{prefix}_{s}");
    // A statement: receive (io), parse (5 us, assumed), execute with InnoDB mutex
    // sections (buffer pool page lookups, lock table), send (kernel 3 us).
    let stmt = |exec: f64, pages: u64, lock_sys: bool| {
        let mut v = vec![io(rtt.clone()), kern(dc(3_000.0)), cpu(dexp(5_000.0))];
        for _ in 0..pages {
            v.extend(critical(&m("buf_pool"), dc(300.0)));
            v.push(cpu(dexp(exec / pages as f64)));
        }
        if lock_sys {
            v.extend(critical(&m("lock_sys"), dc(1_000.0)));
        }
        v.push(kern(dc(3_000.0)));
        v
    };
    // BEGIN, 10 point selects, 4 range queries of 100 rows, 2 updates, 1 delete, 1 insert,
    // COMMIT (sysbench oltp read/write).
    let mut tx = stmt(1_000.0, 1, false);
    tx.push(lock(&m("trx_sys")));
    tx.push(cpu(dc(500.0)));
    tx.push(unlock(&m("trx_sys")));
    tx.push(rep(10, stmt(10_000.0, 3, false)));
    tx.push(rep(4, stmt(60_000.0, 4, false)));
    tx.push(rep(2, stmt(20_000.0, 3, true)));
    tx.extend(stmt(20_000.0, 3, true));
    tx.extend(stmt(25_000.0, 4, true));
    // COMMIT: trx_sys, log_sys, then the redo-log flush
    tx.extend(stmt(2_000.0, 1, false));
    tx.extend(critical(&m("trx_sys"), dc(800.0)));
    tx.extend(critical(&m("log_sys"), dc(1_500.0)));
    tx.push(io(fsync));
    tx.push(count(1));
    Ok(split_groups("connection", n, t, forever, tx))
}

pub(super) const SYSBENCH_OLTP: ModelInfo = ModelInfo {
    name: "sysbench-oltp",
    description: "sysbench-OLTP-like: a server thread per connection running read/write transactions; InnoDB mutex contention, I/O; count = transactions",
    params: OLTP_PARAMS,
    footprint_kib: 8_192,
    build: |p, t| oltp(p, t, "oltp"),
};

pub(super) const MYSQL: ModelInfo = ModelInfo {
    name: "mysql",
    description:
        "MySQL-like server under the sysbench OLTP read/write mix (same model as sysbench-oltp)",
    params: OLTP_PARAMS,
    footprint_kib: 8_192,
    build: |p, t| oltp(p, t, "mysql"),
};

// ---------------------------------------------------------------- iperf

pub(super) const IPERF: ModelInfo = ModelInfo {
    name: "iperf",
    description: "iperf-like TCP receiver: a thread per stream blocks until data arrives (device interrupt), then the kernel copies 128 KB; count = KiB received",
    params: &[
        ParamInfo {
            name: "reads",
            default: "4000",
            help: "128 KB reads in all, split over the streams",
        },
        ParamInfo {
            name: "interval",
            default: "\"105us\"",
            help: "time for 128 KB to arrive (10 Gbit/s)",
        },
        ParamInfo {
            name: "rx",
            default: "\"exp(25us)\"",
            help: "kernel receive work per 128 KB (protocol + copy)",
        },
        FOREVER,
    ],
    footprint_kib: 256,
    build: |p, t| {
        let n = p.int("reads", 1, 100_000_000)? as u64;
        let forever = p.boolean("forever")?;
        let body = vec![
            io(p.dist("interval")?),
            kspin("ip_sk_lock", khold()),
            kern(p.dist("rx")?),
            cpu(dexp(2_000.0)),
            count(125),
        ];
        Ok(split_groups("stream", n, t, forever, body))
    },
};

// ---------------------------------------------------------------- iperf -u

pub(super) const IPERF_UDP: ModelInfo = ModelInfo {
    name: "iperf-udp",
    description: "iperf-like UDP receiver of an open-loop stream: one thread receives datagrams from the VM's NIC (vm.nic: rate, size, buffer; guest/nic.rs) one recv at a time, sleeping on the device interrupt when none has arrived; count = datagrams received; the report's net table gives throughput, drops and RFC 3550 jitter",
    params: &[ParamInfo {
        name: "app",
        default: "\"exp(1us)\"",
        help: "application work per datagram (iperf's accounting)",
    }],
    footprint_kib: 256,
    build: |p, t| {
        let body = vec![OpSpec::NetRecv(1), cpu(p.dist("app")?), count(1)];
        Ok(vec![("receiver".into(), t, vec![outer(true, 0, body)])])
    },
};
