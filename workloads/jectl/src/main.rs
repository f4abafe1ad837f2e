//! jectl: reads jemalloc's statistics through tikv-jemalloc-ctl every 10 ms from a second
//! thread while the main thread allocates a burst (1 MiB buffers and as many bytes again in
//! small boxes), holds it, frees it and purges. Any failed read ends the program with exit 1,
//! as a service's metrics code that unwraps them would.
//!
//! Usage: jectl [BURST_MIB] (default 64). Prints one JSON line:
//!   {"before":A,"during":B,"after":C,"reads":N,"max_seen":M,"checksum":S}
//! with stats.allocated before the burst, while it is held and after the frees.
#[path = "../../common/burst.rs"]
mod burst;

use tikv_jemalloc_ctl::{arenas, epoch, raw, stats, Error};

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Every statistic once, by name and through MIBs; stats.allocated.
fn read_all() -> Result<usize, Error> {
    epoch::advance()?;
    let allocated = stats::allocated::read()?;
    stats::allocated::mib()?.read()?;
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

fn read_checked() -> usize {
    read_all().unwrap_or_else(|e| {
        eprintln!("jectl: a read failed: {e}");
        std::process::exit(1);
    })
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
    let r = burst::run(burst::burst_mib(), read_checked, purge);
    println!("{{{}}}", r.fields());
}
