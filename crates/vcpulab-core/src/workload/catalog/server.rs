//! Server and system models: kernbench, dbench, ebizzy, sysbench OLTP / MySQL, iperf.
//! Kernel spinlock hold times default to uniform(200ns, 1.4us): most kernel spinlocks are
//! held for less than 2^12 cycles (≈1.4 us at 3 GHz), per the KVM PLE-window comment.

use super::*;

/// `total` iterations split over `t` threads that each need their own objects: the
/// iteration count of every thread (threads left without one are not created).
fn slots(total: u64, t: u32, forever: bool) -> Vec<u64> {
    split(total, t, forever)
        .into_iter()
        .flat_map(|(k, n)| (0..k).map(move |_| n))
        .collect()
}

/// Kernel work under a file mapping's i_mmap lock taken for writing:
/// i_mmap_lock_write(m); kernel(hold); i_mmap_unlock_write(m) — the mutex
/// `i_mmap_mutex` before Linux 3.19, the rw-semaphore `i_mmap_rwsem` from 3.19.
fn under_i_mmap(m: &str, hold: Dist) -> Vec<OpSpec> {
    vec![i_mmap_lock_write(m), kern(hold), i_mmap_unlock_write(m)]
}

// ---------------------------------------------------------------- kernbench

pub(super) const KERNBENCH: ModelInfo = ModelInfo {
    name: "kernbench",
    description: "kernbench-like: make -jN: per job slot, make waits (wait4) for a compile whose cc1 writes assembly through a pipe to as (-pipe); fork/exec/exit (tasklist_lock, the shared libc mapping's i_mmap lock, flush_tlb_mm), page-fault and header-lookup kernel spinlocks; ≈8% kernel time, one voluntary sleep per 2.4 ms of user time",
    params: &[
        ParamInfo {
            name: "jobs",
            default: "16",
            help: "compile jobs (translation units) in all, split over the `threads` make job slots (-j)",
        },
        ParamInfo {
            name: "cycles",
            default: "100",
            help: "pipe writes of cc1 per job, one voluntary sleep of as each (a real job has ≈800, derived; fewer keep default runs short and make process starts and exits ≈8x as frequent per CPU-second)",
        },
        FOREVER,
    ],
    footprint_kib: 8_192,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::EachGroup,
    build: |p, t| {
        // kernbench -j16 on 16 CPUs: 3919 s user, 339 s system, 1.61 M voluntary sleeps
        // (/usr/bin/time %w, which kernbench prints as "Sleeps"). Per sleep: 2.43 ms
        // user and 0.21 ms kernel (derived). The sleeps are the assembler waiting on the
        // empty pipe from cc1 (kbuild compiles with -pipe), make waiting in wait4 for
        // the job, and the job's processes starting (derived from the structure; a
        // per-process count is not published).
        let jobs = p.int("jobs", 1, 1_000_000)? as u64;
        let cycles = p.int("cycles", 1, 1_000_000)? as u64;
        let forever = p.boolean("forever")?;
        // (assumed) cc1 does 90% of the user time, as 10%.
        let (cc1_user, as_user) = (2.43e6 * 0.9, 2.43e6 * 0.1);
        let mut groups = Groups::new();
        for (slot, k) in slots(jobs, t, forever).into_iter().enumerate() {
            let pipe = format!("kb_pipe.{slot}");
            let (start, exit) = (format!("kb_start.{slot}"), format!("kb_exit.{slot}"));
            // Popular headers' dentries, 4 of them, each slot starting elsewhere: the
            // path walk takes its reference on the final one under d_lock
            // (fs/namei.c complete_walk; a lockref cmpxchg from 3.12) and the close
            // drops it under d_lock (fs/dcache.c dput; without it for a cached dentry
            // from 4.0's fast_dput). On 3.12-3.19 a put that is not the last one is
            // lockless too; the model takes every put as the last (a header is rarely
            // open twice at once).
            let hdr = |i: u64| format!("kb_d_lock.{}", (mix(slot as u64) + i) % 4);
            // One process's life, from the kernel's side (kernel/fork.c copy_process,
            // dup_mmap; fs/exec.c, fs/binfmt_elf.c load_elf_binary; kernel/exit.c
            // do_exit, release_task). dup_mmap links every file-backed VMA into its
            // file's mapping under its i_mmap lock (the shared libc's: one lock for all
            // processes) and ends in flush_tlb_mm(oldmm); exec maps the binary, ld.so
            // and libc (vma_link → i_mmap_lock_write: i_mmap_mutex, from 3.19
            // i_mmap_rwsem); exit unlinks them (unlink_file_vma) and takes
            // tasklist_lock for writing. (assumed) ≈ 150 us of kernel work.
            let libc = |v: &mut Vec<OpSpec>| v.extend(under_i_mmap("kb_i_mmap_libc", dc(2_000.0)));
            let mut life = vec![kwrite_lock("kb_tasklist", khold()), kern(dexp(40_000.0))];
            libc(&mut life);
            life.push(tlb());
            life.push(kern(dexp(60_000.0)));
            libc(&mut life);
            let mut death = vec![kern(dexp(40_000.0))];
            libc(&mut death);
            death.push(kwrite_lock("kb_tasklist", khold()));
            // A cc1 cycle: compute, then ≈0.21 ms of kernel work less as's share:
            // anonymous page faults (zone->lock when the per-CPU page list refills in
            // rmqueue_bulk, zone->lru_lock when a pagevec of new pages drains:
            // mm/page_alloc.c, mm/swap.c __pagevec_lru_add), two header look-ups (RCU
            // path walk, then the dentry's reference taken and, after the read,
            // dropped), then a 4 KiB pipe write that wakes as.
            let sections = 7.0 * 800.0;
            let cc1_kernel = 0.21e6 - 40_000.0 - sections;
            let cycle = vec![
                cpu(dexp(cc1_user)),
                kspin("kb_zone", khold()),
                kern(dexp(cc1_kernel / 4.0)),
                kspin("kb_lru", khold()),
                dentry_lock(&hdr(0), khold(), DentryRef::Get),
                kern(dexp(cc1_kernel / 4.0)),
                dentry_lock(&hdr(0), khold(), DentryRef::Put),
                kern(dexp(cc1_kernel / 4.0)),
                dentry_lock(&hdr(1), khold(), DentryRef::Get),
                kern(dexp(cc1_kernel / 4.0)),
                dentry_lock(&hdr(1), khold(), DentryRef::Put),
                kspin("kb_lru", khold()),
                push(&pipe),
                count(1),
            ];
            // cc1: wait for make to start the job, run it, exit (wakes make in wait4).
            let mut job = vec![sem_wait(&start)];
            job.extend(life.clone());
            job.push(rep(cycles, cycle));
            job.extend(death.clone());
            job.push(sem_post(&exit));
            // as: one read per cc1 write (blocking on the empty pipe), assemble, write
            // the object (40 us of kernel work per read, assumed).
            let as_cycle = vec![pop(&pipe), kern(dexp(40_000.0)), cpu(dexp(as_user))];
            let mut as_job = life;
            as_job.push(rep(cycles, as_cycle));
            as_job.extend(death);
            // make: start the job (fork + exec of the compiler driver, in cc1's life),
            // wait4 for it, then read its dependency file (fixdep) and stat the next
            // target's prerequisites (assumed 300 us user, 50 us kernel).
            let make = vec![
                sem_post(&start),
                sem_wait(&exit),
                cpu(dexp(300_000.0)),
                kern(dexp(50_000.0)),
            ];
            groups.push((format!("make.{slot}"), 1, vec![outer(forever, k, make)]));
            groups.push((format!("cc1.{slot}"), 1, vec![outer(forever, k, job)]));
            groups.push((format!("as.{slot}"), 1, vec![outer(forever, k, as_job)]));
        }
        Ok(groups)
    },
};

// ---------------------------------------------------------------- dbench

pub(super) const DBENCH: ModelInfo = ModelInfo {
    name: "dbench",
    description: "dbench-like: clients replaying a file-server load, each in its own directory: RCU path walk and per-client dentry/inode locks (uncontended), the shared ext4 journal's j_list_lock, the global dcache LRU, inode list/hash and writeback list spinlocks of Linux 3.x, occasional fsync waits",
    params: &[
        ParamInfo {
            name: "ops",
            default: "8000",
            help: "file-system operations in all, split over the clients",
        },
        FOREVER,
    ],
    footprint_kib: 1_024,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::EachGroup,
    build: |p, t| {
        let ops = p.int("ops", 1, 100_000_000)? as u64;
        let forever = p.boolean("forever")?;
        // dbench's clients replay the NetBench-derived client.txt load, each under its
        // own directory (/clients/clientN), so the per-dentry d_lock and the
        // directory's inode lock (i_mutex; i_rwsem from 4.7) are per client. What they
        // share on a Linux 3.x ext4 file system (fs/dcache.c, fs/inode.c,
        // fs/fs-writeback.c, fs/jbd2/transaction.c):
        // - dcache_lru_lock (one global spinlock until 3.12; then the superblock's
        //   list_lru, one lock per NUMA node): the LRU is lazy — a dentry stays on it
        //   while in use, and dput of one already there takes no LRU lock
        //   (dentry_lru_add's list_empty test; DCACHE_LRU_LIST from 3.12). It is taken
        //   when a new dentry first joins it and when one is killed (dentry_kill,
        //   shrink_dcache_parent at a directory's removal): about once per inode
        //   created or evicted;
        // - journal->j_list_lock (one per journal): __jbd2_journal_file_buffer, from
        //   jbd2_journal_get_write_access / jbd2_journal_dirty_metadata, per metadata
        //   buffer an operation dirties (inode table, bitmap, directory blocks);
        // - inode_sb_list_lock and inode_hash_lock (global in 3.x): inode creation and
        //   eviction (create, unlink);
        // - the bdi's wb.list_lock: __mark_inode_dirty when an inode first becomes dirty.
        // (assumed) an operation: 3 us user (parsing the load line), ≈40 us of kernel
        // work (data copies of ReadX / WriteX dominate); every other op modifies
        // metadata (2 journal buffers); one in 8 creates or unlinks an inode; one in 4
        // dirties an inode; one in 32 is a Flush (fsync), below.
        let mut groups = Groups::new();
        for (slot, n) in slots(ops.div_ceil(32), t, forever).into_iter().enumerate() {
            let (dir_d, dir_i) = (format!("db_d_lock.{slot}"), format!("db_i_lock.{slot}"));
            let mut body = Vec::new();
            for j in 0..32u32 {
                body.push(cpu(dexp(3_000.0)));
                // path walk: RCU (lockless) to the client's directory, then its
                // reference under its d_lock (a lockref cmpxchg from 3.12)
                body.push(kern(dexp(2_000.0)));
                body.push(dentry_lock(&dir_d, khold(), DentryRef::Get));
                let metadata = j % 2 == 0;
                if metadata {
                    body.push(inode_lock(&dir_i));
                }
                body.push(kern(dexp(18_000.0)));
                if metadata {
                    body.push(kspin("db_j_list_lock", khold()));
                    body.push(kern(dexp(2_000.0)));
                    body.push(kspin("db_j_list_lock", khold()));
                }
                if j % 8 == 1 {
                    body.push(kspin("db_inode_hash_lock", khold()));
                    body.push(kspin("db_inode_sb_list_lock", khold()));
                }
                if j % 4 == 3 {
                    body.push(kspin("db_wb_list_lock", khold()));
                }
                if metadata {
                    body.push(inode_unlock(&dir_i));
                }
                body.push(kern(dexp(16_000.0)));
                // dput of the file's dentry: the LRU lock when the dentry is new or
                // dies with its inode; otherwise the same work without it.
                body.push(if j % 8 == 1 {
                    kspin("db_dcache_lru_lock", khold())
                } else {
                    kern(khold())
                });
                if j == 31 {
                    // Flush (fsync): force a journal commit and wait for it
                    // (jbd2_log_start_commit, jbd2_log_wait_commit). One commit runs at a
                    // time and takes in every handle joined before it started; an fsync
                    // that arrives during a commit waits for it and for the next, which
                    // covers all such fsyncs (op `group_flush`). The commit (fs/jbd2/
                    // commit.c jbd2_journal_commit_transaction) handles the transaction's
                    // buffers in three passes — write-out (jbd2_journal_write_metadata_buffer
                    // refiles each to BJ_Shadow), I/O completion (each to BJ_Forget) and
                    // the forget loop (checkpoint lists) — and takes j_list_lock once per
                    // buffer in each: the forget loop drops it at the top of every
                    // iteration and ends with cond_resched_lock, and the refiles go
                    // through jbd2_journal_file_buffer, which locks and unlocks it. (An
                    // earlier model held it across a whole pass: wrong.) ≈ 32 buffers per
                    // client's commit (one per op per client, one Flush per 32 ops:
                    // derived); per buffer ≈ 100 ns under the lock and ≈ 150 ns of other
                    // work (assumed: ≈ 8 us a pass, as before). Before the passes it
                    // cleans the checkpoint list under one hold
                    // (__jbd2_journal_clean_checkpoint_list). Then the commit block
                    // goes to the disk (200 us, assumed). The journal thread runs the
                    // commit in the kernel; the model runs it on the first waiting
                    // client's thread (the same work once per commit, on a vCPU of the
                    // VM).
                    let per_buffer = vec![
                        kern(dexp(150.0)),
                        kspin("db_j_list_lock", dunif(50.0, 150.0)),
                    ];
                    let commit = vec![kspin("db_j_list_lock", khold()), rep(3 * 32, per_buffer)];
                    body.push(OpSpec::GroupFlush(crate::workload::program::GroupFlushSpec {
                        name: "db_journal".into(),
                        io: dexp(200_000.0),
                        body: commit,
                    }));
                }
                body.push(count(1));
            }
            groups.push((format!("client.{slot}"), 1, vec![outer(forever, n, body)]));
        }
        Ok(groups)
    },
};

// ---------------------------------------------------------------- ebizzy

pub(super) const EBIZZY: ModelInfo = ModelInfo {
    name: "ebizzy",
    description: "ebizzy-like: 2 x threads; each loop mmaps 512 KiB (mmap_sem written), copies (128 page faults, mmap_sem read), binary-searches, munmaps (mmap_sem written, TLB shootdown)",
    params: &[
        ParamInfo {
            name: "iterations",
            default: "2400",
            help: "loops in all, split over the 2 x threads workers",
        },
        FOREVER,
    ],
    footprint_kib: 5_120,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        // 512 KiB per loop (ebizzy -m: mmap instead of malloc). Every address-space
        // change takes the process's mmap_sem (an rw_semaphore) for writing — mmap
        // (mm/mmap.c vm_mmap_pgoff), munmap (vm_munmap, whose unmap_region flushes the
        // other CPUs' TLBs while it is held) — and every page fault takes it for
        // reading (arch/x86/mm/fault.c __do_page_fault), so the copy's faults wait
        // behind another thread's mmap or munmap. (assumed) mmap 3 us; 128 faults of
        // 0.5 us (a zeroed 4 KiB page each; zone->lock when the per-CPU list refills,
        // every ≈ 32 pages); copy 512 KiB at ≈ 10 GB/s = 50 us; search 20 us; munmap
        // 15 us plus the shootdown.
        let n = p.int("iterations", 1, 100_000_000)? as u64;
        let forever = p.boolean("forever")?;
        let sem = "eb_mmap_sem";
        let body = vec![
            OpSpec::RwWrite(sem.into()),
            kern(dc(3_000.0)),
            OpSpec::RwUnlock(sem.into()),
            rep(
                4,
                vec![
                    kspin("eb_zone", khold()),
                    rep(
                        32,
                        vec![
                            OpSpec::RwRead(sem.into()),
                            kern(dc(500.0)),
                            OpSpec::RwUnlock(sem.into()),
                        ],
                    ),
                ],
            ),
            cpu(dlog(50_000.0, 0.1)),
            cpu(dlog(20_000.0, 0.3)),
            OpSpec::RwWrite(sem.into()),
            kern(dc(15_000.0)),
            kspin("eb_zone", khold()),
            tlb(),
            OpSpec::RwUnlock(sem.into()),
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
    // InnoDB's mutexes spin before they block (storage/innobase/sync/sync0sync.cc
    // mutex_spin_wait): innodb_sync_spin_loops = 30 rounds, each a ut_delay of
    // ut_rnd_interval(0, innodb_spin_wait_delay = 6) × 50 PAUSEs (ut0ut.cc ut_delay),
    // ≈ 4,500 PAUSEs, then sync_array_reserve_cell and os_event_wait (a futex). At ≈ 10
    // cycles per PAUSE before Skylake (Intel's optimization manual) and 3 GHz: ≈ 15 us
    // (derived), 13-17 us over the rounds' random delays.
    let spin = || dunif(13_000.0, 17_000.0);
    let innodb = |name: &str, hold: Dist| {
        vec![
            OpSpec::LockSpin(crate::workload::program::LockSpinSpec {
                mutex: m(name),
                spin: spin(),
                // its release wakes every waiter, which spins again (os_event_set)
                wake_all: true,
            }),
            cpu(hold),
            unlock(&m(name)),
        ]
    };
    // Index pages are latched with InnoDB's rw-locks (sync0rw.cc), which spin the same
    // rounds as its mutexes before they wait on the lock's event: a page read under a
    // shared latch, a row changed under an exclusive one, held while the page is
    // processed (btr_cur_search_to_nth_level, mtr). sysbench's table of 10,000 rows
    // fills ≈ 100 leaf pages of 16 KiB (≈ 100 rows of ≈ 150 bytes each, derived); each
    // connection visits them in its own rotation, so two connections meet on a page
    // now and then (what a uniform random row choice does), and only a writer makes the
    // other wait.
    const LEAVES: u64 = 100;
    let mut groups: Groups = Vec::new();
    for (i, iters) in slots(n, t, forever).into_iter().enumerate() {
        let mut next_leaf = {
            let (off, mut j) = (mix(i as u64) % LEAVES, 0u64);
            move || {
                j += 1;
                m(&format!("leaf{}", (off + j * 7) % LEAVES))
            }
        };
        // A statement: receive (io), parse (5 us, assumed), execute its page reads
        // (buffer pool lookup under the buffer pool mutex, then the page under its
        // latch), the last one latched exclusively if it changes a row (and then the
        // lock table), send (kernel 3 us).
        let mut stmt = |exec: f64, pages: u64, modifies: bool| {
            let mut v = vec![io(rtt.clone()), kern(dc(3_000.0)), cpu(dexp(5_000.0))];
            for k in 0..pages {
                let leaf = next_leaf();
                let latch = crate::workload::program::RwSpinSpec {
                    lock: leaf.clone(),
                    spin: spin(),
                };
                v.extend(innodb("buf_pool", dc(300.0)));
                v.push(if modifies && k + 1 == pages {
                    OpSpec::RwSpinWrite(latch)
                } else {
                    OpSpec::RwSpinRead(latch)
                });
                v.push(cpu(dexp(exec / pages as f64)));
                v.push(OpSpec::RwUnlock(leaf));
            }
            if modifies {
                v.extend(innodb("lock_sys", dc(1_000.0)));
            }
            v.push(kern(dc(3_000.0)));
            v
        };
        // BEGIN, 10 point selects, 4 range queries of 100 rows, 2 updates, 1 delete, 1
        // insert, COMMIT (sysbench oltp read/write).
        let mut tx = stmt(1_000.0, 1, false);
        tx.extend(innodb("trx_sys", dc(500.0)));
        tx.push(rep(10, stmt(10_000.0, 3, false)));
        tx.push(rep(4, stmt(60_000.0, 4, false)));
        tx.push(rep(2, stmt(20_000.0, 3, true)));
        tx.extend(stmt(20_000.0, 3, true));
        tx.extend(stmt(25_000.0, 4, true));
        // COMMIT: trx_sys, log_sys (the redo written to the log buffer), then the
        // redo-log flush, shared: one at a time, the commits that arrive during it
        // covered by the next (log0log.cc log_write_up_to; MySQL 8's log_flusher
        // thread batches the same way).
        tx.extend(stmt(2_000.0, 1, false));
        tx.extend(innodb("trx_sys", dc(800.0)));
        tx.extend(innodb("log_sys", dc(1_500.0)));
        tx.push(OpSpec::GroupFlush(
            crate::workload::program::GroupFlushSpec {
                name: m("redo"),
                io: fsync.clone(),
                body: Vec::new(),
            },
        ));
        tx.push(count(1));
        let name = if i == 0 {
            "connection".to_string()
        } else {
            format!("connection.{i}")
        };
        groups.push((name, 1, vec![outer(forever, iters, tx)]));
    }
    Ok(groups)
}

pub(super) const SYSBENCH_OLTP: ModelInfo = ModelInfo {
    name: "sysbench-oltp",
    description: "sysbench-OLTP-like: a server thread per connection running read/write transactions; InnoDB mutex contention, I/O; count = transactions",
    params: OLTP_PARAMS,
    footprint_kib: 8_192,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| oltp(p, t, "oltp"),
};

pub(super) const MYSQL: ModelInfo = ModelInfo {
    name: "mysql",
    description:
        "MySQL-like server under the sysbench OLTP read/write mix (same model as sysbench-oltp)",
    params: OLTP_PARAMS,
    footprint_kib: 8_192,
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
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
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
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
    queue_capacity: QUEUE_DEPTH,
    processes: Processes::One,
    build: |p, t| {
        let body = vec![OpSpec::NetRecv(1), cpu(p.dist("app")?), count(1)];
        Ok(vec![("receiver".into(), t, vec![outer(true, 0, body)])])
    },
};
