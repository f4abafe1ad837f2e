//! Call sites: which code made the allocations, the peak, the leaks and the slow calls, from
//! the stacks a log carries (SHIM_STACKS, format version 4): a second pass over a log with
//! stacks, beside the analysis' pass. `collect.rs` reads the log, `symbols.rs` resolves the
//! frames, `profile.rs` puts them together as a [`Profile`]; `rank.rs` ranks the sites for
//! a section (`stats`, `report`), `folded.rs` folds the stacks for the flame graphs; `pprof`
//! draws on the same [`Profile`].
mod collect;
mod folded;
mod profile;
mod rank;
mod symbols;

pub use folded::{folded, By, Folded};
pub use profile::{has_stacks, profile, Profile};
pub use rank::{SiteRow, SitesReport};
