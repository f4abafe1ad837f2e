//! The allocator's own statistics, where it keeps them (for replay reports).
use crate::Backend;

/// Named counters, in bytes unless the name says otherwise.
pub fn allocator_stats(b: Backend) -> Vec<(&'static str, u64)> {
    match b {
        Backend::Jemalloc => {
            let mut v = Vec::new();
            for (name, key) in [
                ("allocated", c"stats.allocated"),
                ("active", c"stats.active"),
                ("resident", c"stats.resident"),
                ("mapped", c"stats.mapped"),
                ("metadata", c"stats.metadata"),
                ("retained", c"stats.retained"),
            ] {
                if let Some(x) = crate::jemalloc::stat(key) {
                    v.push((name, x));
                }
            }
            v
        }
        Backend::Mimalloc => {
            let (cc, pc, pf) = crate::mimalloc::process_info();
            vec![
                ("current_commit", cc as u64),
                ("peak_commit", pc as u64),
                ("page_faults", pf as u64),
            ]
        }
        Backend::Glibc => {
            let m = unsafe { libc::mallinfo2() };
            vec![
                ("arena", m.arena as u64),
                ("mmapped", m.hblkhd as u64),
                ("in_use", m.uordblks as u64),
                ("free", m.fordblks as u64),
                ("releasable", m.keepcost as u64),
            ]
        }
    }
}
