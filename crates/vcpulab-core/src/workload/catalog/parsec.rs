//! PARSEC-like models. Structure from the PARSEC 3.0 sources (docs/workloads.md);
//! instruction and synchronization counts from the PARSEC characterization's Table 2
//! (simlarge, 8 cores). CPU time = instructions / INSTR_PER_NS per core (assumed IPC 1
//! at 3 GHz). `threads` is PARSEC's thread parameter (`-n`): pipelines create more.

use super::*;

/// Instructions retired per ns per core (assumed: IPC 1 at 3 GHz).
pub(crate) const INSTR_PER_NS: f64 = 3.0;

/// Total CPU time, ns, of `ginstr` billion instructions.
pub(crate) fn cpu_ns(ginstr: f64) -> f64 {
    ginstr * 1e9 / INSTR_PER_NS
}

const fn scale(default: &'static str) -> ParamInfo {
    ParamInfo {
        name: "scale",
        default,
        help: SCALE_HELP,
    }
}

// ---------------------------------------------------------------- blackscholes

pub(super) const BLACKSCHOLES: ModelInfo = ModelInfo {
    name: "blackscholes",
    description: "blackscholes-like: data-parallel option pricing, the kernel repeated; no synchronization but create/join",
    params: &[scale("0.2"), FOREVER],
    footprint_kib: 36_992,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // 2.67 G instructions for 100 runs of the kernel over 64K options (simlarge).
        let per_run = cpu_ns(2.67) / 100.0 / t as f64;
        let (forever, runs) = (p.boolean("forever")?, p.scaled(100.0)?);
        Ok(lead_counts("worker", t, |lead| {
            let mut body = vec![cpu(dlog(per_run, 0.05))];
            body.extend(count_if(lead));
            vec![outer(forever, runs, body)]
        }))
    },
};

// ---------------------------------------------------------------- bodytrack

pub(super) const BODYTRACK: ModelInfo = ModelInfo {
    name: "bodytrack",
    description: "bodytrack-like: thread pool; per command a mutex + condvar broadcast, three barriers (workInit and workDone of N, poolReady of N+1) and work taken from a mutex-guarded ticket dispenser",
    params: &[
        scale("0.25"),
        ParamInfo {
            name: "commands",
            default: "22",
            help: "pool commands per frame (derived: ≈22)",
        },
        FOREVER,
    ],
    footprint_kib: 2_048,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        let frames = p.scaled(4.0)?; // simlarge: 4 frames
        let cmds = p.int("commands", 1, 10_000)? as u64;
        // 14.03 G instructions, 114,621 locks over 4 frames x 22 commands (simlarge).
        let per_cmd = cpu_ns(14.03) / (4.0 * 22.0);
        let chunks = (114_621.0f64 / (4.0 * 22.0)).round(); // ≈1,302 ticket grabs
        let chunk = per_cmd / chunks;
        let forever = p.boolean("forever")?;
        // WorkerGroup::SendCmd: the command under the pool mutex, a broadcast, then
        // poolReadyBarrier (N + 1 parties) until the workers are done.
        let mut master_cmd = vec![rep(t as u64, vec![sem_wait("bt_ready")])];
        master_cmd.extend([
            lock("bt_pool"),
            cond_broadcast("bt_cmd"),
            unlock("bt_pool"),
            barrier("bt_done"),
            count(1),
        ]);
        let master = vec![outer(
            forever,
            frames,
            vec![
                cpu(dexp(2e6)), // per-frame serial work: image loading (assumed 2 ms)
                rep(cmds, master_cmd),
            ],
        )];
        // WorkerGroup::Run / RecvCmd, then Exec (ParticleFilterPthread.h,
        // TrackingModelPthread.cpp): rank 0 resets the TicketDispenser, workInit
        // barrier, tickets taken under the dispenser's mutex until none is left; AckCmd:
        // workDoneBarrier (N), then poolReadyBarrier (N + 1).
        let worker_cmd = vec![
            lock("bt_pool"),
            // tells the master this worker is about to wait (stands for the predicate
            // check the real pool does; see docs: the language has no predicate).
            sem_post("bt_ready"),
            cond_wait("bt_cmd", "bt_pool"),
            unlock("bt_pool"),
            barrier("bt_init"),
            dispense(
                "bt_tickets",
                chunks as u64,
                Some(("bt_ticket", dc(200.0))),
                vec![cpu(dlog(chunk, 0.3))],
            ),
            barrier("bt_work"),
            barrier("bt_done"),
        ];
        let worker = vec![outer(forever, frames, vec![rep(cmds, worker_cmd)])];
        Ok(vec![("main".into(), 1, master), ("worker".into(), t, worker)])
    },
};

// ---------------------------------------------------------------- canneal

pub(super) const CANNEAL: ModelInfo = ModelInfo {
    name: "canneal",
    description: "canneal-like: lock-free simulated annealing (atomic swaps), one barrier per temperature step",
    params: &[scale("0.125"), FOREVER],
    footprint_kib: 52_608,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // 7.33 G instructions over 128 temperature steps (simlarge); 1,024 barrier waits
        // = 128 steps x 8 threads.
        let step = cpu_ns(7.33) / 128.0 / t as f64;
        let (forever, steps) = (p.boolean("forever")?, p.scaled(128.0)?);
        Ok(lead_counts("annealer", t, |lead| {
            let mut body = vec![cpu(dlog(step, 0.1)), barrier("cn_step")];
            body.extend(count_if(lead));
            vec![outer(forever, steps, body)]
        }))
    },
};

// ---------------------------------------------------------------- dedup

pub(super) const DEDUP: ModelInfo = ModelInfo {
    name: "dedup",
    description: "dedup-like: 5-stage pipeline (fragment 1 -> refine N -> dedup N -> compress N -> reorder 1) over a fixed input; the serial fragment (read + anchor scan) and reorder (write) stages bound it from 4 threads on; bounded queues, hash-bucket mutexes, munmap TLB shootdowns",
    params: &[
        scale("1"),
        ParamInfo {
            name: "batches",
            default: "26",
            help: "20-item batches per 2 MiB coarse chunk (derived: 2 MiB / 4 KiB / 20)",
        },
        ParamInfo {
            name: "buckets",
            default: "16",
            help: "hash-bucket mutex names the dedup threads rotate through (stand-in for 65,536)",
        },
        ParamInfo {
            name: "munmap_every",
            default: "4",
            help: "compress batches between two munmap/madvise TLB shootdowns (assumed); 0 = none",
        },
        ParamInfo {
            name: "serial",
            default: "0.4",
            help: "share of the run's work in the serial stages: fragment (read(2) of the input + Rabin anchor scan) three quarters of it, reorder (write(2)) the rest; set so that they bound the native run from 4 threads on (real dedup, native input, 16-core Xeon E5-2665: 7.1 s at 4 threads, 7.6 s at 16)",
        },
        FOREVER,
    ],
    footprint_kib: 65_536,
    // PARSEC's queues hold QUEUE_SIZE = 1024 x 1024 chunk pointers (dedup.h): 52,428
    // of the model's 20-chunk batches — in effect never full (the model's queues held
    // 20 batches, so the compress threads blocked whenever the writer fell behind).
    // Producers insert ITEM_PER_INSERT = 20 chunks at once and a dequeue takes up to
    // ITEM_PER_FETCH = 20 that are there (encoder.c, queue.c): with queues that never
    // fill, a pop takes exactly one insert's 20, i.e. one of the model's batches.
    queue_capacity: 1024 * 1024 / 20,
    processes: Processes::One,
    build: build_dedup,
};

/// Segments of a round-robin over sets with `counts[k]` items each: (rounds, the sets
/// still active in those rounds), in order.
fn round_robin(counts: &[u64]) -> Vec<(u64, Vec<usize>)> {
    let mut levels: Vec<u64> = counts.iter().copied().filter(|c| *c > 0).collect();
    levels.sort_unstable();
    levels.dedup();
    let mut prev = 0;
    let mut out = Vec::new();
    for l in levels {
        let active: Vec<usize> = (0..counts.len()).filter(|k| counts[*k] >= l).collect();
        out.push((l - prev, active));
        prev = l;
    }
    out
}

fn build_dedup(p: &Params, n: u32) -> Result<Groups, WorkloadError> {
    // The input: 88 coarse chunks of 2 MiB at scale 1 (simlarge, 184 MB), whatever the
    // thread count.
    let chunks = p.scaled(88.0)?;
    let b = p.int("batches", 1, 100_000)? as u64;
    let buckets = p.int("buckets", 1, 65_536)? as u64;
    let munmap_every = p.int("munmap_every", 0, 1_000_000)? as u64;
    let serial = p.float("serial", 0.0, 0.9)?;
    let forever = p.boolean("forever")?;
    // 37.1 G instructions for 184 MB of input = 88 coarse chunks of 2 MiB (simlarge).
    let coarse = cpu_ns(37.1) / 88.0;
    let par = 1.0 - serial;
    // The fragment stage's serial share: with `-p` (both runconfs) the input was read
    // into memory before the parallel phase, so this is CPU — copying a piece of the
    // preloaded input into a fresh buffer and the serial Rabin anchor scan — plus the
    // fresh buffer's first-touch page faults (kernel, ≈0.5 ms per 2 MiB, assumed).
    let frag_faults = 500_000.0;
    let frag_cpu = (coarse * serial * 0.25 / 0.35 - frag_faults).max(1_000.0);
    let reord = coarse * serial * 0.10 / 0.35 / b as f64;
    let (refine, dd, comp) = (
        coarse * par * 0.30 / b as f64, // refine: Rabin fingerprints, per batch (assumed share)
        coarse * par * 0.20 / b as f64, // dedup: SHA-1, per batch (assumed share)
        coarse * par * 0.50 / b as f64, // compress: gzip, per batch (assumed share)
    );
    // One queue set per 4 threads of a stage; coarse chunks split over the refine threads.
    let sets: Vec<u32> = (0..n.div_ceil(4)).map(|k| (n - 4 * k).min(4)).collect();
    let per_thread = split(chunks, n, false);
    let mut counts = vec![0u64; sets.len()];
    let mut thread_chunks = Vec::new();
    for (k, c) in per_thread {
        for _ in 0..k {
            thread_chunks.push(c);
        }
    }
    let mut set_threads: Vec<Vec<u64>> = vec![Vec::new(); sets.len()];
    for (i, c) in thread_chunks.iter().enumerate() {
        set_threads[i / 4].push(*c);
        counts[i / 4] += c;
    }
    let mut groups: Groups = Vec::new();
    // fragment: round-robin over the sets, one coarse chunk each: copy it from the
    // preloaded input into a fresh buffer (first-touch page faults under the page-table
    // lock), find its anchors (serial Rabin scan), hand it on.
    let mut frag_body = Vec::new();
    for (rounds, active) in round_robin(&counts) {
        let mut body = Vec::new();
        for k in active {
            body.extend([
                rep(
                    8,
                    vec![kspin("dd_mm_ptl", khold()), kern(dexp(frag_faults / 8.0))],
                ),
                cpu(dlog(frag_cpu, 0.2)),
                push(&format!("dd_fr{k}")),
            ]);
        }
        frag_body.push(rep(rounds, body));
    }
    if forever {
        frag_body = vec![outer(true, 1, frag_body)];
    }
    groups.push(("fragment".into(), 1, frag_body));
    let mut reorder_body = Vec::new();
    for (k, &nk) in sets.iter().enumerate() {
        let (fr, de, co, cd) = (
            format!("dd_fr{k}"),
            format!("dd_de{k}"),
            format!("dd_co{k}"),
            format!("dd_cdone{k}"),
        );
        // refine: split a coarse chunk into b batches, then free the 2 MiB buffer.
        // Each batch's 20 chunks are split off the buffer (mbuffer_split): 20 reference
        // count updates under the buffer's pthread spinlock, one 2 us section here.
        let mut refine_batch = vec![cpu(dlog(refine, 0.3))];
        refine_batch.extend(spin_critical("dd_ref", dc(2_000.0)));
        refine_batch.push(push(&de));
        let refine_body = vec![
            pop(&fr),
            rep(b, refine_batch),
            // munmap of the 2 MiB buffer: page-table and zone locks, then the shootdown
            kern(dc(3_000.0)),
            kspin("dd_mm_ptl", khold()),
            kspin("dd_zone", khold()),
            kspin("dd_zone", khold()),
            tlb(),
        ];
        let mine = &set_threads[k];
        let mut shares: Vec<(u32, u64)> = Vec::new();
        for c in mine {
            match shares.iter_mut().find(|s| s.1 == *c) {
                Some(s) => s.0 += 1,
                None => shares.push((1, *c)),
            }
        }
        for (j, (kk, c)) in shares.iter().enumerate() {
            groups.push((
                format!("refine{k}.{j}"),
                *kk,
                vec![outer(forever, *c, refine_body.clone())],
            ));
        }
        let set_batches = counts[k] * b;
        // dedup: per batch, hash 20 chunks and look each up under its bucket's mutex. One
        // group per thread so that threads visit the bucket names in different orders.
        for (i, (_, nb)) in split(set_batches, nk, false)
            .into_iter()
            .flat_map(|(kk, nb)| (0..kk).map(move |_| (1u32, nb)))
            .enumerate()
        {
            let off = mix(k as u64 * 64 + i as u64);
            let mut body = vec![pop(&de)];
            for j in 0..20u64 {
                body.push(cpu(dexp(dd / 20.0)));
                body.extend(critical(
                    &format!("dd_bucket{}", (off + j * 7) % buckets),
                    dc(300.0),
                ));
            }
            body.push(push(&co));
            groups.push((format!("dedup{k}.{i}"), 1, vec![outer(forever, nb, body)]));
        }
        // compress each of the 20 chunks into a fresh heap buffer: a page fault per
        // chunk (page-table lock; the zone lock every 4th) (derived: ≈4 KiB per chunk);
        // drop the buffer reference (a refcount lock), tell the writer, hand it on.
        let mut fault = vec![cpu(dlog(comp / 20.0, 0.3)), kspin("dd_mm_ptl", khold())];
        fault.push(kern(dexp(1_000.0)));
        let mut comp_body = vec![pop(&co), rep(4, vec![kspin("dd_zone", khold())])];
        comp_body.push(rep(20, fault));
        // The 20 chunks' buffers are released (mbuffer_free): reference counts under
        // the buffer's pthread spinlock (mbuffer.c, ENABLE_SPIN_LOCKS; hashed by the
        // 128 MiB buffer they were split from, so in effect one lock), one 2 us section.
        comp_body.extend(spin_critical("dd_ref", dc(2_000.0)));
        comp_body.push(push(&cd));
        for (j, (kk, total)) in split(set_batches, nk, false).into_iter().enumerate() {
            let mut comp_prog = Vec::new();
            if munmap_every > 0 {
                let per = munmap_every.min(total);
                let mut body = vec![rep(per, comp_body.clone())];
                body.extend([
                    kern(dc(3_000.0)),
                    kspin("dd_mm_ptl", khold()),
                    kspin("dd_zone", khold()),
                    tlb(),
                ]);
                comp_prog.push(outer(forever, total / per, body));
                if !forever && !total.is_multiple_of(per) {
                    comp_prog.push(rep(total % per, comp_body.clone()));
                }
            } else {
                comp_prog.push(outer(forever, total, comp_body.clone()));
            }
            groups.push((format!("compress{k}.{j}"), kk, comp_prog));
        }
    }
    // reorder: in the fragment's order, wait until a batch of the next chunk's set is
    // compressed (a mutex + condvar per chunk in dedup; here a blocking pop from the
    // set's queue of compressed batches), then write it (serial: write(2) into the
    // page cache).
    for (rounds, active) in round_robin(&counts) {
        let mut body = Vec::new();
        for k in active {
            body.push(rep(
                b,
                vec![
                    pop(&format!("dd_cdone{k}")),
                    cpu(dlog(reord, 0.2)),
                    kspin("dd_i_pages", khold()),
                    kern(dexp(5_000.0)),
                    count(1),
                ],
            ));
        }
        reorder_body.push(rep(rounds, body));
    }
    if forever {
        reorder_body = vec![outer(true, 1, reorder_body)];
    }
    groups.push(("reorder".into(), 1, reorder_body));
    Ok(groups)
}

// ---------------------------------------------------------------- facesim

pub(super) const FACESIM: ModelInfo = ModelInfo {
    name: "facesim",
    description: "facesim-like: Alamere TaskQ pool (taskQDistCommon.c): the master wakes the workers by broadcast, all of them — the master too — take the region's uneven tasks from shared queues, and the master waits for the last; no barriers",
    params: &[scale("0.1"), FOREVER],
    footprint_kib: 19_456,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // 29.90 G instructions, 3,231 condvar waits, 14,541 locks for 1 frame (simlarge):
        // ≈ 400 parallel regions, each thread waiting once a region (derived: 3,231 / 8).
        // `threads` is PHYSBAM_THREADS: the master and t - 1 pool threads.
        let regions = 400.0;
        let region = cpu_ns(29.90) / regions;
        let forever = p.boolean("forever")?;
        let n = p.scaled(regions)?;
        let workers = t as u64 - 1;
        // One task per thread a region (assumed: a partition each), of uneven size,
        // taken by whichever thread comes first (the master's queue, then stealing).
        let tasks = dispense(
            "fs_tasks",
            t as u64,
            None,
            vec![cpu(dlog(region * 0.95 / t as f64, 0.3))],
        );
        // `n` of `body` (none when n = 0: `rep` runs at least once).
        let times = |n: u64, body: Vec<OpSpec>| if n == 0 { Vec::new() } else { vec![rep(n, body)] };
        // taskQInit ends in waitForEnd: every pool thread has gone idle once.
        let mut master = times(workers, vec![sem_wait("fs_idle")]);
        let mut region = vec![cpu(dexp(region * 0.05))]; // serial part (assumed 5%)
        // signalTasks: one broadcast of taskAvail (a post per waiting worker stands for
        // it: the language has no predicate).
        region.extend(times(workers, vec![sem_post("fs_go")]));
        region.push(tasks.clone());
        // waitForEnd: until every pool thread is idle again.
        region.extend(times(workers, vec![sem_wait("fs_idle")]));
        region.push(count(1));
        master.push(outer(forever, n, region));
        let mut g = vec![("main".into(), 1, master)];
        if workers > 0 {
            // taskQIdleLoop: waitForTasks (idle, then wait for taskAvail), own tasks,
            // then stealing until none is left.
            let worker = vec![
                sem_post("fs_idle"),
                outer(
                    forever,
                    n,
                    vec![sem_wait("fs_go"), tasks, sem_post("fs_idle")],
                ),
            ];
            g.push(("worker".into(), t - 1, worker));
        }
        Ok(g)
    },
};

// ---------------------------------------------------------------- ferret

pub(super) const FERRET: ModelInfo = ModelInfo {
    name: "ferret",
    description: "ferret-like: 6-stage similarity-search pipeline (load 1 -> segment, extract, vectorize, rank N each -> output 1) with depth-20 queues",
    params: &[scale("0.125"), FOREVER],
    footprint_kib: 6_208,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, n| {
        // 23.97 G instructions for 256 queries (simlarge); 345,778 locks.
        let q = cpu_ns(23.97) / 256.0;
        let per_thread = p.scaled(256.0)?.div_ceil(n as u64);
        let total = per_thread * n as u64;
        let forever = p.boolean("forever")?;
        let rank_locks = ((345_778.0 / 256.0) as u64).max(8); // ≈1,350 per query
        let stage = |inq: &str, outq: &str, share: f64| {
            vec![pop(inq), cpu(dlog(q * share, 0.3)), push(outq)]
        };
        // ferret's own code locks only its queues (src/queue.c), so the characterization's
        // locks are taken inside the libraries (assumed: uncontended ones such as glibc's
        // per-thread malloc arenas): each rank thread takes a lock of its own.
        let rank = |i: u32| {
            let mut rank = vec![pop("fe_q4")];
            let mut inner = Vec::new();
            for _ in 0..8 {
                inner.push(cpu(dexp(q * 0.59 / rank_locks as f64)));
                inner.extend(critical(&format!("fe_arena{i}"), dc(200.0)));
            }
            rank.push(rep(rank_locks / 8, inner));
            rank.push(push("fe_q5"));
            rank
        };
        let mut groups = vec![
            (
                "load".into(),
                1,
                vec![outer(
                    forever,
                    total,
                    vec![kern(dexp(q * 0.01)), push("fe_q1")],
                )],
            ),
            (
                "segment".into(),
                n,
                vec![outer(forever, per_thread, stage("fe_q1", "fe_q2", 0.10))],
            ),
            (
                "extract".into(),
                n,
                vec![outer(forever, per_thread, stage("fe_q2", "fe_q3", 0.10))],
            ),
            (
                "vectorize".into(),
                n,
                vec![outer(forever, per_thread, stage("fe_q3", "fe_q4", 0.20))],
            ),
        ];
        for i in 0..n {
            groups.push((
                format!("rank{i}"),
                1,
                vec![outer(forever, per_thread, rank(i))],
            ));
        }
        groups.push((
            "output".into(),
            1,
            vec![outer(
                forever,
                total,
                vec![pop("fe_q5"), cpu(dc(20_000.0)), count(1)],
            )],
        ));
        Ok(groups)
    },
};

// ---------------------------------------------------------------- fluidanimate

pub(super) const FLUIDANIMATE: ModelInfo = ModelInfo {
    name: "fluidanimate",
    description: "fluidanimate-like: 10 waits per frame at PARSEC's barrier (a mutex, a phase flag spun on, a condvar); fine-grained border-cell mutexes shared with the neighbouring thread",
    params: &[
        scale("0.05"),
        ParamInfo {
            name: "frames",
            default: "1",
            help: "frames (simlarge: 5); scale sets the fraction of a simlarge frame's work",
        },
        ParamInfo {
            name: "spin",
            default: "\"100us\"",
            help: "barrier flag spin before the trylock loop and the condvar (35,000 iterations ≈ 0.1 ms)",
        },
        FOREVER,
    ],
    footprint_kib: 33_216,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        let s = p.float("scale", 1e-6, 1e3)?;
        let frames = p.int("frames", 1, 1_000_000)? as u64;
        let spin = p.dist("spin")?;
        let forever = p.boolean("forever")?;
        // 14.06 G instructions, 17,771,909 locks over 5 frames (simlarge).
        let frame_cpu = cpu_ns(14.06) / 5.0 * s / t as f64;
        let frame_locks = 17_771_909.0 / 5.0 * s / t as f64;
        // (phase, CPU share, lock share): RebuildGrid, ComputeDensities, ComputeForces
        // take the border-cell locks (assumed shares); 7 other phases share 15% of CPU.
        let locking = [(0.10, 0.20), (0.30, 0.40), (0.45, 0.40)];
        let mut groups = Vec::new();
        for i in 0..t {
            let own = i;
            let nb = (i + 1) % t;
            let off = mix(i as u64);
            let mut frame = Vec::new();
            for ph in 0..10 {
                if (1..=3).contains(&ph) {
                    let (cs, ls) = locking[ph - 1];
                    let nl = ((frame_locks * ls) / 8.0).round().max(1.0) as u64;
                    let mut body = Vec::new();
                    for j in 0..8u64 {
                        let cell = if j % 2 == 0 { own } else { nb };
                        body.push(cpu(dexp(frame_cpu * cs / (8 * nl) as f64)));
                        body.extend(critical(
                            &format!("fa_cell{cell}_{}", (off + j) % 16),
                            dc(50.0),
                        ));
                    }
                    frame.push(rep(nl, body));
                } else {
                    frame.push(cpu(dlog(frame_cpu * 0.15 / 7.0, 0.1)));
                }
                // The one global `barrier` of pthreads.cpp, which parsec_barrier.hpp
                // turns into parsec_barrier_wait.
                frame.push(parsec_barrier("fa_barrier", spin.clone()));
            }
            if i == 0 {
                frame.push(count(1));
            }
            groups.push((format!("t{i}"), 1, vec![outer(forever, frames, frame)]));
        }
        Ok(groups)
    },
};

// ---------------------------------------------------------------- freqmine

/// Mining tasks (frequent items) handed out dynamically (assumed: 64).
const MINE_TASKS: u64 = 64;

pub(super) const FREQMINE: ModelInfo = ModelInfo {
    name: "freqmine",
    description: "freqmine-like: OpenMP FP-growth; tree build with a lock per transaction, uneven dynamic mining, libgomp spin-then-block barriers",
    params: &[
        scale("0.02"),
        ParamInfo {
            name: "spin",
            default: "\"1ms\"",
            help: "barrier spin before blocking (libgomp: 300,000 spins)",
        },
        FOREVER,
    ],
    footprint_kib: 34_624,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // 33.45 G instructions and 990,025 locks for 990,000 transactions (simlarge).
        let tx = p.scaled(990_000.0)?;
        let per_tx = cpu_ns(33.45) / 990_000.0;
        let spin = p.dist("spin")?;
        let my_tx = tx.div_ceil(t as u64);
        let mut build_body = Vec::new();
        for j in 0..8 {
            build_body.push(cpu(dexp(per_tx * 0.30)));
            build_body.extend(critical(&format!("fm_tree{j}"), dc(300.0)));
        }
        let body = vec![
            // first scan: item counts (10%)
            cpu(dlog(my_tx as f64 * per_tx * 0.10, 0.05)),
            spin_barrier("fm_scan", spin.clone()),
            // tree build: a lock per transaction (30%)
            rep(my_tx.div_ceil(8), build_body),
            spin_barrier("fm_build", spin.clone()),
            // mining conditional trees (60%): `schedule(dynamic, 1)` over the frequent
            // items (fp_tree.cpp FP_growth_first), libgomp's lock-free
            // gomp_iter_dynamic_next; very uneven (lognormal, sigma 1: mean 1.65 x
            // median).
            dispense(
                "fm_items",
                MINE_TASKS,
                None,
                vec![cpu(dlog(
                    tx as f64 * per_tx * 0.60 / MINE_TASKS as f64 / 1.65,
                    1.0,
                ))],
            ),
            spin_barrier("fm_mine", spin),
        ];
        let forever = p.boolean("forever")?;
        Ok(lead_counts("omp", t, |lead| {
            let mut b = body.clone();
            b.extend(count_if(lead));
            vec![outer(forever, 1, b)]
        }))
    },
};

// ---------------------------------------------------------------- raytrace

pub(super) const RAYTRACE: ModelInfo = ModelInfo {
    name: "raytrace",
    description: "raytrace-like: serial BVH build, then per frame the main thread wakes the render threads and waits while they take 32x32 tiles from an atomic counter",
    params: &[
        scale("0.25"),
        ParamInfo {
            name: "frames",
            default: "3",
            help: "frames rendered (simlarge: 3)",
        },
        FOREVER,
    ],
    footprint_kib: 55_872,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        let s = p.float("scale", 1e-6, 1e3)?;
        let frames = p.int("frames", 1, 1_000_000)? as u64;
        let forever = p.boolean("forever")?;
        // (assumed) 1 s of CPU per 1920x1080 frame in 2,025 32x32 tiles; 40 ms BVH build.
        let tiles = (2_025.0 * s).round().max(1.0) as u64;
        let tile = || cpu(dlog(1e9 / 2_025.0 / 1.13, 0.5));
        let mut main = vec![cpu(dc(40e6 * s))];
        if t == 1 {
            // Context::renderFrame with one thread renders in the main thread.
            main.push(outer(forever, frames, vec![rep(tiles, vec![tile()]), count(1)]));
            return Ok(vec![("main".into(), 1, main)]);
        }
        // renderFrame: resets the tile counter, startThreads (addClient: under the
        // server mutex, each thread's scheduler condvar signalled), waitForAllThreads
        // (the server condvar, signalled by the last to finish). A post per thread
        // stands for each condvar (the language has no predicate), and main is woken
        // by every finisher it sleeps through, not the last alone.
        main.push(outer(
            forever,
            frames,
            vec![
                // initSharedThreadData, startNewFrame / doneWithFrame (assumed 20 us)
                cpu(dc(20e3)),
                lock("rt_server"),
                rep(t as u64, vec![sem_post("rt_go")]),
                unlock("rt_server"),
                rep(t as u64, vec![sem_wait("rt_done")]),
                count(1),
            ],
        ));
        // threadFunc / Context::task: tiles from m_tileCounter.inc() (lock xadd) until
        // none is left; deactivateThread: the server mutex, then suspend.
        let render = vec![outer(
            forever,
            frames,
            vec![
                sem_wait("rt_go"),
                dispense("rt_tiles", tiles, None, vec![tile()]),
                lock("rt_server"),
                unlock("rt_server"),
                sem_post("rt_done"),
            ],
        )];
        Ok(vec![("main".into(), 1, main), ("render".into(), t, render)])
    },
};

// ---------------------------------------------------------------- streamcluster

pub(super) const STREAMCLUSTER: ModelInfo = ModelInfo {
    name: "streamcluster",
    description:
        "streamcluster-like: 9 waits per pgain() call at PARSEC's barrier (a mutex, a phase flag spun on, a condvar), short compute between",
    params: &[
        scale("1"),
        ParamInfo {
            name: "spin",
            default: "\"100us\"",
            help: "barrier spin before blocking (35,000 iterations ≈ 0.1 ms)",
        },
        FOREVER,
    ],
    footprint_kib: 6_912,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // 22.12 G instructions, 129,600 barrier waits = 16,200 episodes on 8 threads
        // (simlarge): 455 us of CPU per episode in total.
        let calls = p.scaled(100.0)?;
        let episode = cpu_ns(22.12) / 16_200.0;
        let spin = p.dist("spin")?;
        let forever = p.boolean("forever")?;
        let mk = |master: bool| {
            let mut body = Vec::new();
            for ph in 0..9 {
                body.push(cpu(dlog(episode / t as f64, 0.2)));
                if master && (ph == 3 || ph == 7) {
                    body.push(cpu(dc(20_000.0))); // serial part on thread 0 (assumed)
                }
                // One barrier object for every wait (localSearch creates one and hands
                // it to the threads), PARSEC's drop-in parsec_barrier_wait.
                body.push(parsec_barrier("sc_barrier", spin.clone()));
            }
            if master {
                body.push(count(1));
            }
            vec![outer(forever, calls, body)]
        };
        let mut g = vec![("t0".into(), 1, mk(true))];
        if t > 1 {
            g.push(("worker".into(), t - 1, mk(false)));
        }
        Ok(g)
    },
};

// ---------------------------------------------------------------- swaptions

pub(super) const SWAPTIONS: ModelInfo = ModelInfo {
    name: "swaptions",
    description: "swaptions-like: data-parallel Monte Carlo pricing, blocks of swaptions per thread, no sharing",
    params: &[scale("0.25"), FOREVER],
    footprint_kib: 352,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // 14.11 G instructions for 64 swaptions x 40K simulations (simlarge).
        let sw = p.scaled(64.0)?;
        let one = cpu_ns(14.11) / 64.0;
        let forever = p.boolean("forever")?;
        let body = vec![rep(40, vec![cpu(dlog(one / 40.0, 0.05))]), count(1)];
        let (lo, extra) = (sw / t as u64, sw % t as u64);
        let mut g = Vec::new();
        if extra > 0 {
            g.push((
                "more".into(),
                extra as u32,
                vec![outer(forever, lo + 1, body.clone())],
            ));
        }
        if lo > 0 {
            g.push((
                "worker".into(),
                t - extra as u32,
                vec![outer(forever, lo, body)],
            ));
        } else if forever {
            g.push(("idle".into(), t - extra as u32, vec![outer(true, 1, body)]));
        }
        Ok(g)
    },
};

// ---------------------------------------------------------------- vips

pub(super) const VIPS: ModelInfo = ModelInfo {
    name: "vips",
    description: "vips-like: thread pool over image tiles; a tile buffer above the mmap threshold is unmapped per tile (TLB shootdown)",
    params: &[scale("0.03"), FOREVER],
    footprint_kib: 1_984,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // 31.21 G instructions, 33,586 locks, 6,361 condvar waits (simlarge): one work
        // unit per lock, a progress signal per ≈5 units.
        let unit = cpu_ns(31.21) / 33_586.0;
        let units = p.scaled(33_586.0)?;
        let forever = p.boolean("forever")?;
        let mut tile = critical("vips_pool", dc(500.0));
        tile.extend([cpu(dlog(unit, 0.3)), kern(dc(4_000.0)), tlb(), count(1)]);
        // The units are split over the workers; each posts progress every 5 units (and
        // after a last partial group), and the main thread waits for every post.
        let mut g = Vec::new();
        let mut posts_total = 0u64;
        for (i, (k, n)) in split(units, t, forever).into_iter().enumerate() {
            let mut prog = vec![outer(
                forever,
                n / 5,
                vec![rep(5, tile.clone()), sem_post("vips_progress")],
            )];
            if forever || n < 5 {
                prog.clear();
                prog.push(outer(
                    forever,
                    1,
                    vec![rep(n.clamp(1, 5), tile.clone()), sem_post("vips_progress")],
                ));
                posts_total += k as u64;
            } else {
                posts_total += k as u64 * (n / 5);
                if n % 5 > 0 {
                    prog.push(rep(n % 5, tile.clone()));
                    prog.push(sem_post("vips_progress"));
                    posts_total += k as u64;
                }
            }
            g.push((format!("worker{i}"), k, prog));
        }
        let main = vec![outer(
            forever,
            posts_total,
            vec![sem_wait("vips_progress"), cpu(dc(10_000.0))],
        )];
        g.insert(0, ("main".into(), 1, main));
        Ok(g)
    },
};

// ---------------------------------------------------------------- x264

pub(super) const X264: ModelInfo = ModelInfo {
    name: "x264",
    description: "x264-like: a serial main thread reads each frame and starts a thread for it (at most N in flight, the oldest joined); each frame's rows wait on its reference frames' row progress (a mutex and condvar per frame)",
    params: &[
        scale("0.5"),
        ParamInfo {
            name: "frames",
            default: "16",
            help: "frames encoded (simlarge: 128); scale sets the fraction of a frame's work",
        },
        FOREVER,
    ],
    footprint_kib: 5_120,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        let s = p.float("scale", 1e-6, 1e3)?;
        let frames = p.int("frames", 1, 10_000_000)? as u64;
        let forever = p.boolean("forever")?;
        // 32.4 G instructions for 128 frames of 640x360 (simlarge): 23 rows of 16x16
        // macroblocks per frame. The main thread's serial part per frame — reading the
        // y4m frame (345,600 bytes from the page cache: a kernel copy, ≈ 35 us) and the
        // lookahead it runs itself before threading (x264_frame_init_lowres,
        // x264_slicetype_decide; 5% of a frame's work, assumed) — then the frame's rows.
        let frame = cpu_ns(32.4) / 128.0 * s;
        const ROWS: u64 = 23;
        const REFS: u64 = 5; // --ref 5
        let serial = frame * 0.05;
        let row = (frame - serial) / ROWS as f64;
        let main_serial = || vec![kern(dexp(35_000.0)), cpu(dlog(serial, 0.3))];
        let row_work = || cpu(dlog(row, 0.3));
        if t == 1 {
            // --threads 1: x264_slices_write runs in the main thread; no frame mutexes.
            let mut body = main_serial();
            body.push(rep(ROWS, vec![row_work()]));
            body.push(count(1));
            return Ok(vec![("main".into(), 1, vec![outer(forever, frames, body)])]);
        }
        // --threads N (encoder.c x264_encoder_encode): the main thread rotates over N
        // thread contexts; per frame it creates a thread running x264_slices_write
        // (pthread_create: a clone, ≈ 20 us of kernel work, assumed) and then joins the
        // oldest frame's thread (x264_encoder_frame_end → pthread_join), so at most N
        // frames are in flight. The model keeps N threads, slot k encoding frames k,
        // k + N, …: "created" = posted to start, "joined" = its done post awaited.
        let n = t as u64;
        // A frame's row r needs every reference frame's rows up to r*16 +
        // i_mv_range_thread pixels (analyse.c x264_mb_analyse_init →
        // x264_frame_cond_wait); a frame broadcasts mb_y*16 - 24 lines after each row
        // (x264_fdec_filter_row). i_mv_range_thread (encoder.c
        // x264_validate_parameters): half of (360 + 24) / N - 24, at least the me_range
        // 16, rounded to a row boundary less the 24-line thread height. So row r waits
        // until the previous frame has finished r + lag rows.
        let lag = {
            let max_range = (360 + 24) / n as i64 - 24;
            let r = (max_range / 2).max(16);
            let mut r2 = (r & !15) + 8;
            if r2 < r {
                r2 += 16;
            }
            ((r2 + 24) as u64).div_ceil(16).min(ROWS)
        };
        let slot_name = |k: u64| format!("x264_frame{}", k % n);
        let start = |k: u64| format!("x264_start{}", k % n);
        let done = |k: u64| format!("x264_done{}", k % n);
        let progress = |k: u64| format!("x264_rows{}", k % n);
        // One frame on slot k: per row, a cond_wait on each reference frame (its
        // frame mutex taken and released; the newest reference is the one still being
        // encoded, whose progress it waits for: the slot's progress semaphore, posted
        // once per row by the previous slot), the row, then the broadcast of its own
        // progress under its own frame mutex (frame.c x264_frame_cond_broadcast).
        // Frames as references: the REFS before it (the older ones are finished; their
        // mutexes are the slots' in turn). The first frame (IDR) has none; every other is
        // a P frame kept as reference (i_bframe defaults to 0 here, common.c, and
        // simlarge sets no --bframes).
        let frame_body = |k: u64, first: bool| {
            let mut v = Vec::new();
            for r in 0..ROWS {
                if !first {
                    let need = if r == 0 { lag } else { u64::from(r + lag <= ROWS) };
                    for _ in 0..need {
                        v.push(sem_wait(&progress(k)));
                    }
                    for j in 1..=REFS {
                        v.push(lock(&slot_name(k + n * REFS - j)));
                        v.push(unlock(&slot_name(k + n * REFS - j)));
                    }
                }
                v.push(row_work());
                v.push(lock(&slot_name(k)));
                v.push(sem_post(&progress(k + 1)));
                v.push(unlock(&slot_name(k)));
            }
            v.push(count(1));
            // The thread's exit (do_exit, ≈ 10 us, assumed) wakes its joiner.
            v.push(kern(dexp(10_000.0)));
            v.push(sem_post(&done(k)));
            v
        };
        let mut groups = Vec::new();
        // Main: frames 0..N-1 are created without a join; from frame N-1 on, each
        // creation is followed by the join of frame f - N + 1.
        let create = |f: u64| {
            let mut v = main_serial();
            v.push(kern(dexp(20_000.0)));
            v.push(sem_post(&start(f)));
            v
        };
        let mut main = Vec::new();
        let head = frames.min(n - 1);
        for f in 0..head {
            main.extend(create(f));
        }
        // Steady state from frame N-1, one cycle = N frames (slots N-1, 0, …, N-2).
        let cycle: Vec<OpSpec> = (0..n)
            .flat_map(|i| {
                let f = n - 1 + i;
                let mut v = create(f);
                v.push(sem_wait(&done(f + 1)));
                v
            })
            .collect();
        if forever {
            main.push(outer(true, 0, cycle));
        } else if frames >= n {
            let rest = frames - (n - 1);
            if rest / n > 0 {
                main.push(rep(rest / n, cycle));
            }
            for i in 0..rest % n {
                let f = n - 1 + i;
                main.extend(create(f));
                main.push(sem_wait(&done(f + 1)));
            }
            // Join the frames still in flight, oldest first.
            let last = frames - 1;
            for f in (last + 2 - n)..=last {
                main.push(sem_wait(&done(f)));
            }
        } else {
            for f in 0..frames {
                main.push(sem_wait(&done(f)));
            }
        }
        groups.push(("main".to_string(), 1, main));
        for k in 0..n {
            let mine = if forever {
                None
            } else {
                // Frames k, k + N, … below `frames`.
                Some(if k < frames { (frames - 1 - k) / n + 1 } else { 0 })
            };
            if mine == Some(0) {
                continue;
            }
            let mut prog = Vec::new();
            let mut body = vec![sem_wait(&start(k))];
            body.extend(frame_body(k, false));
            let mut left = mine;
            if k == 0 {
                prog.push(sem_wait(&start(0)));
                prog.extend(frame_body(0, true));
                left = left.map(|m| m - 1);
            }
            match left {
                None => prog.push(outer(true, 0, body)),
                Some(0) => {}
                Some(m) => prog.push(rep(m, body)),
            }
            groups.push((format!("frame.{k}"), 1, prog));
        }
        Ok(groups)
    },
};
