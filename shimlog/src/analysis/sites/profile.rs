//! A log's call-site profile: its stacks with their totals (collect.rs's pass over the log)
//! and their frames resolved to functions, files and lines (symbols.rs); which frames are
//! allocation wrappers rather than call sites ([`is_wrapper`], [`site_frame`]).
use super::collect::{self, Collected};
use super::symbols::{Frame, Symbols};
use recorder::LogReader;
use std::path::Path;

/// A log's stacks with their totals and their frames resolved.
pub struct Profile {
    pub c: Collected,
    /// Frames of each stack, innermost first (inlined frames expanded).
    pub frames: rustc_hash::FxHashMap<u32, Vec<Frame>>,

    pub by_pc: rustc_hash::FxHashMap<u64, Vec<Frame>>,
    pub mode: String,
    pub unwind: String,
    pub issues: Vec<String>,
}

/// Whether the log was written with stacks at all.
pub fn has_stacks(r: &LogReader) -> bool {
    matches!(r.header.stacks.as_deref(), Some("slow" | "sample" | "all"))
}

/// Reads the log's stacks (a pass of its own over the log) and resolves their frames.
pub fn profile(r: &LogReader, binaries: Option<&Path>) -> Profile {
    profile_of(collect::collect(r), r, binaries)
}

/// The profile of what a [`Collector`](super::collect::Collector) took from `r`'s events
/// (in the analysis' pass), its frames resolved.
pub fn profile_of(c: Collected, r: &LogReader, binaries: Option<&Path>) -> Profile {
    let mut sym = Symbols::new(&c.mappings, binaries);
    let mut frames = rustc_hash::FxHashMap::default();
    let mut by_pc = rustc_hash::FxHashMap::default();
    for (&id, pcs) in &c.stacks {
        let mut f = Vec::new();
        for &pc in pcs {
            let fr = sym.resolve(pc).to_vec();
            f.extend(fr.iter().cloned());
            by_pc.insert(pc, fr);
        }
        frames.insert(id, f);
    }
    let mut issues = c.issues.clone();
    issues.append(&mut sym.issues);
    Profile {
        mode: r.header.stacks.clone().unwrap_or_default(),
        unwind: r.header.unwind.clone().unwrap_or_default(),
        c,
        frames,
        by_pc,
        issues,
    }
}

/// Functions that only pass an allocation on (the C library's, C++'s operator new, Rust's
/// allocation layers): the site is the first frame past them.
pub fn is_wrapper(f: &str) -> bool {
    const P: &[&str] = &[
        "malloc",
        "calloc",
        "realloc",
        "free",
        "posix_memalign",
        "aligned_alloc",
        "memalign",
        "operator new",
        "operator delete",
        "__rust_alloc",
        "__rust_realloc",
        "__rust_alloc_zeroed",
        "__rdl_",
        "__rg_",
        "alloc::",
        "<alloc::",
        "std::sys::alloc",
        "std::sys::pal",
        "std::alloc",
        "<std::alloc",
        "core::",
        "<core::",
        "_ZN5alloc",
        "__rustc::",
    ];
    // A Rust global allocator's own layer (tikv-jemallocator, mimalloc, any other crate's).
    // Also a trait impl of alloc's (`<u8 as alloc::vec::spec_from_elem::SpecFromElem>`, vec![x; n])
    // and hashbrown's allocation layer.
    P.iter().any(|p| f.starts_with(p))
        || f.contains(" as core::alloc::global::GlobalAlloc>::")
        || f.contains(" as alloc::")
        || f.starts_with("hashbrown::raw::alloc::")
}

/// The frame that names stack `id`'s call site.
pub fn site_frame(p: &Profile, id: u32) -> Option<&Frame> {
    let f = p.frames.get(&id)?;
    f.iter().find(|f| !is_wrapper(&f.function)).or(f.first())
}

#[cfg(test)]
mod tests {
    use super::is_wrapper;

    #[test]
    fn allocator_layers_are_not_sites() {
        for f in [
            "malloc",
            "operator new(unsigned long)",
            "__rust_alloc",
            "__rustc::__rust_realloc",
            "alloc::raw_vec::finish_grow",
            "<tikv_jemallocator::Jemalloc as core::alloc::global::GlobalAlloc>::alloc",
            "<mimalloc::MiMalloc as core::alloc::global::GlobalAlloc>::realloc",
            "<u8 as alloc::vec::spec_from_elem::SpecFromElem>::from_elem",
            "hashbrown::raw::alloc::inner::do_alloc",
        ] {
            assert!(is_wrapper(f), "{f}");
        }
        for f in [
            "validator::bank::execute",
            "b",
            "PyObject_Malloc",
            "std::collections::hash::map::HashMap<K,V>::insert",
        ] {
            assert!(!is_wrapper(f), "{f}");
        }
    }
}
