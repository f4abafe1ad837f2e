//! Reads a log through `LogReader::events` and nothing else, and prints how fast: the
//! reader's share of `shimlog stats`' time.
//!
//!     cargo run --release -p recorder --example readspeed -- LOG
use recorder::LogReader;
use std::time::Instant;

fn main() {
    let path = std::env::args().nth(1).expect("usage: readspeed LOG");
    let t0 = Instant::now();
    let r = LogReader::open(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut n = 0u64;
    let mut sum = 0u64;
    let (mut last, mut switches) = (u32::MAX, 0u64);
    for e in r.events() {
        n += 1;
        switches += (e.stream != last) as u64;
        last = e.stream;
        sum = sum.wrapping_add(e.ptr ^ e.ts_ns);
    }
    let s = t0.elapsed().as_secs_f64();
    println!(
        "{n} events in {s:.3} s: {:.1} M events/s, {:.1} events per run of one stream (checksum {sum:x})",
        n as f64 / s / 1e6,
        n as f64 / switches.max(1) as f64
    );
}
