//! Which wrapper replaces an entry point: wrappers.rs has the malloc family's and the
//! allocators' statistics calls, mozjemalloc.rs mozjemalloc's own calls, mi_api.rs mimalloc's
//! heaps; each answers 0 for a kind that is not its own. Asked by mod.rs (patching) and
//! native.rs, so that none of the three needs to know the others.
use super::entries::Kind;
use super::{mi_api, mozjemalloc, wrappers};

/// The address of `kind`'s wrapper in `slot`.
pub fn wrapper(kind: Kind, slot: usize) -> usize {
    match mozjemalloc::address(kind, slot) {
        0 => match mi_api::address(kind, slot) {
            0 => wrappers::address(kind, slot),
            a => a,
        },
        a => a,
    }
}
