//! Every backend of this build, asked directly (no shim): the malloc family's contracts, the
//! usable and size-class answers the slop analysis relies on, versions and statistics, and
//! threads that come and go (rpmalloc's per-thread set-up and reclaim are the backend's).
//! One test, backends in turn: `select` is once per process in real use, and here no
//! pointer outlives the backend that made it.
use core::ffi::c_void;
use shim_backend::{self as be, Backend};

unsafe fn check_block(b: Backend, p: *mut c_void, size: usize, align: usize) {
    assert!(!p.is_null(), "{}: null for {size} bytes aligned {align}", b.name());
    assert_eq!(p as usize % align, 0, "{}: {p:?} not aligned to {align}", b.name());
    let u = unsafe { be::usable_size(p) };
    assert!(u >= size, "{}: usable {u} < {size}", b.name());
    unsafe { core::ptr::write_bytes(p as *mut u8, 0xa5, size) };
}

fn exercise(b: Backend) {
    be::select(b);
    assert_eq!(be::selected(), b);
    let v = b.version();
    assert!(!v.is_empty() && v != "unknown", "{}: version {v:?}", b.name());
    unsafe {
        for size in [0usize, 1, 8, 24, 100, 1000, 4097, 70_000, 1 << 20, 5 << 20] {
            let p = be::malloc(size);
            check_block(b, p, size, 16.min(size.next_power_of_two().max(8)));
            if size > 0 && size < 100_000 && b != Backend::Glibc {
                // The size class the slop analysis uses is what the allocator really gives.
                assert_eq!(be::usable_size(p), be::size_class(b, size), "{}: class of {size}", b.name());
            }
            be::free(p);
            let q = be::calloc(1, size);
            check_block(b, q, 0, 8);
            assert!((0..size).all(|i| *(q as *const u8).add(i) == 0), "{}: calloc not zeroed", b.name());
            be::free(q);
        }
        for align in [16usize, 32, 64, 4096, 1 << 16, 1 << 20] {
            for size in [0usize, 1, 100, align, 3 * align + 5] {
                let p = be::memalign(align, size);
                check_block(b, p, size, align);
                // Grown through realloc, the contents stay.
                let q = be::realloc(p, size * 4 + 100);
                assert!(!q.is_null());
                assert!(!q.is_null());
                assert!(
                    (0..size).all(|i| *(q as *const u8).add(i) == 0xa5),
                    "{}: realloc lost data",
                    b.name()
                );
                be::free(q);
            }
        }
        let mut p = be::malloc(10);
        for (i, size) in
            [10usize, 200, 5000, 300_000, 50, 2 << 20, 7].windows(2).map(|w| (w[0], w[1])).enumerate()
        {
            *(p as *mut u8) = i as u8;
            p = be::realloc(p, size.1);
            check_block(b, p, 0, 8);
            assert_eq!(*(p as *const u8), i as u8, "{}: realloc {} -> {}", b.name(), size.0, size.1);
        }
        be::free(p);
        // Impossible requests fail, never wrap around into a small block.
        for huge in [usize::MAX, usize::MAX - 4096, 1usize << 62] {
            assert!(be::malloc(huge).is_null(), "{}: malloc({huge})", b.name());
            assert!(be::memalign(64, huge).is_null(), "{}: memalign(64, {huge})", b.name());
            let p = be::malloc(16);
            assert!(be::realloc(p, huge).is_null(), "{}: realloc(p, {huge})", b.name());
            be::free(p);
        }
    }
    // Many short threads, each allocating: their per-thread state must be set up on first
    // use and reclaimed at exit.
    let before = mapped(b);
    for _ in 0..20 {
        let hs: Vec<_> = (0..10)
            .map(|t| {
                std::thread::spawn(move || unsafe {
                    let ps: Vec<usize> =
                        (0..2000).map(|i| be::malloc(16 + (i * 7 + t) % 3000) as usize).collect();
                    assert!(ps.iter().all(|&p| p != 0));
                    for p in ps {
                        be::free(p as *mut c_void);
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }
    if let (Some(a), Some(z)) = (before, mapped(b)) {
        // Ten threads at a time hold ~3 MiB each; 200 threads whose heaps were never reused
        // would keep ~600 MiB mapped.
        assert!(
            z < a + (256 << 20),
            "{}: mapped grew from {a} to {z} over 200 short threads: {:?}",
            b.name(),
            be::stats::allocator_stats(b)
        );
    }
    let stats = be::stats::allocator_stats(b);
    assert!(!stats.is_empty(), "{}: no statistics", b.name());
    assert!(stats.iter().any(|(_, v)| *v > 0), "{}: statistics all zero: {stats:?}", b.name());
    assert!(be::introspect::heap_info(b).is_some() || b == Backend::Glibc);
}

/// What the allocator says it has mapped, where it says.
fn mapped(b: Backend) -> Option<u64> {
    let s = be::stats::allocator_stats(b);
    let key = match b {
        Backend::Rpmalloc => "mapped",
        Backend::Tcmalloc => "heap_size",
        Backend::Snmalloc => "reserved",
        Backend::Jemalloc => "mapped",
        _ => return None,
    };
    s.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

#[test]
fn every_backend() {
    for b in Backend::available_all() {
        exercise(b);
    }
    be::select(Backend::Glibc);
}

#[test]
fn names_and_availability() {
    for b in Backend::ALL {
        assert_eq!(Backend::parse(b.name().as_bytes()), Some(b));
        assert_eq!(b.name().parse::<Backend>().is_ok(), b.available());
        assert!(Backend::ACCEPTED.contains(b.name()));
        assert_eq!(Backend::AVAILABLE.contains(b.name()), b.available());
    }
    // The enum and the one list of names (shim-config's) agree, in order.
    assert_eq!(Backend::ALL.map(|b| b.name()), shim_config::BACKENDS);
    let e = "bogus".parse::<Backend>().unwrap_err();
    assert!(e.contains("accepted: glibc, jemalloc, mimalloc, tcmalloc, snmalloc, rpmalloc"), "{e}");
}
