//! The open-loop network receiver: arrivals do not depend on the receiver, a slow or
//! descheduled receiver drops and jitters, and the counters add up.

mod common;
use common::*;

fn receiver(app: &str, extra: &str) -> String {
    format!(
        r#"
preset = "xen-default"
[run]
duration = "1s"
[host]
pcpus = 1
{extra}
[[vm]]
name = "rx"
vcpus = 1
nic = {{ rate_mbps = 100, ring = 64 }}
workload = {{ model = "iperf-udp", params = {{ app = "{app}" }} }}
"#
    )
}

#[test]
fn arrivals_are_open_loop() {
    let fast = run_toml(&receiver("1us", ""));
    let slow = run_toml(&receiver("200us", ""));
    let (f, s) = (&fast.net[0], &slow.net[0]);
    // 100 Mbit/s of 1470-byte datagrams: one every 117.6 us, 8503 in a second.
    assert_eq!(f.sent, s.sent);
    assert!((f.sent as i64 - 8503).abs() <= 1, "{}", f.sent);
    for n in [f, s] {
        assert!(n.received + n.dropped <= n.sent);
        assert!(
            n.sent - n.received - n.dropped <= 64,
            "at most a ring's worth queued"
        );
    }
    assert_eq!(f.dropped, 0);
    assert!(
        s.dropped > 3000,
        "a receiver slower than the sender drops: {s:?}"
    );
    assert!(
        (f.throughput_mbps - 100.0).abs() < 1.5,
        "{}",
        f.throughput_mbps
    );
}

/// VM "rx": one vCPU shared by a receiver of `rate_mbps` datagrams (receive, `work` of
/// computation, count) and `app` CPU-bound threads (1 ms computations), on one pCPU;
/// `host` and `vm` add lines to the host's and the VM's tables, `hog` a CPU-bound VM.
struct RxBesideApp<'a> {
    duration: &'a str,
    host: &'a str,
    vm: &'a str,
    rate_mbps: &'a str,
    ring: u32,
    work: &'a str,
    app: u32,
    hog: bool,
}

impl RxBesideApp<'_> {
    fn toml(&self) -> String {
        let hog = if self.hog {
            "[[vm]]\nname = \"hog\"\nvcpus = 1\nworkload = { model = \"cpu-bomb\" }\n"
        } else {
            ""
        };
        format!(
            r#"
preset = "xen-default"
[run]
duration = "{duration}"
[host]
pcpus = 1
{host}
[[vm]]
name = "rx"
vcpus = 1
{vm}
nic = {{ rate_mbps = {rate}, ring = {ring} }}
[vm.workload]
model = "program"
[[vm.workload.group]]
name = "receiver"
threads = 1
ops = [{{ loop = {{ n = "forever", body = [{{ net_recv = 1 }}, {{ compute = "{work}" }}, {{ count = 1 }}] }} }}]
[[vm.workload.group]]
name = "app"
threads = {app}
ops = [{{ loop = {{ n = "forever", body = [{{ compute = "1ms" }}] }} }}]
{hog}"#,
            duration = self.duration,
            host = self.host,
            vm = self.vm,
            rate = self.rate_mbps,
            ring = self.ring,
            work = self.work,
            app = self.app,
        )
    }
}

#[test]
fn a_descheduled_receiver_waits_for_the_slice() {
    // The receiver shares its VM's one vCPU with a CPU-bound application (so the vCPU
    // never halts and gets no BOOST), and the vCPU shares its pCPU with another VM's
    // hog under Xen credit: datagrams wait for the vCPU's turn, so jitter follows the
    // slice.
    let delay = |slice: &str| {
        let host = format!("[host.scheduler]\nslice_ms = {slice}");
        let text = RxBesideApp {
            duration: "2s",
            host: &host,
            vm: "",
            rate_mbps: "100",
            ring: 1024,
            work: "1us",
            app: 1,
            hog: true,
        }
        .toml();
        let n = run_toml(&text).net[0].clone();
        (n.delay_max_ms, n.delay_mean_ms)
    };
    let (long, short) = (delay("30"), delay("1"));
    assert!(
        long.0 > 20.0 && long.0 > 3.0 * short.0,
        "max delay {long:?} vs {short:?}"
    );
    assert!(long.1 > 2.0 * short.1, "mean delay {long:?} vs {short:?}");
}

#[test]
fn a_woken_receiver_preempts_the_app_on_its_own_vcpu() {
    // The device interrupt lands on the vCPU where the CPU-bound application runs and
    // wakes the receiver there: check_preempt_wakeup lets the receiver, far behind in
    // vruntime after its sleep, take the vCPU as the interrupt returns rather than
    // after the application's slice. (Two application threads taking 3 ms turns, and a
    // datagram every 9.8 ms: the running one is 0.8 ms into its turn when the receiver
    // wakes, short of the 2 ms slice of three; a thread past its slice would yield to
    // any wakee at once.)
    let text = RxBesideApp {
        duration: "1s",
        host: "",
        vm: "",
        rate_mbps: "1.2",
        ring: 64,
        work: "2us",
        app: 2,
        hog: false,
    }
    .toml();
    let r = run_toml(&text);
    let (n, vm) = (&r.net[0], &r.vms[0]);
    assert!(n.received > 95, "{n:?}");
    assert!(n.delay_mean_ms < 0.05, "mean delay {} ms", n.delay_mean_ms);
    let p99 = vm.wake_latency_p99_ns.unwrap_or(u64::MAX);
    assert!(p99 < 50_000, "wake-up latency p99 {p99} ns");
}

#[test]
fn a_tick_missed_while_descheduled_is_taken_at_entry() {
    // 1 ms host slices against a 4 ms guest tick: the receiver's vCPU (sharing it with a
    // CPU-bound application) is off its pCPU at every tick boundary. The timer interrupt
    // stays pending and the tick's check runs at the next entry, so the application
    // gives way and the receiver keeps up; were the tick lost, the application would
    // keep the vCPU for ever and nothing would be received. The same on EEVDF and CFS
    // guests (check_preempt_tick also runs only at the tick).
    for scheduler in ["eevdf", "cfs"] {
        let vm = format!("guest = {{ scheduler = \"{scheduler}\" }}");
        let text = RxBesideApp {
            duration: "1s",
            host: "[host.scheduler]\nslice_ms = 1",
            vm: &vm,
            rate_mbps: "100",
            ring: 1024,
            work: "1us",
            app: 1,
            hog: true,
        }
        .toml();
        let n = run_toml(&text).net[0].clone();
        assert!(n.received > 8_000, "{scheduler}: {n:?}");
        assert!(n.delay_mean_ms < 2.0, "{scheduler}: {n:?}");
    }
}
