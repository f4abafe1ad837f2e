//! A log of format version 4 (row frames), as the shim of that version wrote it, still reads:
//! `shimlog dump` prints what the version 4 build printed for it, and `stats` counts the
//! calls the program itself counted. The log (tests/data/v4-demo.shimlog) is the demo
//! workload (`demo 2 300`) recorded by the shim at commit d8e6b36; v4-demo.out is the
//! program's own output from that run, v4-demo.dump that build's `shimlog dump` of it.
use std::process::Command;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

fn shimlog(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_shimlog")).args(args).output().expect("run shimlog");
    assert!(out.status.success(), "shimlog {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn version_4_log_reads_as_before() {
    let log = format!("{DATA}/v4-demo.shimlog");
    let r = recorder::LogReader::open(&log).expect("open the v4 log");
    assert_eq!(r.version, 4);
    assert!(r.frames.iter().all(|f| !f.h.columnar));
    let want = std::fs::read_to_string(format!("{DATA}/v4-demo.dump")).unwrap();
    assert_eq!(shimlog(&["dump", &log]), want);

    // The program's counts (demo: allocations=... frees=...) against stats' totals.
    let prog = std::fs::read_to_string(format!("{DATA}/v4-demo.out")).unwrap();
    let count = |k: &str| -> u64 {
        let at = prog.find(&format!(" {k}=")).unwrap_or_else(|| panic!("{k} in {prog}"));
        prog[at + k.len() + 2..].split(' ').next().unwrap().parse().unwrap()
    };
    let stats = shimlog(&["stats", &log]);
    let row = |op: &str| -> u64 {
        let line = stats
            .lines()
            .find(|l| l.split_whitespace().next() == Some(op))
            .unwrap_or_else(|| panic!("{op} in {stats}"));
        line.split_whitespace().nth(1).unwrap().replace(',', "").parse().unwrap()
    };
    // The C library's own start-up allocations come on top of the program's.
    for op in ["calloc", "posix_memalign", "aligned_alloc", "memalign", "realloc"] {
        assert!(
            row(op) >= count(op) && row(op) <= count(op) + 3,
            "{op}: stats {} program {}",
            row(op),
            count(op)
        );
    }
    assert!(row("free") >= count("frees"), "frees");
}
