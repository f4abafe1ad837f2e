//! mistats: reads mimalloc's process info every 10 ms from a second thread (failing, exit 1,
//! when it makes no sense: no resident memory, or a peak far below it) while the main thread
//! allocates a burst (1 MiB buffers and as many bytes again in small boxes), holds it, frees
//! it and calls mi_collect(true); prints mi_stats_print_out's text once into a callback.
//!
//! Usage: mistats [BURST_MIB] (default 64). Prints one JSON line:
//!   {"before":A,"during":B,"after":C,"reads":N,"max_seen":M,"checksum":S,"stats_print":LEN}
//! with mi_process_info's current_rss before the burst, while it is held and after.
#[path = "../../common/burst.rs"]
mod burst;

use libmimalloc_sys as mi;
use std::ffi::{c_char, c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

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

fn collect() {
    unsafe { mi::mi_collect(true) };
}

fn main() {
    let printed = AtomicUsize::new(0);
    unsafe { mi::mi_stats_print_out(Some(out), &printed as *const _ as *mut c_void) };
    let r = burst::run(burst::burst_mib(), read_rss, collect);
    println!("{{{},\"stats_print\":{}}}", r.fields(), printed.load(Relaxed));
}
