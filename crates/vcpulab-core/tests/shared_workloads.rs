//! VMs of one workload spec share their compiled programs (a `count = N` table builds
//! its workload once); the VMs still get synchronization objects of their own.
use std::rc::Rc;
use vcpulab_core::sim::world::World;
use vcpulab_core::sim::VmId;

fn world(text: &str) -> World {
    let sc = vcpulab_core::resolve(text, &[], None).expect("scenario resolves");
    World::new(&sc).expect("world builds")
}

#[test]
fn vms_of_one_spec_share_their_programs_and_others_do_not() {
    let w = world(
        "[host]\npcpus = 4\n[[vm]]\nvcpus = 2\ncount = 2\nworkload = { model = \"dedup\" }\n\
         [[vm]]\nvcpus = 2\nworkload = { model = \"dedup\", params = { scale = 0.5 } }\n\
         [[vm]]\nvcpus = 4\nworkload = { model = \"dedup\", params = { scale = 0.5 } }\n",
    );
    let program = |vm: u32| {
        &w.threads
            .iter()
            .find(|t| t.vm == VmId(vm))
            .expect("the VM has threads")
            .program
    };
    assert!(Rc::ptr_eq(program(0), program(1)), "two VMs of one table");
    assert!(!Rc::ptr_eq(program(1), program(2)), "other params");
    assert!(
        !Rc::ptr_eq(program(2), program(3)),
        "same params, other vCPU count"
    );
    // Each VM still has its own synchronization objects.
    assert_ne!(w.vms[0].bases.mutex, w.vms[1].bases.mutex);
}
