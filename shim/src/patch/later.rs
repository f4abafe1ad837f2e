//! Libraries loaded with dlopen after start-up. An allocator one brings (a plugin linked with a
//! static jemalloc) cannot be patched once the program's threads run: its entry points could
//! be executing while their first bytes are rewritten. Its calls stay inside it, consistent
//! with each other, neither recorded nor switched, and the shim says so in one line per
//! library. The recorder thread looks once a second, only when the loader's count of loaded
//! objects has moved.
use super::detect;
use crate::shared::say;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Mutex;

/// The loader's count of objects ever loaded, as last seen.
static ADDS: AtomicU64 = AtomicU64::new(0);
/// The objects seen so far (those of start-up first).
static KNOWN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The loader's count of objects added since start-up (dl_phdr_info's dlpi_adds).
fn adds() -> u64 {
    unsafe extern "C" fn cb(info: *mut libc::dl_phdr_info, _: usize, data: *mut libc::c_void) -> i32 {
        unsafe { *(data as *mut u64) = (*info).dlpi_adds };
        1 // the first object tells
    }
    let mut n = 0u64;
    unsafe { libc::dl_iterate_phdr(Some(cb), &mut n as *mut u64 as *mut libc::c_void) };
    n
}

/// Notes the objects loaded now as known (at start-up, after the allocators were patched).
pub fn note_start() {
    ADDS.store(adds(), Relaxed);
    if let Ok(mut k) = KNOWN.lock() {
        *k = detect::loaded_paths();
    }
}

/// Looks for libraries loaded since the last look; names each new one that brings an
/// allocator of its own.
pub fn check() {
    let n = adds();
    if ADDS.swap(n, Relaxed) == n {
        return;
    }
    let Ok(mut known) = KNOWN.lock() else { return };
    for path in detect::loaded_paths() {
        if known.contains(&path) {
            continue;
        }
        let scan = detect::scan_library(&path);
        let fam = scan
            .families
            .first()
            .map(|f| (f.name, f.prefix.clone()))
            .or(scan.stripped.first().map(|s| (s.1, String::new())));
        if let Some((name, prefix)) = fam {
            let prefix = if prefix.is_empty() { String::new() } else { format!(" ({prefix} prefix)") };
            say(&format!(
                "shim: {path}, loaded after start-up, brings its own {name}{prefix}: its calls are neither recorded nor switched (allocators are patched only before the program's threads start)"
            ));
        }
        known.push(path);
    }
}
