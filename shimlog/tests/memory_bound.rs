//! `shimlog stats` keeps its memory bounded by the blocks live at once, not by the size of
//! the log it reads.
mod synth;

use synth::{four_threads, xorshift};

/// Peak resident memory (KiB) of `shimlog ARGS...`, which must succeed.
#[allow(clippy::zombie_processes, reason = "the child is waited for with wait4, for its rusage")]
fn peak_rss_kb(args: &[&str]) -> u64 {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_shimlog"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("run shimlog");
    let (mut status, mut ru) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, into locals.
    let pid = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    assert!(pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "shimlog {args:?} failed");
    ru.ru_maxrss as u64
}

/// Memory follows the blocks live at once, not the size of the log: reading a log through
/// its mapping releases what has been read, on one thread and on two.
#[test]
fn memory_stays_bounded_on_a_long_log() {
    let tids = [41u32, 42, 43, 44];
    let mut l = four_threads("bounded", 23, tids);
    // About 2,000 blocks live; the pointers wander over 2^40 bytes, so that the log
    // compresses to a few bytes per event.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut live: Vec<u64> = Vec::new();
    for i in 0..3_000_000u64 {
        xorshift(&mut x);
        let t = tids[(x % 4) as usize];
        if live.len() > 2000 {
            let p = live.swap_remove((x >> 8) as usize % live.len());
            l.free(t, 1000 + i * 3, p);
        } else {
            let p = 0x7f00_0000_0000 + ((x >> 20) & ((1 << 37) - 1)) * 8;
            l.malloc(t, 1000 + i * 3, 16 + (x >> 50) % 500, p);
            live.push(p);
        }
    }
    let log = l.finish(true);
    let file_kb = std::fs::metadata(&log).unwrap().len() / 1024;
    assert!(file_kb > 8 * 1024, "the log should be larger than the reader's own memory: {file_kb} KiB");
    for (args, pool_kb) in [(vec!["stats", "--one-thread", &log], 0), (vec!["stats", &log], 4 * 1024)] {
        let rss = peak_rss_kb(&args);
        // The binary, its tables and histograms, the six backends' own arenas (their size
        // classes are asked for the slop table), and a few frames in flight: 14-15 MiB
        // alone, up to 21 under the whole suite's load. The default reading adds its
        // decoding pool, a constant: a thread per CPU with its zstd context, and at most
        // 2 frames per thread + 2 decoded ahead (20 MiB in all here, against 14.4 on one
        // thread). A reader that kept what it read mapped would hold the whole file
        // (18 MiB) besides, over 30.
        let bound = 12 * 1024 + file_kb / 2 + pool_kb;
        assert!(rss < bound, "{args:?}: peak RSS {rss} KiB for a log of {file_kb} KiB (bound {bound})");
    }
}
