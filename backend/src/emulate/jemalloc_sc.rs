//! jemalloc 5.3's size classes, computed as its src/sc.c computes them (`size_classes`,
//! `slab_size`), for the build the emulation answers as: 64-bit pointers, a 16-byte quantum
//! (LG_QUANTUM 4), 4 KiB pages (LG_PAGE 12), four classes per doubling (SC_LG_NGROUP 2), the
//! smallest class 8 bytes (SC_LG_TINY_MIN 3). These are the `arenas.bin.<i>.*`,
//! `arenas.lextent.<i>.size`, `arenas.nbins`, `arenas.nlextents` and `arenas.nhbins` a real
//! jemalloc on x86-64 Linux answers (the itest jemalloc_namespace compares them with Debian's
//! libjemalloc.so.2).

/// LG_PAGE.
pub const LG_PAGE: u32 = 12;
/// PAGE.
pub const PAGE: usize = 1 << LG_PAGE;
/// LG_QUANTUM, and QUANTUM (`arenas.quantum`).
pub const LG_QUANTUM: u32 = 4;
pub const QUANTUM: usize = 1 << LG_QUANTUM;
const LG_TINY_MIN: u32 = 3;
const LG_NGROUP: u32 = 2;
const NGROUP: usize = 1 << LG_NGROUP;
const PTR_BITS: u32 = 64;
/// SC_NTINY + SC_NPSEUDO + SC_NREGULAR (sc.h).
pub const NSIZES: usize = (LG_QUANTUM - LG_TINY_MIN) as usize
    + NGROUP
    + NGROUP * (PTR_BITS as usize - 2 - (LG_QUANTUM + LG_NGROUP) as usize + 1)
    - 1;

/// One size class: its size and, for a small one (a bin), the pages of its slab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Class {
    pub size: usize,
    /// Pages per slab; 0 for a large class.
    pub pgs: usize,
    /// Whether the size is a multiple of the page (a page size class).
    pub psz: bool,
}

/// The table, and what sc.c counts as it goes.
pub struct Classes {
    pub class: [Class; NSIZES],
    pub nbins: usize,
    pub npsizes: usize,
}

/// sc.c's slab_size: the least number of pages that a whole number of regions fills exactly.
const fn slab_pages(reg_size: usize) -> usize {
    let page = PAGE;
    let mut try_slab = page;
    let mut try_nregs = try_slab / reg_size;
    loop {
        let perfect_slab = try_slab;
        let perfect_nregs = try_nregs;
        try_slab += page;
        try_nregs = try_slab / reg_size;
        if perfect_slab == perfect_nregs * reg_size {
            return perfect_slab / page;
        }
    }
}

/// sc.c's size_class for one class.
const fn class(lg_base: u32, lg_delta: u32, ndelta: usize) -> Class {
    let size = (1usize << lg_base) + (ndelta << lg_delta);
    let bin = size < 1usize << (LG_PAGE + LG_NGROUP);
    Class { size, pgs: if bin { slab_pages(size) } else { 0 }, psz: size.is_multiple_of(PAGE) }
}

/// sc.c's size_classes.
pub const fn compute() -> Classes {
    let mut c = Classes { class: [Class { size: 0, pgs: 0, psz: false }; NSIZES], nbins: 0, npsizes: 0 };
    let mut index = 0;
    let mut lg_base = LG_TINY_MIN;
    let mut lg_delta = lg_base;
    let mut ndelta = 0usize;
    let mut ntiny = 0;
    // Tiny classes.
    while lg_base < LG_QUANTUM {
        c.class[index] = class(lg_base, lg_delta, ndelta);
        ntiny += 1;
        index += 1;
        lg_delta = lg_base;
        lg_base += 1;
    }
    // The first non-tiny (pseudo) group.
    if ntiny != 0 {
        lg_base -= 1;
        ndelta = 1;
        c.class[index] = class(lg_base, lg_delta, ndelta);
        index += 1;
        lg_base += 1;
        lg_delta += 1;
    }
    while ndelta < NGROUP {
        c.class[index] = class(lg_base, lg_delta, ndelta);
        index += 1;
        ndelta += 1;
    }
    // All remaining groups.
    lg_base += LG_NGROUP;
    while lg_base < PTR_BITS - 1 {
        ndelta = 1;
        let limit = if lg_base == PTR_BITS - 2 { NGROUP - 1 } else { NGROUP };
        while ndelta <= limit {
            c.class[index] = class(lg_base, lg_delta, ndelta);
            index += 1;
            ndelta += 1;
        }
        lg_base += 1;
        lg_delta += 1;
    }
    let mut i = 0;
    while i < index {
        if c.class[i].pgs != 0 {
            c.nbins += 1;
        }
        if c.class[i].psz {
            c.npsizes += 1;
        }
        i += 1;
    }
    c
}

/// The table, computed once by the compiler.
pub static CLASSES: Classes = compute();
/// SC_NBINS (`arenas.nbins`).
pub const NBINS: usize = compute().nbins;
/// SC_NSIZES - SC_NBINS (`arenas.nlextents`).
pub const NLEXTENTS: usize = NSIZES - NBINS;
/// SC_NPSIZES: the page size classes (`stats.arenas.<i>.extents.<j>` takes j below it).
pub const NPSIZES: usize = compute().npsizes;
/// PSSET_NPSIZES (`stats.arenas.<i>.hpa_shard.nonfull_slabs.<j>`).
pub const PSSET_NPSIZES: usize = 64;
/// The default opt.tcache_max, and tcache_maxclass (`arenas.tcache_max`).
pub const TCACHE_MAX: usize = 32 << 10;

/// sz_size2index for a class size: the index of the class of exactly `size`.
const fn index_of(size: usize) -> usize {
    let c = compute();
    let mut i = 0;
    while i < NSIZES {
        if c.class[i].size >= size {
            return i;
        }
        i += 1;
    }
    NSIZES
}

/// nhbins: the classes a thread cache holds, up to tcache_maxclass (`arenas.nhbins`).
pub const NHBINS: usize = index_of(TCACHE_MAX) + 1;

/// Bin `i`: (reg_size, nregs, slab_size); zeros past the table (jemalloc's index function
/// lets `i == nbins` through and reads past its bin_infos).
pub fn bin(i: usize) -> (usize, u32, usize) {
    match CLASSES.class.get(i) {
        Some(c) if i < NBINS => {
            let slab = c.pgs * PAGE;
            (c.size, (slab / c.size) as u32, slab)
        }
        _ => (0, 0, 0),
    }
}

/// Large class `i` (`arenas.lextent.<i>.size`); 0 past the table.
pub fn lextent(i: usize) -> usize {
    match CLASSES.class.get(NBINS + i) {
        Some(c) if i < NLEXTENTS => c.size,
        _ => 0,
    }
}

/// The largest page size class: jemalloc's default `arena.<i>.retain_grow_limit`.
pub fn largest_psize() -> usize {
    CLASSES.class.iter().rev().find(|c| c.psz).map_or(0, |c| c.size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_are_sc_h_s() {
        // sc.h's formulas, on x86-64 with 4 KiB pages.
        assert_eq!((NSIZES, NBINS, NLEXTENTS, NPSIZES, NHBINS), (232, 36, 196, 199, 41));
        assert_eq!(bin(0), (8, 512, 4096));
        assert_eq!(bin(35), (14336, 2, 28672));
        assert_eq!(bin(36), (0, 0, 0));
        assert_eq!(lextent(0), 16384);
        assert_eq!(lextent(195), 7 << 60);
        assert_eq!(largest_psize(), 7 << 60);
    }
}
