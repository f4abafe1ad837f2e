//! The load the statistics readers (workloads/jectl, workloads/mistats) put on their
//! allocator while a second thread reads its statistics every 10 ms: a burst of 1 MiB
//! buffers and as many bytes again in 256-byte boxes, held, freed, then memory given back.
//! Included by each with `#[path]` (they are separate cargo workspaces).
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

/// What the run saw: the allocator's figure before the burst, while it was held and after
/// the frees; the reading thread's rounds and the most it saw.
pub struct Report {
    pub before: usize,
    pub during: usize,
    pub after: usize,
    pub reads: u64,
    pub max_seen: usize,
    /// A sum of bytes of the burst, so that it is not optimised away.
    pub checksum: usize,
}

impl Report {
    /// The JSON fields, without braces.
    pub fn fields(&self) -> String {
        format!(
            "\"before\":{},\"during\":{},\"after\":{},\"reads\":{},\"max_seen\":{},\"checksum\":{}",
            self.before, self.during, self.after, self.reads, self.max_seen, self.checksum
        )
    }
}

/// Runs the burst of `burst_mib` MiB (twice over: big and small blocks); `read` gives the
/// allocator's figure (and ends the program when a read fails), `give_back` runs after the
/// frees.
pub fn run(burst_mib: usize, read: fn() -> usize, give_back: fn()) -> Report {
    let before = read();
    let stop = Arc::new(AtomicBool::new(false));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, max_seen, reads) = (stop.clone(), max_seen.clone(), reads.clone());
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                max_seen.fetch_max(read(), Relaxed);
                reads.fetch_add(1, Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(30));
    let big: Vec<Vec<u8>> = (0..burst_mib).map(|i| vec![i as u8; 1 << 20]).collect();
    let small: Vec<Box<[u8; 256]>> = (0..burst_mib * 4096).map(|i| Box::new([i as u8; 256])).collect();
    std::thread::sleep(Duration::from_millis(50));
    let during = read();
    let checksum = big.iter().map(|b| b[1] as usize).sum::<usize>() + small.iter().map(|b| b[1] as usize).sum::<usize>();
    drop(big);
    drop(small);
    give_back();
    std::thread::sleep(Duration::from_millis(50));
    let after = read();
    stop.store(true, Relaxed);
    if reader.join().is_err() {
        std::process::exit(1);
    }
    Report { before, during, after, reads: reads.load(Relaxed), max_seen: max_seen.load(Relaxed), checksum }
}

/// The burst's size in MiB: the first argument, 64 without one.
pub fn burst_mib() -> usize {
    std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(64)
}
