//! Distinct request sizes, and the size class each backend gives each of them.
//!
//! Every size seen is interned once (one small hash lookup per allocation) and analyses
//! refer to it by id. A size's classes are asked of the backends themselves
//! ([`shim_backend::size_class`]: jemalloc `nallocx`, mimalloc `mi_good_size`, glibc by
//! allocating and reading `malloc_usable_size`) the first time a successful allocation of
//! that size is seen, and cached: nothing here is a table typed by hand. Alignment is not
//! taken into account (the class of an aligned request is that of its size).
use rustc_hash::FxHashMap;
use shim_backend::Backend;

pub const NB: usize = Backend::ALL.len();

/// A size whose classes have not been asked for yet.
const UNKNOWN: u32 = u32::MAX;
const SMALL: usize = 1 << 16;

/// One backend's classes, in the order they were first met.
#[derive(Default)]
pub struct ClassList {
    pub sizes: Vec<u64>,
    ids: FxHashMap<u64, u32>,
}

impl ClassList {
    fn id(&mut self, class: u64) -> u32 {
        if let Some(&i) = self.ids.get(&class) {
            return i;
        }
        let i = self.sizes.len() as u32;
        self.sizes.push(class);
        self.ids.insert(class, i);
        i
    }
}

/// Shared by every log of one run, so that ids mean the same size in every section.
pub struct SizeTable {
    /// Ids of sizes from SMALL up; a smaller size is its own id.
    ids: FxHashMap<u64, u32>,
    /// The size of each id.
    pub sizes: Vec<u64>,
    /// Per id and backend: class id (UNKNOWN until asked) and bytes lost to rounding.
    class_of: Vec<[u32; NB]>,
    slop_of: Vec<[u64; NB]>,
    pub classes: [ClassList; NB],
}

impl Default for SizeTable {
    fn default() -> Self {
        // Sizes below SMALL, most requests, are their own ids: no lookup, and their
        // per-size counters lie together whatever order sizes are first seen in.
        SizeTable {
            ids: FxHashMap::default(),
            sizes: (0..SMALL as u64).collect(),
            class_of: vec![[UNKNOWN; NB]; SMALL],
            slop_of: vec![[0; NB]; SMALL],
            classes: Default::default(),
        }
    }
}

/// What the slop analysis needs about one size.
#[derive(Clone, Copy)]
pub struct SizeClasses {
    pub class: [u32; NB],
    pub slop: [u64; NB],
}

impl SizeTable {
    /// The id of `size`, interning it on first sight.
    #[inline(always)]
    pub fn id(&mut self, size: u64) -> u32 {
        if size < SMALL as u64 {
            return size as u32;
        }
        if let Some(&i) = self.ids.get(&size) {
            return i;
        }
        self.new_id(size)
    }

    #[cold]
    fn new_id(&mut self, size: u64) -> u32 {
        let i = self.sizes.len() as u32;
        self.sizes.push(size);
        self.class_of.push([UNKNOWN; NB]);
        self.slop_of.push([0; NB]);
        self.ids.insert(size, i);
        i
    }

    /// The id of a size below SMALL (its own value), or the largest such id for a larger
    /// size (whose own id takes a lookup): for prefetching.
    #[inline(always)]
    pub fn small_id_or_last(size: u64) -> u32 {
        size.min(SMALL as u64 - 1) as u32
    }

    /// The size of id `id`. A small one is its own id: no load from the table, which every
    /// free would otherwise make at a random place.
    #[inline(always)]
    pub fn size(&self, id: u32) -> u64 {
        if (id as usize) < SMALL {
            id as u64
        } else {
            self.sizes[id as usize]
        }
    }

    /// The classes of size `id` in every backend (asked of the backends on first use).
    #[inline(always)]
    pub fn classes(&mut self, id: u32) -> SizeClasses {
        let i = id as usize;
        if self.class_of[i][0] == UNKNOWN {
            self.ask(i);
        }
        SizeClasses { class: self.class_of[i], slop: self.slop_of[i] }
    }

    #[cold]
    fn ask(&mut self, i: usize) {
        let size = self.sizes[i];
        for (b, backend) in Backend::ALL.iter().enumerate() {
            let class = backend_class(*backend, size);
            self.class_of[i][b] = self.classes[b].id(class);
            self.slop_of[i][b] = class.saturating_sub(size);
        }
    }
}

/// The usable size a request of `size` bytes gets from `b`. A request no allocator could
/// serve (larger than the address space, or one glibc refuses) is its own class.
pub fn backend_class(b: Backend, size: u64) -> u64 {
    // Past this no backend can succeed, and glibc would try to map it.
    const MAX: u64 = 1 << 47;
    if size > MAX {
        return size;
    }
    (shim_backend::size_class(b, size as usize) as u64).max(size)
}
