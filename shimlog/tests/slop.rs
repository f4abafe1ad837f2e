//! `shimlog stats`'s slop (usable size less the bytes asked for) on synthetic logs: each
//! backend's own answer for the sizes, over the run and at the peak of live bytes.
mod synth;

use synth::{dir, header, stats_json, u, Log};

/// The slop of a known mix of sizes equals, for each backend, the sum of (usable size -
/// requested) that the backend itself answers for blocks of those sizes.
#[test]
fn slop_matches_each_backends_usable_size() {
    use shim_backend::Backend;
    let sizes: Vec<u64> = vec![1, 7, 8, 13, 16, 24, 25, 100, 100, 100, 513, 1000, 4000, 5000, 20000, 70000];
    let d = dir("slop");
    let mut l = Log::create(&format!("{d}/slop.shimlog"), &header(7, 0));
    for (i, &s) in sizes.iter().enumerate() {
        l.malloc(1, 1000 + i as u64, s, 0x1000 * (i as u64 + 1));
    }
    let log = l.finish(true);
    let j = stats_json(&[&log]);
    let want_total: u64 = sizes.iter().sum();
    for b in Backend::ALL {
        // Ask the backend: allocate each size a few times, all live at once, and take the
        // smallest usable size (glibc may hand out a free chunk a little larger than its
        // rounding, depending on this process's heap; one of the copies comes off the top).
        shim_backend::select(b);
        let mut blocks = Vec::new();
        let expected: u64 = sizes
            .iter()
            .map(|&s| {
                (0..8)
                    .map(|_| unsafe {
                        let p = shim_backend::malloc(s as usize);
                        assert!(!p.is_null());
                        blocks.push(p);
                        shim_backend::usable_size(p) as u64 - s
                    })
                    .min()
                    .unwrap_or(0)
            })
            .sum();
        for p in blocks {
            unsafe { shim_backend::free(p) };
        }
        let s = &j["slop"][b.name()];
        assert_eq!(u(&s["requested_bytes"]), want_total, "{}", b.name());
        assert_eq!(u(&s["slop_bytes"]), expected, "{}: slop over the run", b.name());
        // Nothing is freed, so the peak is the end and holds every block.
        assert_eq!(u(&s["at_peak"]["slop_bytes"]), expected, "{}: slop at peak", b.name());
        let per_class: u64 = s["classes"].as_array().unwrap().iter().map(|c| u(&c["slop_bytes"])).sum();
        assert_eq!(per_class, expected, "{}: classes add up", b.name());
        let allocs: u64 = s["classes"].as_array().unwrap().iter().map(|c| u(&c["allocations"])).sum();
        assert_eq!(allocs, sizes.len() as u64);
    }
    shim_backend::select(Backend::Glibc);
}

/// The slop at peak is the state at the peak, not at the end.
#[test]
fn slop_at_peak_is_taken_at_the_peak() {
    let d = dir("slop-peak");
    let mut l = Log::create(&format!("{d}/p.shimlog"), &header(8, 0));
    // Peak: 3 x 100 (300 bytes); then all freed and one 250-byte block made (not a peak).
    for i in 0..3u64 {
        l.malloc(1, 1000 + i, 100, 0x1000 * (i + 1));
    }
    for i in 0..3u64 {
        l.free(1, 2000 + i, 0x1000 * (i + 1));
    }
    l.malloc(1, 3000, 250, 0x9000);
    let log = l.finish(true);
    let j = stats_json(&[&log]);
    assert_eq!(u(&j["peak_live_bytes"]), 300);
    for b in shim_backend::Backend::ALL {
        let s = &j["slop"][b.name()];
        let c100 = shim_backend::size_class(b, 100) as u64 - 100;
        let c250 = shim_backend::size_class(b, 250) as u64 - 250;
        assert_eq!(u(&s["at_peak"]["slop_bytes"]), 3 * c100, "{}", b.name());
        assert_eq!(u(&s["slop_bytes"]), 3 * c100 + c250, "{}", b.name());
        let row = s["classes"].as_array().unwrap().iter().find(|c| u(&c["allocations"]) == 3).unwrap();
        assert_eq!(u(&row["blocks_at_peak"]), 3);
    }
}
