//! Writes a large synthetic shim log, for measuring `shimlog stats` on logs of any size.
//!
//!     cargo run --release --example genlog -- OUT.shimlog EVENTS [THREADS] [LIVE] [LEVEL]
//!
//! THREADS threads (default 8) interleave in time; each call is a malloc (sizes from a skewed
//! mix), calloc, realloc, aligned allocation or a free of a random live block (so many frees
//! are cross-thread). The live set hovers around LIVE blocks (default 100000), freed
//! addresses are reused, 1 call in 16 carries a backend time, and the process stream gets an
//! RSS record every simulated 100 ms. LEVEL is the zstd level of its frames (default 1, the
//! shim's; -1 to -7 as SHIM_ZSTD_LEVEL=-N would write them). Deterministic for given arguments:
//! the generator is `recorder::synth` (the instruction budgets' tests write their logs with it too).
fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if argv.len() < 3 {
        eprintln!("usage: genlog OUT.shimlog EVENTS [THREADS] [LIVE] [LEVEL]");
        std::process::exit(2);
    }
    let out = &argv[1];
    let events: u64 = argv[2].parse().expect("EVENTS is a number");
    let threads: u32 = argv.get(3).map_or(8, |s| s.parse().expect("THREADS is a number"));
    let target_live: usize = argv.get(4).map_or(100_000, |s| s.parse().expect("LIVE is a number"));
    let level: i32 = argv.get(5).map_or(1, |s| s.parse().expect("LEVEL is a zstd level"));
    let w = recorder::synth::write(out, events, threads, target_live, level).unwrap_or_else(|e| {
        eprintln!("genlog: cannot write {out}: {e}");
        std::process::exit(1);
    });
    eprintln!("genlog: wrote {} records, {} bytes to {}", w.records, w.bytes, w.path);
}
