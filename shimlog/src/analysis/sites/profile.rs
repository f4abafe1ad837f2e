//! A log's call-site profile: its stacks with their totals (collect.rs's pass over the log)
//! and their frames resolved to functions, files and lines (symbols.rs); which frames are
//! allocation wrappers rather than call sites ([`is_wrapper`], [`site_frame`]).
use super::allocfn::{fold, AllocFns, Cut, Folding, PcMatch};
use super::collect::{self, Collected};
use super::symbols::{Frame, Symbols};
use recorder::LogReader;
use std::path::Path;

/// A log's stacks with their totals and their frames resolved.
pub struct Profile {
    pub c: Collected,
    /// Frames of each stack, innermost first (inlined frames expanded), from the caller of
    /// the program's allocation wrappers on (`--alloc-fn`, allocfn.rs).
    pub frames: rustc_hash::FxHashMap<u32, Vec<Frame>>,
    /// Each return address' frames, innermost first.
    pub by_pc: rustc_hash::FxHashMap<u64, Vec<Frame>>,
    /// Where the stacks folded past the wrappers are cut (absent: whole).
    pub cuts: rustc_hash::FxHashMap<u32, Cut>,
    /// The wrappers in force, as a pprof profile's `drop_frames` (empty: none).
    pub drop_frames: String,
    pub mode: String,
    pub unwind: String,
    pub issues: Vec<String>,
}

/// Whether the log was written with stacks at all.
pub fn has_stacks(r: &LogReader) -> bool {
    matches!(r.header.stacks.as_deref(), Some("slow" | "sample" | "all"))
}

/// Reads the log's stacks (a pass of its own over the log) and resolves their frames.
pub fn profile(r: &LogReader, binaries: Option<&Path>, wrappers: &AllocFns) -> Profile {
    profile_of(collect::collect(r), r, binaries, wrappers)
}

/// The profile of what a [`Collector`](super::collect::Collector) took from `r`'s events
/// (in the analysis' pass), its frames resolved and folded past the program's allocation
/// `wrappers`: each return address resolved and matched once, each stack cut once.
pub fn profile_of(c: Collected, r: &LogReader, binaries: Option<&Path>, wrappers: &AllocFns) -> Profile {
    let mut sym = Symbols::new(&c.mappings, binaries);
    let mut frames = rustc_hash::FxHashMap::default();
    let mut by_pc: rustc_hash::FxHashMap<u64, Vec<Frame>> = rustc_hash::FxHashMap::default();
    let mut matched: rustc_hash::FxHashMap<u64, PcMatch> = rustc_hash::FxHashMap::default();
    let mut cuts = rustc_hash::FxHashMap::default();
    let mut whole = (0u64, String::new());
    for (&id, pcs) in &c.stacks {
        let mut m = Vec::with_capacity(pcs.len());
        for &pc in pcs {
            by_pc.entry(pc).or_insert_with(|| {
                let fr = sym.resolve(pc).to_vec();
                matched.insert(pc, PcMatch::of(wrappers, fr.iter().map(|f| f.function.as_str())));
                fr
            });
            m.push(matched[&pc]);
        }
        let cut = match fold(&m) {
            Folding::Cut(cut) => cut,
            Folding::Whole => Cut::default(),
            Folding::AllWrappers => {
                whole.0 += 1;
                if let Some(root) = pcs.last().and_then(|pc| by_pc[pc].last()) {
                    whole.1 = root.function.clone();
                }
                Cut::default()
            }
        };
        let mut f = Vec::new();
        for (k, pc) in pcs.iter().enumerate().skip(cut.pcs) {
            let skip = if k == cut.pcs { cut.frames } else { 0 };
            f.extend(by_pc[pc].iter().skip(skip).cloned());
        }
        if cut != Cut::default() {
            cuts.insert(id, cut);
        }
        frames.insert(id, f);
    }
    let mut issues = c.issues.clone();
    issues.append(&mut sym.issues);
    if whole.0 > 0 {
        issues.push(format!(
            "--alloc-fn: every frame of {} of the {} stacks is a wrapper (their root {} matches {}): those stacks are left whole",
            whole.0,
            c.stacks.len(),
            whole.1,
            wrappers.which(&whole.1).join(", ")
        ));
    }
    Profile {
        mode: r.header.stacks.clone().unwrap_or_default(),
        unwind: r.header.unwind.clone().unwrap_or_default(),
        c,
        frames,
        by_pc,
        cuts,
        drop_frames: wrappers.drop_frames(),
        issues,
    }
}

impl Profile {
    /// Stack `id`'s return addresses past the wrappers, innermost first, and how many of
    /// the first one's (inlined) frames are the wrappers'.
    pub fn kept_pcs(&self, id: u32) -> (&[u64], usize) {
        let pcs = self.c.stacks.get(&id).map(|v| v.as_slice()).unwrap_or(&[]);
        let cut = self.cuts.get(&id).copied().unwrap_or_default();
        (&pcs[cut.pcs.min(pcs.len())..], cut.frames)
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
