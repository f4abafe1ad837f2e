//! Process trees: a fork child starts with its parent's live blocks, and frees some of them
//! (a shell's subshells do little else). Read together with the parent's log, those frees
//! are matched to the parent's blocks live at the fork, so their size and age are known,
//! and they are counted apart from the frees of pointers that were never live.
//!
//! The child's log names its parent's log and the moment of the fork (header `parent_log`,
//! `fork_ticks`). While the logs are read in one time order, the parent's live table is
//! copied for the child when the parent's events reach the fork (or when the child's
//! first event comes, whichever is first).
use super::blocks::BlockTable;
use super::classes::SizeTable;
use recorder::LogReader;
use serde::Serialize;
use std::collections::HashMap;

/// A fork child's inheritance, as its analysis holds it.
#[derive(Default)]
pub struct Inheritance {
    /// The parent's blocks live at the fork: size, and when made (the total's clock, ns).
    pub blocks: HashMap<u64, (u64, u64)>,
    /// Where the child's time 0 lies on the total's clock.
    pub offset: u64,
    pub frees: u64,
    pub bytes: u64,
    pub age_ns_sum: u64,
}

/// What a section says of it.
#[derive(Serialize, Clone, Debug, Default)]
pub struct InheritedReport {
    /// Blocks of the parent live at the fork.
    pub blocks_at_fork: u64,
    /// Of them, freed by the child (frees that are not in `unknown_frees`).
    pub frees: u64,
    pub bytes_freed: u64,
    /// Their mean age when freed (made in the parent, freed in the child), ns.
    pub mean_age_ns: u64,
}

/// A fork whose child's log is read with its parent's.
pub struct Fork {
    parent: usize,
    child: usize,
    /// The fork in the parent's clock (ns since its reference point).
    at_ns: u64,
    done: bool,
}

/// The forks among `rs`: each fork child whose parent's log is among them.
pub fn forks(rs: &[LogReader]) -> Vec<Fork> {
    let name = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| p.into());
    let names: Vec<_> = rs.iter().map(|r| name(&r.path)).collect();
    let mut out = Vec::new();
    for (c, r) in rs.iter().enumerate() {
        let (Some(parent), Some(ticks)) = (&r.header.parent_log, r.header.fork_ticks) else { continue };
        let want = name(parent);
        let found = names.iter().position(|n| *n == want).or_else(|| {
            // The logs moved: the parent is the log of the child's parent pid that began before it.
            rs.iter().position(|p| {
                p.header.pid == r.header.ppid && p.header.start_mono_ns <= r.header.start_mono_ns
            })
        });
        if let Some(p) = found.filter(|&p| p != c) {
            out.push(Fork { parent: p, child: c, at_ns: rs[p].header.ticks_to_ns(ticks), done: false });
        }
    }
    out
}

/// Before the event at `ts` of log `from` is fed: calls `reached(parent, child)` once for
/// every fork now reached (the caller then gives the child its [`Inheritance::at_fork`]).
/// Cheap when there is nothing to do (the caller checks `pending`).
#[inline]
pub fn before_event(
    forks: &mut [Fork],
    pending: &mut usize,
    (from, ts): (usize, u64),
    mut reached: impl FnMut(usize, usize),
) {
    for f in forks.iter_mut().filter(|f| !f.done) {
        if !(f.child == from || f.parent == from && ts >= f.at_ns) {
            continue;
        }
        f.done = true;
        *pending -= 1;
        reached(f.parent, f.child);
    }
}

impl Inheritance {
    /// A fork child's inheritance: the blocks its parent has live at the fork (`live`, made
    /// on the parent's clock, whose time 0 lies at `parent_offset` on the total's clock) and
    /// those the parent itself inherited and still holds (`held`); `offset`, where the
    /// child's time 0 lies.
    pub fn at_fork(
        held: Option<&Inheritance>,
        live: &BlockTable,
        t: &SizeTable,
        parent_offset: u64,
        offset: u64,
    ) -> Inheritance {
        // A grandchild inherits too what its parent inherited and still holds; the
        // parent's own blocks win an address both name (made again since).
        let held = held.into_iter().flat_map(|i| i.blocks.iter().map(|(&ptr, &b)| (ptr, b)));
        let blocks: HashMap<u64, (u64, u64)> = held
            .chain(live.entries().map(|(ptr, b)| (ptr, (t.size(b.size_id), b.ts_ns + parent_offset))))
            .collect();
        Inheritance { blocks, offset, ..Default::default() }
    }

    /// What a section says of it.
    pub fn report(&self) -> InheritedReport {
        InheritedReport {
            blocks_at_fork: self.blocks.len() as u64 + self.frees,
            frees: self.frees,
            bytes_freed: self.bytes,
            mean_age_ns: self.age_ns_sum.checked_div(self.frees).unwrap_or(0),
        }
    }
}
