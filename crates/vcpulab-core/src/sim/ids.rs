//! Typed ids: indices into the simulator's arenas.

use serde::Serialize;

macro_rules! id {
    ($name:ident) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        pub struct $name(pub u32);
        impl $name {
            #[inline]
            pub fn idx(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id!(PcpuId);
id!(VmId);
id!(VcpuId);
id!(ThreadId);
id!(LockId);
