//! The replay child (`shimlog replay LOG --child BACKEND --plan DIR`): one process per
//! backend that replays the plan (child.rs), its threads (worker.rs), how they wait for one
//! another (sync.rs), and what it measures about itself (measure.rs).
pub mod child;
pub mod measure;
mod sync;
pub mod worker;
