//! Times the column decoder alone on a log's first 8 columnar frames, unpacked beforehand
//! (no zstd, no merge), each decoded again and again, as the reader's streams are (their
//! columns in cache): ns per record, best of 5 passes.
//!
//!     cargo run --release -p recorder --example decspeed -- LOG
use recorder::columns::{unpack, Columns, Decoder};
use recorder::LogReader;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: decspeed LOG");
    let r = LogReader::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut d = zstd::bulk::Decompressor::new().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    // zstd alone: every columnar frame unpacked (into the same columns).
    let (mut c, mut all, t0) = (Columns::default(), 0u64, Instant::now());
    for fi in r.frames.iter().filter(|f| f.h.columnar) {
        let at = fi.offset as usize + recorder::format::FRAME_HEADER_LEN;
        unpack(&bytes[at..at + fi.h.comp_len as usize], &mut d, &mut c).unwrap();
        all += fi.h.n_records as u64;
    }
    println!("unpacking: {:.2} ns per record", t0.elapsed().as_secs_f64() * 1e9 / all.max(1) as f64);
    let mut frames = Vec::new();
    for fi in r.frames.iter().filter(|f| f.h.columnar).take(8) {
        let at = fi.offset as usize + recorder::format::FRAME_HEADER_LEN;
        let mut c = Columns::default();
        unpack(&bytes[at..at + fi.h.comp_len as usize], &mut d, &mut c).unwrap();
        frames.push((c, fi.h));
    }
    const REPEAT: u64 = 200;
    let n: u64 = frames.iter().map(|f| f.1.n_records as u64).sum::<u64>() * REPEAT;
    let mut dec = Decoder::new();
    let v3 = recorder::cpu::has_v3() && recorder::cpu::has_fast_pext();
    let mut best = f64::MAX;
    let mut sum = 0u64;
    for _ in 0..5 {
        let t0 = Instant::now();
        for (c, h) in frames.iter().cycle().take(frames.len() * REPEAT as usize) {
            dec.start(c, h.n_records, h.first_ticks).unwrap();
            if v3 {
                // SAFETY: the CPU has the features (cpu::has_v3, has_fast_pext).
                unsafe { frame_v3(&mut dec, c, &mut sum) }
            } else {
                frame::<false>(&mut dec, c, &mut sum)
            }
        }
        best = best.min(t0.elapsed().as_secs_f64());
    }
    println!(
        "{n} records in {} frames: {:.2} ns per record (checksum {sum:x})",
        frames.len(),
        best * 1e9 / n as f64
    );
}

#[inline(always)]
fn frame<const PEXT: bool>(dec: &mut Decoder, c: &Columns, sum: &mut u64) {
    while dec.run::<PEXT>(c, 128, |r| *sum = sum.wrapping_add(r.args.ptr ^ r.ticks)).unwrap() > 0 {}
}

/// What the reader runs on this CPU: compiled for x86-64-v3, varints packed with PEXT.
#[target_feature(enable = "avx2,bmi1,bmi2,lzcnt,popcnt,fma,movbe")]
unsafe fn frame_v3(dec: &mut Decoder, c: &Columns, sum: &mut u64) {
    frame::<true>(dec, c, sum)
}
