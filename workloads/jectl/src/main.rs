//! jectl: reads jemalloc's statistics through tikv-jemalloc-ctl every 10 ms from a second
//! thread while the main thread allocates a burst (1 MiB buffers and as many bytes again in
//! small boxes), holds it, frees it and purges. Any failed read ends the program with exit 1,
//! as a service's metrics code that unwraps them would.
//!
//! Usage: jectl [BURST_MIB] (default 64). Prints one JSON line:
//!   {"before":A,"during":B,"after":C,"reads":N,"max_seen":M}
//! with stats.allocated before the burst, while it is held and after the frees.
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tikv_jemalloc_ctl::{arenas, epoch, raw, stats, Error};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Every statistic once, by name and through MIBs; stats.allocated.
fn read_all() -> Result<usize, Error> {
    epoch::advance()?;
    let allocated = stats::allocated::read()?;
    let by_mib = stats::allocated::mib()?.read()?;
    let _ = by_mib;
    stats::active::read()?;
    stats::active::mib()?.read()?;
    stats::resident::read()?;
    stats::mapped::read()?;
    stats::retained::read()?;
    stats::metadata::read()?;
    arenas::narenas::read()?;
    // SAFETY: the names are of size_t statistics, read as usize.
    unsafe {
        raw::read::<usize>(b"arenas.page\0")?;
        for a in ["0", "4096"] {
            for s in ["pactive", "pdirty", "pmuzzy"] {
                let name = format!("stats.arenas.{a}.{s}\0");
                raw::read::<usize>(name.as_bytes())?;
            }
        }
    }
    Ok(allocated)
}

fn check<T>(what: &str, r: Result<T, Error>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            eprintln!("jectl: {what} failed: {e}");
            std::process::exit(1);
        }
    }
}

/// jemalloc's arena.<ALL>.purge (neither read nor written: tikv-jemalloc-ctl has no call
/// for it).
fn purge() {
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        eprintln!("jectl: arena.4096.purge failed: {rc}");
        std::process::exit(1);
    }
}

fn main() {
    let burst_mib: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let before = check("the first read", read_all());
    let stop = Arc::new(AtomicBool::new(false));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, max_seen, reads) = (stop.clone(), max_seen.clone(), reads.clone());
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                let a = check("a read", read_all());
                max_seen.fetch_max(a, Relaxed);
                reads.fetch_add(1, Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(30));

    let big: Vec<Vec<u8>> = (0..burst_mib).map(|i| vec![i as u8; 1 << 20]).collect();
    let small: Vec<Box<[u8; 256]>> = (0..burst_mib * 4096).map(|i| Box::new([i as u8; 256])).collect();
    std::thread::sleep(Duration::from_millis(50));
    let during = check("a read", read_all());
    let kept = big.iter().map(|b| b[1] as usize).sum::<usize>() + small.iter().map(|b| b[1] as usize).sum::<usize>();
    drop(big);
    drop(small);
    purge();
    std::thread::sleep(Duration::from_millis(50));
    let after = check("a read", read_all());

    stop.store(true, Relaxed);
    if reader.join().is_err() {
        std::process::exit(1);
    }
    println!(
        "{{\"before\":{before},\"during\":{during},\"after\":{after},\"reads\":{},\"max_seen\":{},\"checksum\":{kept}}}",
        reads.load(Relaxed),
        max_seen.load(Relaxed)
    );
}
