use super::*;
use crate::buffer::{Args, Buf};
use proptest::prelude::*;

fn all_ops() -> Vec<Op> {
    (0u8..64).filter_map(Op::from_u8).collect()
}

/// Encodes, packs, unpacks and decodes `b`'s records; the result must be the same bytes.
fn roundtrip(b: &Buf, tuning: Tuning) -> Result<(), TestCaseError> {
    let mut e = Encoder::new();
    e.tuning = tuning;
    let n = e.encode(b.records(), b.first_ticks).expect("valid records");
    prop_assert_eq!(n, b.n);
    // The malloc and free arms write what the general arm writes.
    let mut g = Encoder::new();
    g.tuning = tuning;
    prop_assert_eq!(g.encode_general(b.records(), b.first_ticks), Ok(n));
    prop_assert_eq!(&g.cols.0, &e.cols.0);
    let mut comp = zstd::bulk::Compressor::new(1).unwrap();
    let (mut scratch, mut body) = (Vec::new(), Vec::new());
    pack(&e.cols, &mut comp, &mut scratch, &mut body).unwrap();
    let mut cols = Columns::default();
    unpack(&body, &mut zstd::bulk::Decompressor::new().unwrap(), &mut cols).unwrap();
    let mut d = Decoder::new();
    d.tuning = tuning;
    let mut out = Buf::new_boxed(0);
    d.decode(&cols, n, b.first_ticks, b.stream, &mut out).unwrap();
    prop_assert_eq!(out.records(), b.records());
    prop_assert_eq!(
        (out.n, out.first_ticks, out.last_ticks, out.stream),
        (b.n, b.first_ticks, b.last_ticks, b.stream)
    );
    Ok(())
}

fn tunings() -> impl Strategy<Value = Tuning> {
    (any::<bool>(), any::<bool>(), any::<bool>()).prop_map(|(dod, free_index, class_alloc)| Tuning {
        dod,
        free_index,
        class_alloc,
    })
}

/// A heap that behaves like an allocator's: freed blocks are handed out again, LIFO per
/// size, some pointers odd (a program freeing a bogus pointer), some allocations failing.
fn heap_ops() -> impl Strategy<Value = Vec<(u8, u64, u64, bool)>> {
    prop::collection::vec(
        (0u8..8, prop_oneof![8u64..600, 1u64..1 << 20, any::<u64>()], 0u64..1000, prop::bool::weighted(0.05)),
        1..2000,
    )
}

proptest! {
    /// Any records at all, with arbitrary values in every field.
    #[test]
    fn any_records_roundtrip(recs in prop::collection::vec(
        (prop::sample::select(all_ops()), any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>(),
         any::<u64>(), any::<u64>(), any::<u64>(), any::<Option<u64>>()), 1..300), tuning in tunings()) {
        let mut b = Buf::new_boxed(5);
        for (op, t, size, count, align, old, ptr, value, bt) in recs {
            if !b.has_room() {
                break;
            }
            b.push(op, t, &Args { size, count, align, old, ptr, value }, bt);
        }
        roundtrip(&b, tuning)?;
    }

    /// Records as a program makes them: blocks freed in any order, reused, reallocated in
    /// place or moved, freed with their size, pointers misaligned now and then; a full buffer.
    #[test]
    fn heap_like_records_roundtrip(ops in heap_ops(), tuning in tunings(), base in 0u64..1 << 47) {
        let mut b = Buf::new_boxed(1);
        let mut live: Vec<(u64, u64)> = Vec::new();
        let mut free_list: Vec<u64> = Vec::new();
        let (mut t, mut next) = (1000u64, base & !15);
        for (k, size, pick, odd) in ops {
            if !b.has_room() {
                break;
            }
            t += pick % 40;
            let bt = (pick % 16 == 0).then_some(pick);
            let fresh = |free_list: &mut Vec<u64>, next: &mut u64| {
                free_list.pop().unwrap_or_else(|| { *next += 16 + (size.min(1 << 16) & !7); *next }) | odd as u64
            };
            match k {
                0..=2 => {
                    let p = if pick == 999 { 0 } else { fresh(&mut free_list, &mut next) };
                    b.push(Op::Malloc, t, &Args { size, ptr: p, ..Default::default() }, bt);
                    if p != 0 { live.push((p, size)); }
                }
                3 | 4 if !live.is_empty() => {
                    let (p, s) = live.swap_remove(pick as usize % live.len());
                    let op = if k == 4 { Op::FreeSized } else { Op::Free };
                    b.push(op, t, &Args { size: s, ptr: p, ..Default::default() }, bt);
                    free_list.push(p & !7);
                }
                5 if !live.is_empty() => {
                    let i = pick as usize % live.len();
                    let (old, _) = live[i];
                    let p = if pick % 3 == 0 { old } else { fresh(&mut free_list, &mut next) };
                    b.push(Op::Realloc, t, &Args { old, size, ptr: p, ..Default::default() }, bt);
                    live[i] = (p, size);
                }
                6 => {
                    let p = fresh(&mut free_list, &mut next);
                    b.push(Op::Calloc, t, &Args { count: pick, size, ptr: p, ..Default::default() }, bt);
                    live.push((p, size));
                }
                _ => {
                    // A free of a block from before this frame, or a thread's record.
                    b.push(if pick % 2 == 0 { Op::Free } else { Op::Rss }, t, &Args { ptr: base + pick * 8, value: pick, ..Default::default() }, bt);
                }
            }
        }
        roundtrip(&b, tuning)?;
    }

    /// Damaged bodies give an error, never a panic or a wrong count of records.
    #[test]
    fn damaged_bodies_never_panic(ops in heap_ops(), flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4), junk: Vec<u8>) {
        let mut b = Buf::new_boxed(1);
        for (i, (k, size, pick, _)) in ops.into_iter().enumerate() {
            if !b.has_room() { break; }
            let op = if k < 4 { Op::Malloc } else { Op::Free };
            b.push(op, i as u64 * 3, &Args { size, ptr: 0x1000 + (pick & !7) * 8, ..Default::default() }, None);
        }
        let mut e = Encoder::new();
        let n = e.encode(b.records(), b.first_ticks).unwrap();
        let mut comp = zstd::bulk::Compressor::new(1).unwrap();
        let (mut scratch, mut body) = (Vec::new(), Vec::new());
        pack(&e.cols, &mut comp, &mut scratch, &mut body).unwrap();
        for (at, x) in flips {
            let i = at.index(body.len());
            body[i] ^= x;
        }
        let mut dctx = zstd::bulk::Decompressor::new().unwrap();
        let mut out = Buf::new_boxed(0);
        for data in [&body, &junk] {
            let mut cols = Columns::default();
            if unpack(data, &mut dctx, &mut cols).is_ok() {
                let _ = Decoder::new().decode(&cols, n, b.first_ticks, 1, &mut out);
            }
            let _ = Decoder::new().decode(&cols, n, 0, 1, &mut out);
        }
    }
}

proptest! {
    /// Decoding a frame in runs of any length (as the reader does, filling what is left of
    /// its batch of events) gives the records of decoding it whole, whatever the frame's
    /// record count, a multiple of the batch or not.
    #[test]
    fn runs_of_any_length_give_the_same_records(ops in heap_ops(), n in 1usize..700, runs in prop::collection::vec(1usize..300, 1..20)) {
        let mut b = Buf::new_boxed(2);
        for (i, (k, size, pick, odd)) in ops.into_iter().cycle().take(n).enumerate() {
            if !b.has_room() { break; }
            let ptr = 0x10_0000 + (pick & !7) * 16 + odd as u64;
            let (op, a) = match k {
                0..=3 => (Op::Malloc, Args { size, ptr, ..Default::default() }),
                4 => (Op::Calloc, Args { size, count: pick, ptr, ..Default::default() }),
                5 => (Op::Realloc, Args { size, old: ptr, ptr: ptr + 64, ..Default::default() }),
                6 => (Op::Rss, Args { value: pick, ..Default::default() }),
                _ => (Op::Free, Args { ptr, ..Default::default() }),
            };
            b.push(op, i as u64 * 7, &a, (pick % 5 == 0).then_some(pick));
        }
        let mut e = Encoder::new();
        let n = e.encode(b.records(), b.first_ticks).unwrap();
        let mut whole = Vec::new();
        let mut d = Decoder::new();
        d.start(&e.cols, n, b.first_ticks).unwrap();
        while d.run::<false>(&e.cols, usize::MAX, |r| whole.push(*r)).unwrap() > 0 {}
        prop_assert_eq!(whole.len(), n as usize);
        let mut pieces = Vec::new();
        d.start(&e.cols, n, b.first_ticks).unwrap();
        for &max in runs.iter().cycle() {
            let got = d.run::<false>(&e.cols, max, |r| pieces.push(*r)).unwrap();
            prop_assert!(got <= max.min(BATCH));
            if got == 0 { break; }
        }
        prop_assert_eq!(pieces, whole);
    }

    /// The encoder's varints are the format's: what varint::get reads back, one after another.
    #[test]
    fn column_varints_read_back(vs in prop::collection::vec(prop_oneof![0u64..128, 0u64..1 << 14, 0u64..1 << 56, any::<u64>()], 0..100)) {
        let mut col = Vec::new();
        for &v in &vs {
            super::encode::put(&mut col, v);
        }
        let mut pos = 0;
        for &v in &vs {
            prop_assert_eq!(crate::varint::get(&col, &mut pos), Some(v));
        }
        prop_assert_eq!(pos, col.len());
    }
}
