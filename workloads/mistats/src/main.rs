//! mistats: reads mimalloc's process info every 10 ms from a second thread (failing, exit 1,
//! when it makes no sense: no resident memory, or a peak far below it) while the main thread
//! allocates a burst (1 MiB buffers and as many bytes again in small boxes), holds it, frees
//! it and calls mi_collect(true); prints mi_stats_print_out's text once into a callback.
//!
//! Usage: mistats [BURST_MIB] (default 64). Prints one JSON line:
//!   {"before":A,"during":B,"after":C,"reads":N,"max_seen":M,"stats_print":LEN}
//! with mi_process_info's current_rss before the burst, while it is held and after.
use libmimalloc_sys as mi;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mi_process_info's current resident set, checked.
fn read_rss() -> usize {
    let mut v = [0usize; 8];
    let [a, b, c, d, e, f, g, h] = &mut v;
    unsafe { mi::mi_process_info(a, b, c, d, e, f, g, h) };
    let (rss, peak_rss) = (v[3], v[4]);
    if rss == 0 || peak_rss < rss / 2 {
        eprintln!("mistats: mi_process_info gave no figures: {v:?}");
        std::process::exit(1);
    }
    rss
}

unsafe extern "C" fn out(msg: *const c_char, arg: *mut c_void) {
    let len = unsafe { &*(arg as *const AtomicUsize) };
    len.fetch_add(unsafe { CStr::from_ptr(msg) }.to_bytes().len(), Relaxed);
}

fn main() {
    let burst_mib: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(64);
    let printed = AtomicUsize::new(0);
    unsafe { mi::mi_stats_print_out(Some(out), &printed as *const _ as *mut c_void) };
    let before = read_rss();
    let stop = Arc::new(AtomicBool::new(false));
    let max_seen = Arc::new(AtomicUsize::new(0));
    let reads = Arc::new(AtomicU64::new(0));
    let reader = {
        let (stop, max_seen, reads) = (stop.clone(), max_seen.clone(), reads.clone());
        std::thread::spawn(move || {
            while !stop.load(Relaxed) {
                max_seen.fetch_max(read_rss(), Relaxed);
                reads.fetch_add(1, Relaxed);
                std::thread::sleep(Duration::from_millis(10));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(30));
    let big: Vec<Vec<u8>> = (0..burst_mib).map(|i| vec![i as u8; 1 << 20]).collect();
    let small: Vec<Box<[u8; 256]>> = (0..burst_mib * 4096).map(|i| Box::new([i as u8; 256])).collect();
    std::thread::sleep(Duration::from_millis(50));
    let during = read_rss();
    let kept = big.iter().map(|b| b[1] as usize).sum::<usize>() + small.iter().map(|b| b[1] as usize).sum::<usize>();
    drop(big);
    drop(small);
    unsafe { mi::mi_collect(true) };
    std::thread::sleep(Duration::from_millis(50));
    let after = read_rss();
    stop.store(true, Relaxed);
    if reader.join().is_err() {
        std::process::exit(1);
    }
    println!(
        "{{\"before\":{before},\"during\":{during},\"after\":{after},\"reads\":{},\"max_seen\":{},\"stats_print\":{},\"checksum\":{kept}}}",
        reads.load(Relaxed),
        max_seen.load(Relaxed),
        printed.load(Relaxed)
    );
}
