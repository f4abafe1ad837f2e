//! Allocator settings applied to the real allocators: every accepted key with its example
//! value reaches the allocator, which reads it back as given (jemalloc's `opt.*` mallctls,
//! mimalloc's `mi_option_get`, tcmalloc's properties). Each allocator in a child process of
//! its own (this test binary run again), since settings go in before the first allocation.
use shim_backend::settings::{self, Context};
use shim_backend::{self as be, Backend};
use std::process::Command;

const CHILD: &str = "SHIM_SETTINGS_TEST_CHILD";

/// In the child: apply every key's example to backend `name`, select it, allocate, and
/// print `key=read-back` lines.
fn settings_of(b: Backend) -> String {
    let s: Vec<String> = settings::keys(b)
        .iter()
        // Left out: keys whose example prints at exit or reserves much memory, and percpu_arena
        // (it sets narenas to the CPUs).
        .filter(|k| {
            ![
                "stats_print",
                "confirm_conf",
                "show_stats",
                "verbose",
                "reserve_huge_os_pages",
                "reserve_os_memory",
                "percpu_arena",
            ]
            .contains(&k.name)
        })
        .map(|k| format!("{}={}", k.name, k.example))
        .collect();
    s.join(",")
}

fn child(name: &str) {
    let b: Backend = name.parse().unwrap();
    let s: &'static str = Box::leak(settings_of(b).into_boxed_str());
    // jemalloc took its settings from SHIM_BACKEND in its constructor already (the shim's
    // way); the others now.
    if b != Backend::Jemalloc {
        settings::apply(b, s.as_bytes(), None, Context::Child).unwrap();
    }
    be::select(b);
    unsafe {
        let p = be::malloc(100);
        be::free(p);
    }
    for (k, v) in settings::pairs(s.as_bytes()) {
        let k = std::str::from_utf8(k).unwrap();
        println!(
            "{k}={}={}",
            std::str::from_utf8(v).unwrap(),
            settings::read_back(b, k).unwrap_or_else(|| "?".into())
        );
    }
}

fn run(b: Backend) -> (String, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "every_key_reaches_the_allocator", "--nocapture", "--test-threads=1"])
        .env(CHILD, b.name())
        .env("SHIM_BACKEND", format!("{}:{}", b.name(), settings_of(b)))
        .output()
        .unwrap();
    assert!(out.status.success(), "{} child failed: {}", b.name(), String::from_utf8_lossy(&out.stderr));
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn every_key_reaches_the_allocator() {
    if let Ok(name) = std::env::var(CHILD) {
        return child(&name);
    }
    let mut backends = vec![Backend::Jemalloc, Backend::Mimalloc];
    assert!(
        Backend::Tcmalloc.available(),
        "this build lacks tcmalloc (Debian's libtcmalloc_minimal.a): its settings cannot be tested"
    );
    backends.push(Backend::Tcmalloc);
    for b in backends {
        let (out, err) = run(b);
        assert!(!err.contains("Invalid conf"), "jemalloc refused a key: {err}");
        let mut n = 0;
        for line in out.lines().filter(|l| l.matches('=').count() == 2) {
            let mut it = line.split('=');
            let (k, given, got) = (it.next().unwrap(), it.next().unwrap(), it.next().unwrap());
            n += 1;
            if got == "?" {
                // jemalloc keeps no opt.* for these spellings of other options.
                assert!(
                    b == Backend::Jemalloc && ["lg_tcache_max"].contains(&k),
                    "{}: {k} cannot be read back",
                    b.name()
                );
                continue;
            }
            let want = match given {
                "true" => "1",
                "false" => "0",
                g => g,
            };
            let got_n = match got {
                "true" => "1",
                "false" => "0",
                g => g,
            };
            assert!(
                got_n == want || got.parse::<f64>().ok() == want.parse::<f64>().ok(),
                "{}: {k} given {given}, allocator says {got}",
                b.name()
            );
        }
        assert!(n >= 3, "{}: only {n} keys read back:\n{out}", b.name());
    }
}
