//! The discrete-event engine: time, typed ids, the event queue and seeded RNG streams.

pub(crate) mod build;
pub mod ids;
pub(crate) mod prefetch;
pub mod queue;
pub mod rng;
pub mod round;
pub mod time;
pub mod world;

pub use ids::{LockId, PcpuId, ThreadId, VcpuId, VmId};
pub use queue::EventQueue;
pub use rng::Rng;
pub use time::Nanos;
