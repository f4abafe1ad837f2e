//! Putting a batch's records together from its columns' values: the tables of what each
//! operation byte takes from which column, the straight-line path of the allocation records
//! and the general one of the rest; the predictions as the encoder made them.
use super::super::model::{Model, CLASSES};
use super::super::*;
use super::{At, Vals};
use crate::buffer::RawArgs;
use crate::event::Field;
use crate::varint::unzigzag;

/// How many values a record takes from each column, by its operation byte: 10 bits per
/// column (a batch's sums fit), in this order, and a count of unknown operations.
pub(super) const SH_SIZE: u32 = 0;
pub(super) const SH_ALLOC: u32 = 10;
pub(super) const SH_FREE: u32 = 20;
pub(super) const SH_OTHER: u32 = 30;
pub(super) const SH_BACKEND: u32 = 40;
pub(super) const SH_BAD: u32 = 50;

/// What the common path needs to know of a record, by its operation byte: an allocation
/// record with its pointers predicted (every record but the thread's and process's own and
/// the verbatim ones), and which fields it has.
pub(super) const K_COMMON: u16 = 1;
pub(super) const K_SIZE: u16 = 2;
/// A count or an alignment (in OTHER).
pub(super) const K_OTHER: u16 = 4;
/// Releases a block (free, realloc's old block): its pointer in FREE.
pub(super) const K_RELEASES: u16 = 8;
/// Returns a block: its pointer in ALLOC.
pub(super) const K_ALLOCATES: u16 = 16;
pub(super) const K_SIZED_FREE: u16 = 32;
/// Its OTHER is a count, and its block is count x size bytes.
pub(super) const K_COUNT: u16 = 64;
/// The released block is `old` (realloc), not `ptr` (free).
pub(super) const K_OLD: u16 = 128;
pub(super) const K_TIMED: u16 = 256;

/// The two tables by operation byte: how many values each column gives the record (the
/// SH_ fields), and its kind (the K_ bits; 0 for the general path).
pub(super) fn tables() -> (Box<[u64; 256]>, Box<[u16; 256]>) {
    let (mut needs, mut kinds) = (Box::new([0u64; 256]), Box::new([0u16; 256]));
    for tag in 0..=255u8 {
        let Some(op) = Op::from_u8(tag & COL_OP_MASK) else {
            needs[tag as usize] = 1 << SH_BAD;
            continue;
        };
        let (alloc, verbatim, timed) = (op.is_alloc_family(), tag & COL_VERBATIM != 0, tag & COL_TIMED != 0);
        let mut n = (timed as u64) << SH_BACKEND;
        let mut k = if alloc && !verbatim { K_COMMON } else { 0 };
        for f in op.layout() {
            let (col, bits) = match f {
                Field::Size => (SH_SIZE, K_SIZE),
                _ if !alloc => (SH_OTHER, 0),
                Field::Count => (SH_OTHER, K_OTHER | K_COUNT),
                Field::Align => (SH_OTHER, K_OTHER),
                Field::Old | Field::Ptr if verbatim => (SH_OTHER, 0),
                Field::Old => (SH_FREE, K_RELEASES | K_OLD),
                Field::Ptr if op.is_free() => (SH_FREE, K_RELEASES),
                Field::Ptr => (SH_ALLOC, K_ALLOCATES),
                // No allocation record has a value.
                Field::Value | Field::Tid => (SH_BAD, 0),
            };
            n += 1 << col;
            k |= bits;
        }
        if k != 0 && op == Op::FreeSized {
            k |= K_SIZED_FREE;
        }
        if k != 0 && timed {
            k |= K_TIMED;
        }
        needs[tag as usize] = n;
        kinds[tag as usize] = k;
    }
    (needs, kinds)
}

/// [`class`] without a branch on the size (which size follows which is data).
#[inline(always)]
pub(super) fn class_of(size: u64) -> usize {
    let small = (size.min(1024) as usize + 15) >> 4;
    let s = size.wrapping_sub(1).max(1024);
    let b = 63 - s.leading_zeros();
    let large = (64 + (b as usize - 10) * 8 + ((s >> (b - 3)) & 7) as usize).min(CLASSES - 1);
    if size <= 1024 {
        small
    } else {
        large
    }
}

#[inline(always)]
pub(super) fn sel(c: bool, a: u64, b: u64) -> u64 {
    std::hint::select_unpredictable(c, a, b)
}

/// An allocation record with its pointers predicted, in straight-line code whatever its
/// operation (which operation follows which is data: a branch on it would often be taken
/// the wrong way): every column's next value is read, and used or not by the record's
/// kind. The model moves on as in [`general`]'s paths: the released block first, then the
/// new one.
#[inline(always)]
pub(super) fn common(
    m: &mut Model,
    allocs: &mut Vec<(u64, u64)>,
    v: &Vals,
    at: &mut At,
    kind: u16,
    class_alloc: bool,
    bad: &mut bool,
) -> RawArgs {
    let has = |k: u16| kind & k != 0;
    let size = sel(has(K_SIZE), v.size[at.size], 0);
    at.size += has(K_SIZE) as usize;
    let other = v.other[at.other];
    at.other += has(K_OTHER) as usize;
    let releases = has(K_RELEASES);
    let k = v.free[at.free];
    at.free += releases as usize;
    let miss = v.miss[at.miss];
    at.miss += (releases & (k == 0)) as usize;
    let delta = v.alloc[at.alloc];
    at.alloc += has(K_ALLOCATES) as usize;
    // The released block: k - 1 allocations back (k >= 2), null (1) or a miss (0).
    let len = allocs.len();
    let back = k.wrapping_sub(1);
    // Told after the batch (a branch here would depend on k).
    *bad |= releases & (k >= 2) & (back > len as u64);
    let (hp, hs) = allocs.get(len.wrapping_sub(back as usize)).copied().unwrap_or((0, 0));
    let missed = m.last_free.wrapping_add((unzigzag(miss) << 3) as u64);
    let p = sel(k == 0, missed, sel(k == 1, 0, hp));
    let known = (k >= 2) | has(K_SIZED_FREE);
    let known_size = sel(k >= 2, hs, size);
    let live = releases & (p != 0);
    m.last_free = sel(live, p, m.last_free);
    let c = class_of(known_size);
    m.class_last[c] = sel(live & known, p, m.class_last[c]);
    // The new block.
    let count = sel(has(K_COUNT), other, 0);
    let bsize = sel(has(K_COUNT), size.saturating_mul(other), size);
    let c = class_of(bsize);
    let last = m.class_last[c];
    let base = sel(class_alloc & (last != 0), last, m.last_alloc);
    let ptr = base.wrapping_add((unzigzag(delta) << 3) as u64);
    let made = has(K_ALLOCATES) & (ptr != 0);
    m.class_last[c] = sel(made, ptr, last);
    m.last_alloc = sel(made, ptr, m.last_alloc);
    allocs.push((ptr, bsize));
    allocs.truncate(len + made as usize);
    RawArgs {
        size,
        count,
        align: sel(has(K_OTHER) & !has(K_COUNT), other, 0),
        old: sel(has(K_OLD), p, 0),
        ptr: sel(has(K_ALLOCATES), ptr, p),
        value: 0,
    }
}

#[cfg(test)]
#[test]
pub(super) fn class_of_is_class() {
    let edges = (0..64).flat_map(|b| [(1u64 << b) - 1, 1 << b, (1 << b) + 1]);
    for s in (0..70_000u64).chain(edges).chain([u64::MAX, u64::MAX - 1]) {
        assert_eq!(class_of(s), super::model::class(s), "{s}");
    }
}

/// A malloc (or valloc, pvalloc), its pointer predicted: [`common`] for one kind of record.
#[inline(always)]
pub(super) fn malloc(m: &mut Model, allocs: &mut Vec<(u64, u64)>, v: &Vals, at: &mut At) -> RawArgs {
    let size = take!(v, at, size);
    let delta = take!(v, at, alloc);
    let c = class_of(size);
    let last = m.class_last[c];
    let base = sel(last != 0, last, m.last_alloc);
    let ptr = base.wrapping_add((unzigzag(delta) << 3) as u64);
    if ptr != 0 {
        m.class_last[c] = ptr;
        m.last_alloc = ptr;
        allocs.push((ptr, size));
    }
    RawArgs { size, ptr, ..Default::default() }
}

/// A free, its pointer predicted: [`common`] for one kind of record.
#[inline(always)]
pub(super) fn free(m: &mut Model, allocs: &[(u64, u64)], v: &Vals, at: &mut At, bad: &mut bool) -> RawArgs {
    let k = take!(v, at, free);
    let miss = v.miss[at.miss];
    at.miss += (k == 0) as usize;
    let len = allocs.len();
    let back = k.wrapping_sub(1);
    *bad |= (k >= 2) & (back > len as u64);
    let (hp, hs) = allocs.get(len.wrapping_sub(back as usize)).copied().unwrap_or((0, 0));
    let missed = m.last_free.wrapping_add((unzigzag(miss) << 3) as u64);
    let p = sel(k == 0, missed, sel(k == 1, 0, hp));
    if p != 0 {
        m.last_free = p;
        let c = class_of(hs);
        m.class_last[c] = sel(k >= 2, p, m.class_last[c]);
    }
    RawArgs { ptr: p, ..Default::default() }
}

/// Any other record (the thread's and process's own, verbatim allocation records).
#[cold]
pub(super) fn general(
    m: &mut Model,
    v: &Vals,
    at: &mut At,
    tag: u8,
    op: Op,
    class_alloc: bool,
) -> Result<RawArgs, String> {
    let mut a = RawArgs::default();
    if op.is_alloc_family() {
        alloc_fields(m, v, at, op, tag & COL_VERBATIM != 0, class_alloc, &mut a)?;
    } else {
        for f in op.layout() {
            match f {
                Field::Size => a.size = take!(v, at, size),
                _ => a.value = take!(v, at, other),
            }
        }
    }
    Ok(a)
}

/// An allocation-family record other than a plain malloc or free.
#[inline(always)]
pub(super) fn alloc_fields(
    m: &mut Model,
    v: &Vals,
    at: &mut At,
    op: Op,
    verbatim: bool,
    class_alloc: bool,
    a: &mut RawArgs,
) -> Result<(), String> {
    let frees = op.is_free();
    for f in op.layout() {
        match f {
            Field::Size => a.size = take!(v, at, size),
            Field::Count => a.count = take!(v, at, other),
            Field::Align => a.align = take!(v, at, other),
            Field::Old | Field::Ptr if *f == Field::Old || frees => {
                // The released block, and the model moves on at once (as the encoder's did,
                // before predicting the new block). free_sized's size is read: it comes
                // before the pointer.
                let sized = if op == Op::FreeSized { Some(a.size) } else { None };
                let (p, known) = if verbatim {
                    (take!(v, at, other), sized)
                } else {
                    let (p, hit) = freed(m, v, at)?;
                    (p, hit.or(sized))
                };
                if *f == Field::Old {
                    a.old = p
                } else {
                    a.ptr = p
                }
                m.freed(p, known);
            }
            Field::Old | Field::Ptr => {
                let bsize = block_size(op, a.size, a.count);
                a.ptr = if verbatim {
                    take!(v, at, other)
                } else {
                    let d = unzigzag(take!(v, at, alloc)) << 3;
                    let base = if class_alloc { m.alloc_base(bsize) } else { m.last_alloc };
                    base.wrapping_add(d as u64)
                };
                m.allocated(a.ptr, bsize);
            }
            Field::Value | Field::Tid => return Err(format!("{op:?} with a value")),
        }
    }
    Ok(())
}

/// A released pointer (free, realloc's old block), and its size when it was allocated in
/// this frame.
#[inline(always)]
pub(super) fn freed(m: &Model, v: &Vals, at: &mut At) -> Result<(u64, Option<u64>), String> {
    match take!(v, at, free) {
        0 => {
            let d = unzigzag(take!(v, at, miss)) << 3;
            Ok((m.last_free.wrapping_add(d as u64), None))
        }
        1 => Ok((0, None)),
        k => {
            let len = m.allocs.len() as u64;
            let k = k - 1;
            if k > len {
                return Err(format!("a free of the allocation {k} back, of {len}"));
            }
            let (p, s) = m.allocs[(len - k) as usize];
            Ok((p, Some(s)))
        }
    }
}

#[cfg(test)]
#[test]
fn kinds_take_what_needs_counts() {
    // The straight-line path reads a column's value where a record's kind says so; the
    // batch's counts (needs) must be the same, or a column would be misread.
    let (needs, kinds) = tables();
    for tag in 0..256 {
        let k = kinds[tag];
        if k & K_COMMON == 0 {
            continue;
        }
        let has = |f: u16| (k & f != 0) as u64;
        let want = has(K_SIZE) << SH_SIZE
            | has(K_ALLOCATES) << SH_ALLOC
            | (has(K_RELEASES)) << SH_FREE
            | has(K_OTHER) << SH_OTHER
            | has(K_TIMED) << SH_BACKEND;
        assert_eq!(needs[tag], want, "tag {tag:#x}");
    }
}
