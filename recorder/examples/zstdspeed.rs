//! Decompresses every frame of a log and nothing else (no decoding, no merge; a columnar
//! frame's columns are unpacked, not put back together into records), and prints how fast:
//! the zstd share of the reader's time (`readspeed` gives the whole reader's).
//!
//!     cargo run --release -p recorder --example zstdspeed -- LOG
use recorder::LogReader;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: zstdspeed LOG");
    let t0 = Instant::now();
    let r = LogReader::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let (mut frames, mut bytes, mut records, mut bad) = (0u64, 0u64, 0u64, 0u64);
    r.for_each_decompressed(|fi, body| match body {
        Ok(b) => {
            frames += 1;
            bytes += b as u64;
            records += fi.h.n_records as u64;
        }
        Err(_) => bad += 1,
    });
    let s = t0.elapsed().as_secs_f64();
    println!(
        "{frames} frames ({bad} unreadable), {records} records, {bytes} bytes of records in {s:.3} s: {:.0} MB/s",
        bytes as f64 / s / 1e6
    );
}
