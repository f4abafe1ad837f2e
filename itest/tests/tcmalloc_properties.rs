//! gperftools' MallocExtension when another backend serves a program's tcmalloc (issue 41):
//! itest/programs/c/tcmalloc_props.c, linked with Debian's libtcmalloc_minimal.so.4, asks
//! every numeric property gperftools 2.10 answers and one it does not. Switched to each
//! backend, each is answered (1) exactly where tcmalloc answers it bare, with figures in
//! tcmalloc's relations (allocated <= committed <= heap size); MarkThreadIdle and
//! ReleaseFreeMemory return; GetAllocatedSize covers the block.
use itest::*;
use std::collections::BTreeMap;

fn answers(out: &Output, what: &str) -> BTreeMap<String, (i64, u64)> {
    out.assert_success(what);
    let m: BTreeMap<String, (i64, u64)> = out
        .stdout_str()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            match f.as_slice() {
                [name, rc, v] => (name.to_string(), (rc.parse().expect("rc"), v.parse().expect("value"))),
                [name, v] => (name.to_string(), (1, v.parse().expect("value"))),
                _ => panic!("{what}: a line not understood: {l}"),
            }
        })
        .collect();
    assert!(m.len() >= 23, "{what}: {m:?}");
    m
}

fn check(backend: &str) {
    let prog = cprog("tcmalloc_props");
    let real = answers(&run(command(&prog)), "tcmalloc_props bare");
    let t = run_traced_mode(Some(backend), || command(&prog));
    let what = format!("tcmalloc_props switched to {backend}");
    let emu = answers(&t.out, &what);
    for (name, (rc, _)) in &real {
        let (erc, _) = emu.get(name).unwrap_or_else(|| panic!("{what}: {name} not asked"));
        assert_eq!(
            erc, rc,
            "{what}: {name} answered {erc}, tcmalloc answers {rc}\nstderr:\n{}",
            t.out.stderr
        );
    }
    let v = |n: &str| emu[n].1;
    assert!(v("allocated_size") >= 1000, "{what}: GetAllocatedSize {}", v("allocated_size"));
    assert!(
        v("generic.current_allocated_bytes") <= v("tcmalloc.pageheap_committed_bytes")
            && v("tcmalloc.pageheap_committed_bytes") <= v("generic.heap_size"),
        "{what}: {emu:?}"
    );
}

macro_rules! per_backend {
    ($($b:ident),*) => { $(#[test] fn $b() { check(stringify!($b)) })* };
}
per_backend!(glibc, jemalloc, mimalloc, tcmalloc, snmalloc, rpmalloc);
