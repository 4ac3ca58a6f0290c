use vcpulab_core::sim::world::World;
fn main() {
    let path = std::env::args().nth(1).unwrap();
    let ov: Vec<String> = std::env::args().skip(2).collect();
    let text = std::fs::read_to_string(path).unwrap();
    let sc = vcpulab_core::resolve(&text, &ov, None).unwrap();
    let mut w = World::new(&sc).unwrap();
    w.run();
    for (i, t) in w.threads.iter().enumerate() {
        println!("t{i} {} state {:?} act {:?} vcpu {:?} pc {} micro {:?} held {:?} wake_pending {} rem {:?} debt {:?}", t.name, t.state, t.act, t.vcpu, t.pc, t.micro, t.held, t.wake_pending, t.remaining, t.debt);
    }
    for (i, v) in w.vcpus.iter().enumerate() {
        println!(
            "v{i} hv {:?} act {:?} cur {:?} rq {:?} pending {}",
            v.hv,
            v.act,
            v.cur,
            v.rq,
            v.pending.len()
        );
    }
    for (i, m) in w.mutexes.iter().enumerate() {
        if m.holder.is_some() || !m.waiters.is_empty() || m.spinners > 0 {
            println!(
                "mutex{i} holder {:?} spinners {} waiters {:?}",
                m.holder, m.spinners, m.waiters
            );
        }
    }
    for (i, l) in w.locks.iter().enumerate() {
        if l.holder.is_some() || !l.waiters.is_empty() {
            println!("lock{i} holder {:?} waiters {:?}", l.holder, l.waiters);
        }
    }
}
