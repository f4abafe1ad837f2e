//! Call sites: which code made the allocations, the peak, the leaks and the slow calls, from
//! the stacks a log carries (SHIM_STACKS, format version 4), taken in the analysis' one pass
//! over the log (its [`Collector`] is one more consumer of the events; `pprof` and
//! `flamegraph`, which need nothing else, read the log for it alone). `collect.rs` takes the
//! events, `symbols.rs` resolves the frames, `allocfn.rs` folds them past the program's own
//! allocation wrappers (`--alloc-fn`), `profile.rs` puts them together as a [`Profile`];
//! `rank.rs` ranks the sites for a section (`stats`, `report`), `folded.rs` folds the stacks
//! for the flame graphs; `pprof` draws on the same [`Profile`].
mod allocfn;
mod collect;
mod folded;
mod profile;
mod rank;
mod symbols;

pub use allocfn::{AllocFnArgs, AllocFns};
pub use collect::{light, Collector};
pub use folded::{folded, By, Folded};
pub use profile::{has_stacks, profile, profile_of, site_frame, Profile};
pub use rank::{SiteRow, SitesReport};
