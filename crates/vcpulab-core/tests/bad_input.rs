use vcpulab_core::resolve;

fn err(text: &str, overrides: &[&str]) -> String {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    match resolve(text, &o, None) {
        Ok(_) => panic!("accepted bad input: {text} {overrides:?}"),
        Err(e) => e.to_string(),
    }
}

const OK: &str = "[host]\npcpus = 2\n[[vm]]\nvcpus = 2\nworkload = { model = \"matmul\" }\n";

#[test]
fn typo_in_key_names_the_key_and_the_allowed_ones() {
    let e = err("[host]\npcpus = 2\n[host.scheduler]\nkind = \"credit\"\nslcie_ms = 3\n[[vm]]\nvcpus = 1\nworkload = { model = \"matmul\" }\n", &[]);
    assert!(
        e.contains("slcie_ms") && e.contains("slice_ms") && !e.contains('\n'),
        "{e}"
    );
    let e = err("[hots]\npcpus = 2\n", &[]);
    assert!(e.contains("hots"), "{e}");
    let e = err(
        "[host]\npcpus = 2\n[[vm]]\nvcpus = 1\nwieght = 3\nworkload = { model = \"matmul\" }\n",
        &[],
    );
    assert!(e.contains("wieght") && e.contains("vm"), "{e}");
}

#[test]
fn impossible_values_name_key_value_and_range() {
    let e = err(OK, &["host.pcpus=0"]);
    assert!(
        e.starts_with("host.pcpus") && e.contains('0') && e.contains("1024"),
        "{e}"
    );
    let e = err(OK, &["vm.0.vcpus=0"]);
    assert!(e.starts_with("vm.0.vcpus"), "{e}");
    let e = err(OK, &["host.scheduler.llc_pcpus=0"]);
    assert!(
        e.starts_with("host.scheduler.llc_pcpus") && e.contains("1 to 1024"),
        "{e}"
    );
    // Xen's schedulers have no LLC parameter: the key is unknown there.
    let e = err(
        OK,
        &["host.scheduler.kind=credit", "host.scheduler.llc_pcpus=8"],
    );
    assert!(e.contains("llc_pcpus") && e.contains("slice_ms"), "{e}");
    let e = err(
        OK,
        &["host.scheduler.kind=credit", "host.scheduler.slice_ms=0.01"],
    );
    assert!(e.contains("slice_ms") && e.contains("0.1"), "{e}");
    let e = err(OK, &["vm.0.pin=0-5"]);
    assert!(e.contains("vm.0.pin") && e.contains("pCPU 5"), "{e}");
    let e = err(OK, &["run.duration=forever"]);
    assert!(e.contains("run.duration") || e.contains("run"), "{e}");
    let e = err(OK, &["vm.0.workload.model=matmull"]);
    assert!(e.contains("matmull") && e.contains("cpu-bomb"), "{e}");
    let e = err(OK, &["vm.0.workload.params.wrok=\"1s\""]);
    assert!(e.contains("wrok") && e.contains("work"), "{e}");
    let e = err(OK, &["vm.0.weight=-3"]);
    assert!(e.contains("weight"), "{e}");
    let e = err(OK, &["preset=kvm-defualt"]);
    assert!(
        e.contains("kvm-defualt") && e.contains("kvm-default"),
        "{e}"
    );
    let e = err(OK, &["host.scheduler.kind=bvt"]);
    assert!(
        e.contains("bvt") && e.contains("eevdf") && e.contains("cfs"),
        "{e}"
    );
}

#[test]
fn malformed_overrides_and_toml_are_rejected() {
    assert!(err(OK, &["host.pcpus"]).contains("key=value"));
    assert!(err(OK, &["vm.3.weight=2"]).contains("out of range"));
    let e = err("[host\npcpus = 2", &[]);
    assert!(e.contains("line 1"), "{e}");
    let e = err("[host]\npcpus = 2\n", &[]);
    assert!(e.contains("no VM"), "{e}");
}

#[test]
fn resolved_scenarios_round_trip() {
    let sc = resolve(OK, &["preset=xen-default".into()], Some(5)).unwrap();
    let text = sc.to_toml();
    let again = resolve(&text, &[], None).unwrap();
    assert_eq!(again.to_toml(), text);
    assert!(text.contains("kind = \"credit\"") && text.contains("seed = 5"));
}

#[test]
fn warm_up_and_tlb_parameters_are_checked() {
    let e = err(OK, &["run.duration=1s", "run.warmup=2s"]);
    assert!(
        e.contains("run.warmup") && e.contains("run.duration"),
        "{e}"
    );
    let e = err(OK, &["host.cache.page_walk_ref_ns=-1"]);
    assert!(
        e.contains("host.cache.page_walk_ref_ns") && e.contains("-1"),
        "{e}"
    );
    let e = err(OK, &["host.cache.tlb_entries=0"]);
    assert!(e.contains("host.cache.tlb_entries"), "{e}");
}

#[test]
fn a_ple_action_the_scheduler_cannot_do_is_refused() {
    let e = err(OK, &["host.ple.action=yield-to-head"]);
    assert!(
        e.starts_with("host.ple.action")
            && e.contains("yield-to-head")
            && e.contains("eevdf")
            && e.contains("directed-yield, yield, coschedule"),
        "{e}"
    );
    let e = err(OK, &["host.scheduler.kind=gang", "host.ple.action=cvs"]);
    assert!(e.contains("cvs") && e.contains("gang"), "{e}");
    let e = err(
        OK,
        &["host.scheduler.kind=gang", "host.ple.action=coschedule"],
    );
    assert!(e.contains("coschedule") && e.contains("gang"), "{e}");
    // Carried out by credit; and with PLE off the action is moot.
    let o: Vec<String> = ["host.scheduler.kind=credit", "host.ple.action=cvs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(resolve(OK, &o, None).is_ok());
    let o: Vec<String> = ["host.ple.policy=off", "host.ple.action=cvs"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(resolve(OK, &o, None).is_ok());
}

/// `count = 0` leaves a VM out (a sweep over co-runners can start from none); leaving
/// every VM out is the empty scenario's error, and a count past 1,024 is refused.
#[test]
fn a_vm_of_count_zero_is_left_out() {
    let two = "[host]\npcpus = 2\n[[vm]]\nname = \"a\"\nvcpus = 2\nworkload = { model = \"matmul\" }\n[[vm]]\nname = \"b\"\nvcpus = 1\nworkload = { model = \"cpu-bomb\" }\n";
    let names = |overrides: &[&str]| -> Vec<String> {
        let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        let sc = resolve(two, &o, None).expect("resolves");
        sc.vm
            .iter()
            .map(|v| v.name.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(names(&[]), ["a", "b"]);
    assert_eq!(names(&["vm.1.count=0"]), ["a"]);
    assert_eq!(names(&["vm.0.count=0"]), ["b"]);
    assert_eq!(names(&["vm.1.count=2"]), ["a", "b-0", "b-1"]);
    let e = err(two, &["vm.0.count=0", "vm.1.count=0"]);
    assert!(e.contains("no VM"), "{e}");
    let e = err(two, &["vm.1.count=1025"]);
    assert!(
        e.starts_with("vm.1.count") && e.contains("0 (leave the VM out) to 1024"),
        "{e}"
    );
}

/// Guest cpusets name vCPUs past 128 on large VMs, in `guest.cpuset` and in the
/// `cpuset` operation (a 128-bit set once wrapped vCPU 150 onto 22).
#[test]
fn cpusets_reach_vcpus_past_128() {
    use vcpulab_core::metrics::report::{scenario_hash, Report};
    use vcpulab_core::sim::world::World;
    let busy = |text: &str| -> Vec<u32> {
        let sc = resolve(text, &[], None).expect("resolves");
        let mut w = World::new(&sc).expect("builds");
        let cause = w.run();
        let r = Report::build(&sc, &w, cause, scenario_hash(&sc));
        r.vcpus
            .iter()
            .filter(|v| v.time.user_ns > 0)
            .map(|v| v.vcpu)
            .collect()
    };
    let guest = "[run]\nduration = \"50ms\"\n[host]\npcpus = 4\n[[vm]]\nvcpus = 200\nguest = {cpuset = \"150-199\"}\nworkload = {model = \"cpu-bomb\", threads = 4}\n";
    assert_eq!(busy(guest), [150, 151, 152, 153]);
    let op = "[run]\nduration = \"50ms\"\n[host]\npcpus = 8\n[[vm]]\nvcpus = 200\n[vm.workload]\nmodel = \"program\"\n[[vm.workload.group]]\nthreads = 2\nops = [{cpuset = \"130-131\"}, {loop = {n = \"forever\", body = [{compute = \"100us\"}, {count = 1}]}}]\n";
    let b = busy(op);
    assert!(
        !b.is_empty() && b.iter().all(|v| (130..=131).contains(v)),
        "{b:?}"
    );
    let e = err(
        "[host]\npcpus = 4\n[[vm]]\nvcpus = 200\nguest = {cpuset = \"150-200\"}\nworkload = {model = \"cpu-bomb\"}\n",
        &[],
    );
    assert!(
        e.starts_with("vm.0.guest.cpuset") && e.contains("vCPU 200"),
        "{e}"
    );
}

/// A scheduler parameter of the wrong type names its own key (the `kind` tag hid it:
/// the error said only `host.scheduler`).
#[test]
fn a_scheduler_parameter_of_the_wrong_type_names_its_key() {
    let xen = "[host]\npcpus = 2\n[host.scheduler]\nkind = \"credit\"\n[[vm]]\nvcpus = 1\nworkload = { model = \"matmul\" }\n";
    let e = err(xen, &["host.scheduler.slice_ms=\"10ms\""]);
    assert!(e.starts_with("host.scheduler.slice_ms"), "{e}");
    let e = err(
        OK,
        &[
            "host.scheduler.kind=\"cfs\"",
            "host.scheduler.latency_ms=\"24ms\"",
        ],
    );
    assert!(e.starts_with("host.scheduler.latency_ms"), "{e}");
    let e = err(
        OK,
        &[
            "host.scheduler.kind=\"eevdf\"",
            "host.scheduler.per_vm_groups=\"yes\"",
        ],
    );
    assert!(e.starts_with("host.scheduler.per_vm_groups"), "{e}");
}

/// A pCPU number pins as the one-CPU list it is; a negative one is still refused.
#[test]
fn pins_may_be_numbers() {
    let o = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let one = resolve(OK, &o(&["vm.0.pin=1"]), None).expect("pin = 1");
    let listed = resolve(OK, &o(&["vm.0.pin=\"1\""]), None).expect("pin = \"1\"");
    assert_eq!(one.vm[0].pin, listed.vm[0].pin);
    let each = resolve(OK, &o(&["vm.0.pin=[0, 1]"]), None).expect("pin = [0, 1]");
    assert_eq!(
        each.vm[0].pin,
        Some(vcpulab_core::scenario::PinSpec::PerVcpu(vec![
            "0".into(),
            "1".into()
        ]))
    );
    let e = err(OK, &["vm.0.pin=-1"]);
    assert!(e.contains("pin"), "{e}");
}

/// `run.focus` names a VM written with `count` copies by its first copy, so a sweep of
/// the count keeps its focus; an unknown name still lists the VMs.
#[test]
fn the_focus_may_name_a_vm_of_several_copies() {
    let text = "[run]\nfocus = \"app\"\n[host]\npcpus = 2\n[[vm]]\nname = \"hog\"\nvcpus = 1\nworkload = { model = \"matmul\" }\n[[vm]]\nname = \"app\"\nvcpus = 1\nworkload = { model = \"matmul\" }\n";
    let o = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    for (count, at) in [(1, 1), (3, 1)] {
        let sc = resolve(text, &o(&[&format!("vm.1.count={count}")]), None).expect("resolves");
        assert_eq!(
            vcpulab_core::scenario::modes::focus_index(&sc).ok(),
            Some(at),
            "count {count}"
        );
    }
    let e = err(text, &["run.focus=\"apq\""]);
    assert!(e.contains("apq") && e.contains("app"), "{e}");
}

/// A number where a name is wanted says the allowed names, not the deserializer's
/// "invalid type: unit variant".
#[test]
fn a_number_for_a_named_choice_lists_the_names() {
    for (key, names) in [
        ("guest.spinlock", "`ticket`"),
        ("guest.rwsem_spin", "`writer-owner`"),
        ("host.ple.policy", "`fixed`"),
        ("vm.0.guest.idle", "`haltpoll`"),
    ] {
        let e = err(OK, &[&format!("{key}=3")]);
        assert!(e.contains(&key.replace(".0.", "[0].")), "{e}");
        assert!(e.contains("3 is not allowed"), "{e}");
        assert!(e.contains(names) && !e.contains("unit variant"), "{e}");
        assert!(!e.contains(" in `"), "{e}");
    }
}

/// A duration given as a bare number is refused with the unit it lacks.
#[test]
fn a_duration_without_a_unit_says_so() {
    let e = err(OK, &["run.duration=5"]);
    assert!(e.contains("run.duration") && e.contains("no unit"), "{e}");
    assert!(e.contains("\"5ms\""), "{e}");
    let e = err(OK, &["run.duration=0.5"]);
    assert!(e.contains("no unit") && e.contains("\"0.5ms\""), "{e}");
    let e = err(OK, &["run.duration=\"5 parsecs\""]);
    assert!(e.contains("is not a duration"), "{e}");
}
