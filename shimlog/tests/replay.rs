//! `shimlog replay` on synthetic logs written with the recorder's own writer, run as the real
//! binary: what the replay reproduces (peak live bytes, cross-thread frees, op counts), what
//! it skips, that cyclic hand-offs between threads do not deadlock, and the options.
use recorder::buffer::{Args, Buf};
use recorder::writer::{create_log, write_header, LogWriter};
use recorder::{Header, Op};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// Builds a log call by call; every call gets a later time than the one before, so the merged
/// order of the log is the order of the calls here.
/// One thread's tid and its records (ticks, op, arguments).
type ThreadRecords = (u32, Vec<(u64, Op, Args)>);

struct LogBuilder {
    threads: Vec<ThreadRecords>,
    t: u64,
}

impl LogBuilder {
    fn new(tids: &[u32]) -> LogBuilder {
        let mut l = LogBuilder::lazy(tids);
        for (i, (tid, recs)) in l.threads.iter_mut().enumerate() {
            recs.push((1 + i as u64, Op::ThreadStart, Args { value: *tid as u64, ..Args::default() }));
        }
        l
    }
    /// Threads that start when `start` says.
    fn lazy(tids: &[u32]) -> LogBuilder {
        LogBuilder { threads: tids.iter().map(|&tid| (tid, Vec::new())).collect(), t: 1000 }
    }
    fn start(&mut self, th: usize) {
        let tid = self.threads[th].0 as u64;
        self.push(th, Op::ThreadStart, Args { value: tid, ..Args::default() });
    }
    fn exit(&mut self, th: usize) {
        self.push(th, Op::ThreadExit, Args::default());
    }
    fn push(&mut self, th: usize, op: Op, a: Args) {
        // Far enough apart to stay distinct when the log keeps ticks in coarser units.
        self.t += 1000;
        self.threads[th].1.push((self.t, op, a));
    }
    /// Moves the clock on by `ns` nanoseconds (ticks are ns in these logs).
    fn gap(&mut self, ns: u64) {
        self.t += ns;
    }
    fn malloc(&mut self, th: usize, size: u64, ptr: u64) {
        self.push(th, Op::Malloc, Args { size, ptr, ..Args::default() });
    }
    fn calloc(&mut self, th: usize, count: u64, size: u64, ptr: u64) {
        self.push(th, Op::Calloc, Args { count, size, ptr, ..Args::default() });
    }
    fn realloc(&mut self, th: usize, old: u64, size: u64, ptr: u64) {
        self.push(th, Op::Realloc, Args { old, size, ptr, ..Args::default() });
    }
    fn free(&mut self, th: usize, ptr: u64) {
        self.push(th, Op::Free, Args { ptr, ..Args::default() });
    }
    fn aligned(&mut self, th: usize, op: Op, align: u64, size: u64, ptr: u64) {
        self.push(th, op, Args { align, size, ptr, ..Args::default() });
    }

    fn write(&self, path: &Path) {
        let (fd, used) = create_log(path.to_str().unwrap()).unwrap();
        assert_eq!(used, path.to_str().unwrap());
        let h = Header {
            format_version: recorder::format::VERSION,
            pid: 4242,
            ppid: 1,
            exe: "/usr/bin/synthetic".into(),
            cmdline: vec!["synthetic".into(), "--test".into()],
            backend: "glibc".into(),
            backend_version: "2.36".into(),
            page_size: 4096,
            clock: "monotonic".into(),
            ticks_per_sec: 1e9,
            ref_ticks: 0,
            timing: "none".into(),
            on_full: "block".into(),
            ..Header::default()
        };
        let reserved = write_header(&fd, &h).unwrap();
        let mut w = LogWriter::new(fd, 1).unwrap();
        w.note_header(reserved);
        for (i, (_, recs)) in self.threads.iter().enumerate() {
            let stream = i as u32 + 1;
            let mut b = Buf::new_boxed(stream);
            for (t, op, a) in recs {
                if !b.has_room() {
                    w.write_buf(&b).unwrap();
                    b.reset(stream);
                }
                b.push(*op, *t, a, None);
            }
            w.write_buf(&b).unwrap();
        }
        let mut b = Buf::new_boxed(0);
        b.push(Op::End, self.t + 10, &Args::default(), None);
        w.write_buf(&b).unwrap();
    }
}

/// A path in a fresh temporary directory, removed when the returned guard is dropped.
fn tmp(name: &str) -> (tempfile::TempDir, PathBuf) {
    let d = tempfile::Builder::new().prefix("shimlog-replay-test-").tempdir().unwrap();
    let p = d.path().join(name);
    (d, p)
}

/// Runs `shimlog replay` with a time limit; panics when it runs past it.
fn shimlog(args: &[&str], limit: Duration) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_shimlog"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the pipes on threads so that a full pipe cannot stall the child.
    let mut so = c.stdout.take().unwrap();
    let mut se = c.stderr.take().unwrap();
    let ho = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut v).unwrap();
        v
    });
    let he = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut v).unwrap();
        v
    });
    let status = match c.wait_timeout(limit).unwrap() {
        Some(s) => s,
        None => {
            c.kill().unwrap();
            c.wait().unwrap();
            panic!("shimlog {args:?} did not finish within {limit:?} (deadlock?)");
        }
    };
    Output { status, stdout: ho.join().unwrap(), stderr: he.join().unwrap() }
}

fn replay_json(log: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["replay", log.to_str().unwrap(), "--json"];
    args.extend_from_slice(extra);
    let out = shimlog(&args, Duration::from_secs(120));
    assert!(out.status.success(), "shimlog {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ops(v: &Value) -> BTreeMap<String, u64> {
    v.as_object().unwrap().iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect()
}

fn expect_ops(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

/// Every backend column replayed exactly `want`, with no failures, and the plan agrees.
fn check_ops(r: &Value, want: &BTreeMap<String, u64>) {
    assert_eq!(&ops(&r["plan"]["ops"]), want);
    let backends = r["backends"].as_array().unwrap();
    assert_eq!(
        backends.len(),
        shim_backend::Backend::available_all().len(),
        "every backend of the build by default"
    );
    for b in backends {
        assert!(b.get("error").is_none(), "{b}");
        assert_eq!(&ops(&b["ops"]), want, "backend {}", b["backend"]);
        assert_eq!(b["replay_failures"], 0, "backend {}", b["backend"]);
        assert_eq!(b["misaligned_results"], 0, "backend {}", b["backend"]);
    }
}

#[test]
fn known_peak_and_cross_thread_frees_are_reproduced() {
    let mut l = LogBuilder::new(&[101, 102]);
    let (a, b) = (0, 1);
    l.aligned(a, Op::PosixMemalign, 64, 1000, 0x9000_0000);
    let blk = |i: u64| 0x1000_0000 + i * 0x10000;
    for i in 0..64 {
        l.malloc(a, 100 * (i + 1), blk(i));
    }
    // Live now: 1000 + 100 * (1 + ... + 64) = 209,000 bytes, the peak.
    for i in (1..64).step_by(2) {
        l.free(b, blk(i)); // 32 frees of blocks thread a allocated
    }
    for i in (0..64).step_by(2) {
        l.free(a, blk(i));
    }
    // The address of a block b freed comes back to a: a new block, not the old one.
    l.malloc(a, 500, blk(1));
    l.calloc(b, 4, 25, 0x2000_0000);
    l.realloc(a, 0x2000_0000, 300, 0x2100_0000); // cross-thread realloc
    l.free(b, 0x2100_0000); // cross: a reallocated it last
    l.free(b, blk(1)); // cross
    l.free(a, 0x9000_0000);
    let (_log_dir, log) = tmp("known.shimlog");
    l.write(&log);

    let r = replay_json(&log, &["--timing=all"]);
    check_ops(
        &r,
        &expect_ops(&[("posix_memalign", 1), ("malloc", 65), ("calloc", 1), ("realloc", 1), ("free", 67)]),
    );
    let p = &r["plan"];
    assert_eq!(p["ideal_bytes"], 209_000);
    assert_eq!(p["peak_live_blocks"], 65);
    assert_eq!(p["cross_thread_frees"], 34);
    assert_eq!(p["cross_thread_reallocs"], 1);
    assert_eq!(p["threads"], 2);
    for be in r["backends"].as_array().unwrap() {
        let name = &be["backend"];
        assert_eq!(be["memory"]["ideal_bytes"], 209_000, "{name}");
        assert_eq!(be["cross_thread_frees"], 34, "{name}");
        assert_eq!(be["cross_thread_reallocs"], 1, "{name}");
        assert_eq!(be["end_live_bytes"], 0, "{name}");
        // Every allocation's requested size reached the backend: 209,000 + 500 + 100 + 300.
        assert_eq!(be["requested_bytes_total"], 209_900, "{name}");
        for c in be["slop"].as_array().unwrap() {
            assert!(c["usable_bytes"].as_u64() >= c["requested_bytes"].as_u64(), "{name}: {c}");
        }
        assert_eq!(be["threads"].as_array().unwrap().len(), 2);
        let lat = &be["latency"];
        assert_eq!(lat["all"]["calls"], 135, "{name}: every call timed");
        assert_eq!(lat["memalign"]["calls"], 1);
        assert_eq!(lat["free"]["calls"], 67);
        assert!(be["events_per_s_per_thread"]["median"].as_f64().unwrap() > 0.0);
    }
}

#[test]
fn threads_handing_blocks_round_a_cycle_do_not_deadlock() {
    // Four threads; every block goes round the ring: allocated by thread i, reallocated by
    // i+1, i+2 and i+3, freed by i+4 = i. Every thread waits on its neighbour's last op
    // while its neighbour waits on it: a cycle of hand-offs in every round. Addresses are
    // the same in every round, so slots are reused across threads too.
    const N: usize = 4;
    const ROUNDS: u64 = 300;
    let mut l = LogBuilder::new(&[11, 12, 13, 14]);
    let addr = |i: usize, hop: u64| 0x4000_0000 + (i as u64) * 0x100_0000 + hop * 0x1000;
    for _ in 0..ROUNDS {
        for i in 0..N {
            l.malloc(i, 32, addr(i, 0));
        }
        for hop in 1..N as u64 {
            for i in 0..N {
                let th = (i + hop as usize) % N;
                l.realloc(th, addr(i, hop - 1), 32 + hop * 16, addr(i, hop));
            }
        }
        for i in 0..N {
            l.free(i, addr(i, N as u64 - 1));
        }
    }
    let (_log_dir, log) = tmp("cycle.shimlog");
    l.write(&log);
    let r = replay_json(&log, &[]);
    let blocks = ROUNDS * N as u64;
    check_ops(&r, &expect_ops(&[("malloc", blocks), ("realloc", 3 * blocks), ("free", blocks)]));
    assert_eq!(r["plan"]["cross_thread_reallocs"], 3 * blocks);
    assert_eq!(r["plan"]["cross_thread_frees"], blocks);
    // New slots go to a thread 8 at a time (one run per thread here): reused after that.
    assert!(r["plan"]["slots"].as_u64().unwrap() <= 8 * N as u64, "slots are reused: {}", r["plan"]["slots"]);
    for be in r["backends"].as_array().unwrap() {
        assert_eq!(be["cross_thread_reallocs"], 3 * blocks, "{}", be["backend"]);
        assert_eq!(be["cross_thread_frees"], blocks, "{}", be["backend"]);
        assert_eq!(be["end_live_bytes"], 0);
    }
}

#[test]
fn unknown_pointers_and_null_results_are_skipped_and_counted() {
    let mut l = LogBuilder::new(&[7]);
    l.free(0, 0xdead_0000); // allocated before capture began
    l.free(0, 0xdead_1000);
    l.realloc(0, 0xbeef_0000, 64, 0x5000_0000); // unknown old block: result is a new block
    l.malloc(0, 1 << 50, 0); // failed
    l.calloc(0, 1 << 40, 1 << 30, 0); // overflow: failed
    l.push(0, Op::PosixMemalign, Args { align: 64, size: 1 << 50, ptr: 0, value: 12, ..Args::default() });
    l.malloc(0, 128, 0x6000_0000);
    l.realloc(0, 0x6000_0000, 1 << 50, 0); // failed: the block stays as it was
    l.free(0, 0); // free(NULL)
    l.free(0, 0x6000_0000);
    l.free(0, 0x5000_0000);
    let (_log_dir, log) = tmp("unknown.shimlog");
    l.write(&log);
    let r = replay_json(&log, &[]);
    check_ops(&r, &expect_ops(&[("malloc", 1), ("realloc", 1), ("free", 2)]));
    let s = &r["plan"]["skipped"];
    assert_eq!(s["unknown_free"], 2);
    assert_eq!(s["unknown_realloc"], 1);
    assert_eq!(s["null_result"], 4);
    assert_eq!(s["free_null"], 1);
    assert_eq!(s["missed_free"], 0);
    assert_eq!(r["plan"]["ideal_bytes"], 192);
    let notes = r["notes"].to_string();
    assert!(notes.contains("2 frees and 1 reallocs of pointers the log never saw allocated"), "{notes}");
    for be in r["backends"].as_array().unwrap() {
        assert_eq!(be["end_live_bytes"], 0);
        assert_eq!(be["requested_bytes_total"], 192);
    }
}

#[test]
fn every_kind_of_call_is_replayed_as_itself_by_every_backend() {
    let mut l = LogBuilder::new(&[1, 2]);
    l.malloc(0, 10, 0x100_0000);
    l.calloc(1, 3, 7, 0x200_0000);
    l.realloc(0, 0x200_0000, 40, 0x300_0000);
    l.push(
        1,
        Op::Reallocarray,
        Args { old: 0x300_0000, count: 5, size: 20, ptr: 0x310_0000, ..Args::default() },
    );
    l.realloc(0, 0, 24, 0x400_0000); // realloc(NULL, 24) is malloc
    l.realloc(1, 0x400_0000, 0, 0); // glibc's realloc(p, 0) frees p
    l.aligned(0, Op::PosixMemalign, 256, 100, 0x500_0000);
    l.aligned(0, Op::AlignedAlloc, 4096, 8192, 0x600_0000);
    l.aligned(1, Op::Memalign, 48, 10, 0x700_0000); // not a power of two: rounded up
    l.aligned(1, Op::Valloc, 0, 100, 0x800_0000);
    l.aligned(0, Op::Pvalloc, 0, 5000, 0x900_0000);
    for p in [0x100_0000, 0x310_0000, 0x500_0000, 0x600_0000, 0x700_0000, 0x800_0000, 0x900_0000] {
        l.free(1, p);
    }
    let (_log_dir, log) = tmp("kinds.shimlog");
    l.write(&log);
    let r = replay_json(&log, &["--timing=all"]);
    check_ops(
        &r,
        &expect_ops(&[
            ("malloc", 1),
            ("calloc", 1),
            ("realloc", 3),
            ("reallocarray", 1),
            ("posix_memalign", 1),
            ("aligned_alloc", 1),
            ("memalign", 1),
            ("valloc", 1),
            ("pvalloc", 1),
            ("free", 7),
        ]),
    );
    for be in r["backends"].as_array().unwrap() {
        let lat = &be["latency"];
        // The backend functions called: aligned forms through memalign, realloc(NULL) through
        // malloc, realloc(p, 0) through free.
        assert_eq!(lat["memalign"]["calls"], 5, "{}", be["backend"]);
        assert_eq!(lat["malloc"]["calls"], 2);
        assert_eq!(lat["calloc"]["calls"], 1);
        assert_eq!(lat["realloc"]["calls"], 2);
        assert_eq!(lat["free"]["calls"], 8);
        assert_eq!(be["end_live_bytes"], 0);
    }
}

#[test]
fn pace_keeps_the_recorded_gaps() {
    let mut l = LogBuilder::new(&[1]);
    l.malloc(0, 100, 0x1000_0000);
    // 800 ms at one tick per ns; the reader's conversion decides what the log says it is.
    l.gap(800_000_000);
    l.free(0, 0x1000_0000);
    let (_log_dir, log) = tmp("pace.shimlog");
    l.write(&log);
    let fast = replay_json(&log, &["--backend", "glibc"]);
    let paced = replay_json(&log, &["--backend", "glibc", "--pace"]);
    let recorded = paced["plan"]["recorded_duration_ns"].as_u64().unwrap();
    assert!(recorded >= 40_000_000, "recorded {recorded} ns");
    let wall = |r: &Value| r["backends"][0]["wall_ns"].as_u64().unwrap();
    assert!(wall(&fast) < recorded / 2, "fast replay took {} ns of {recorded}", wall(&fast));
    assert!(wall(&paced) >= recorded * 95 / 100, "paced replay took {} ns of {recorded}", wall(&paced));
    assert!(wall(&paced) < recorded + 500_000_000, "paced replay took {} ns of {recorded}", wall(&paced));
    assert_eq!(paced["options"]["pace"], true);
    assert_eq!(paced["options"]["pace_mode"], "sleep");
    // Busy: the same gap, spent on the CPU instead of asleep.
    let busy = replay_json(&log, &["--backend", "glibc", "--pace=busy"]);
    assert_eq!(busy["options"]["pace_mode"], "busy");
    assert!(wall(&busy) >= recorded * 95 / 100, "busy replay took {} ns of {recorded}", wall(&busy));
    let cpu = |r: &Value| {
        r["backends"][0]["cpu_user_ns"].as_u64().unwrap() + r["backends"][0]["cpu_sys_ns"].as_u64().unwrap()
    };
    // How much of a CPU a spinning thread gets depends on the machine's load (a shared 2-core
    // machine at load 9 gave it 0.3 s of 0.8); asleep it takes next to none.
    assert!(
        cpu(&busy) > 5 * cpu(&paced) + recorded / 50,
        "busy: {} ns of CPU, asleep: {} ns, over a {recorded} ns gap",
        cpu(&busy),
        cpu(&paced)
    );
    let out = shimlog(&["replay", log.to_str().unwrap(), "--pace=nap"], Duration::from_secs(30));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown value 'nap' (accepted: sleep, busy)"));
}

#[test]
fn touch_makes_rss_follow_the_blocks() {
    const BIG: u64 = 64 << 20;
    let mut l = LogBuilder::new(&[1]);
    l.malloc(0, BIG, 0x1000_0000);
    l.free(0, 0x1000_0000);
    let (_log_dir, log) = tmp("touch.shimlog");
    l.write(&log);
    let untouched = replay_json(&log, &["--touch=none"]);
    let first = replay_json(&log, &[]);
    let all = replay_json(&log, &["--touch"]);
    assert_eq!(first["options"]["touch"], "first", "the default");
    assert_eq!(all["options"]["touch"], "all", "a bare --touch");
    for i in 0..3 {
        let u = &untouched["backends"][i];
        let peak = |b: &Value| b["memory"]["peak_rss_bytes"].as_u64().unwrap();
        assert!(peak(u) < BIG / 4, "{}: untouched peak {}", u["backend"], peak(u));
        for t in [&first["backends"][i], &all["backends"][i]] {
            // One byte per page is enough to fault every page in.
            assert!(peak(t) >= BIG * 9 / 10, "{}: touched peak {}", t["backend"], peak(t));
            assert!(t["memory"]["fragmentation"].as_f64().unwrap() >= 0.9);
            assert!(t["minor_faults"].as_u64().unwrap() >= BIG / 4096 / 2 / 512, "{t}");
        }
    }
    assert!(untouched["notes"].to_string().contains("memory was not touched"));
    assert!(first["notes"].to_string().contains("one byte written in every page"));
    assert!(all["notes"].to_string().contains("every allocated byte was written"));
    let out = shimlog(&["replay", log.to_str().unwrap(), "--touch=some"], Duration::from_secs(30));
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("unknown value 'some' (accepted: none, first, all)"), "{e}");
}

#[test]
fn the_table_has_one_column_per_backend_and_marks_the_best() {
    let mut l = LogBuilder::new(&[1, 2]);
    for i in 0..200 {
        l.malloc(i % 2, 16 + i as u64, 0x1000_0000 + i as u64 * 0x100);
    }
    for i in 0..200 {
        l.free((i + 1) % 2, 0x1000_0000 + i as u64 * 0x100);
    }
    let (_log_dir, log) = tmp("table.shimlog");
    l.write(&log);
    let out = shimlog(
        &["replay", log.to_str().unwrap(), "--backend", "jemalloc,mimalloc"],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8(out.stdout).unwrap();
    let head = s.lines().find(|l| l.contains("jemalloc") && l.contains("mimalloc")).unwrap();
    assert!(!head.contains("glibc"), "only the backends asked for: {head}");
    let wall = s.lines().find(|l| l.starts_with("wall time")).unwrap();
    assert!(wall.contains('*'), "{wall}");
    assert!(s.contains("cross-thread frees"), "{s}");
    assert!(s.contains("--touch=first, the default"), "{s}");
    assert!(s.contains("excluded from every RSS figure"), "{s}");
    // Progress goes to stderr only on a terminal.
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn bad_input_gets_a_one_line_error() {
    let mut l = LogBuilder::new(&[1]);
    l.malloc(0, 1, 0x1000);
    let (_log_dir, log) = tmp("bad.shimlog");
    l.write(&log);
    let out = shimlog(&["replay", log.to_str().unwrap(), "--backend", "hoard"], Duration::from_secs(30));
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains(
            "unknown backend 'hoard' (accepted: glibc, jemalloc, mimalloc, tcmalloc, snmalloc, rpmalloc)"
        ),
        "{e}"
    );

    let (_junk_dir, junk) = tmp("junk.shimlog");
    std::fs::write(&junk, b"this is not a log").unwrap();
    let out = shimlog(&["replay", junk.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("not a shim log"), "{e}");

    let (_empty_dir, empty) = tmp("empty.shimlog");
    LogBuilder::new(&[1]).write(&empty);
    let out = shimlog(&["replay", empty.to_str().unwrap()], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1));
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("no malloc-family calls"), "{e}");
}

#[test]
fn a_realloc_stamped_after_its_old_address_was_reused_keeps_each_block_with_its_thread() {
    // Thread a's realloc frees X inside the allocator, thread b's malloc gets X, and only
    // then does a's realloc return and get its time stamp: the log shows b's malloc of X
    // while a's X is still live. Each block must stay with its own thread.
    let mut l = LogBuilder::new(&[1, 2]);
    l.malloc(0, 100, 0x1000); // a's buffer at X
    l.malloc(1, 40, 0x1000); // b gets X before a's realloc is logged
    l.realloc(0, 0x1000, 200, 0x2000); // a's buffer moves to Y
    l.realloc(1, 0x1000, 80, 0x3000); // b's block grows: b's own, not unknown
    l.free(0, 0x2000);
    l.free(1, 0x3000);
    // An address handed out again without any free at all: the first block leaks.
    l.malloc(0, 10, 0x5000);
    l.malloc(0, 20, 0x5000);
    l.free(0, 0x5000);
    let (_log_dir, log) = tmp("late-realloc.shimlog");
    l.write(&log);
    let r = replay_json(&log, &[]);
    check_ops(&r, &expect_ops(&[("malloc", 4), ("realloc", 2), ("free", 3)]));
    let p = &r["plan"];
    assert_eq!(p["late_realloc_frees"], 1);
    assert_eq!(p["skipped"]["unknown_realloc"], 0);
    assert_eq!(p["skipped"]["missed_free"], 1);
    assert_eq!(p["cross_thread_reallocs"], 0);
    assert_eq!(p["cross_thread_frees"], 0);
    assert_eq!(p["ideal_bytes"], 280); // a's 200 and b's 80 (b's 40 and a's 100 before)
    assert_eq!(p["end_live_bytes"], 10);
    for be in r["backends"].as_array().unwrap() {
        assert_eq!(be["cross_thread_reallocs"], 0, "{}", be["backend"]);
        assert_eq!(be["end_live_bytes"], 10, "{}", be["backend"]);
    }
}

#[test]
fn threads_start_and_exit_as_they_did_in_the_program() {
    // A main thread and 12 workers, two alive at a time: each worker starts, allocates, frees
    // the blocks of the worker before it (which has exited by then) and exits. Started all at
    // once, 13 threads would run together; replayed as recorded, never more than 3.
    const WORKERS: usize = 12;
    let tids: Vec<u32> = (0..=WORKERS as u32).map(|i| 500 + i).collect();
    let mut l = LogBuilder::lazy(&tids);
    l.start(0);
    l.malloc(0, 4096, 0x7000_0000);
    let blk = |w: usize, i: u64| 0x1000_0000 + w as u64 * 0x100_0000 + i * 0x1000;
    for w in 1..=WORKERS {
        l.start(w);
        for i in 0..50 {
            l.malloc(w, 64 + i, blk(w, i));
        }
        if w >= 2 {
            l.exit(w - 1);
            for i in 0..50 {
                l.free(w, blk(w - 1, i));
            }
            l.malloc(0, 32, 0x7100_0000 + w as u64 * 0x100);
            l.free(0, 0x7100_0000 + w as u64 * 0x100);
        }
    }
    for i in 0..50 {
        l.free(0, blk(WORKERS, i));
    }
    l.exit(WORKERS);
    l.free(0, 0x7000_0000);
    let (_log_dir, log) = tmp("threads.shimlog");
    l.write(&log);
    let r = replay_json(&log, &[]);
    let calls = 2 + 2 * 50 * WORKERS as u64 + 2 * (WORKERS as u64 - 1);
    check_ops(&r, &expect_ops(&[("malloc", calls / 2), ("free", calls / 2)]));
    assert_eq!(r["plan"]["threads"], WORKERS + 1);
    assert_eq!(r["plan"]["peak_threads"], 3, "main and two workers");
    assert_eq!(r["plan"]["lifecycle_events"], 1 + 2 * WORKERS as u64);
    for be in r["backends"].as_array().unwrap() {
        let name = &be["backend"];
        let ran = be["max_threads_running"].as_u64().unwrap();
        assert!((1..=3).contains(&ran), "{name}: {ran} replay threads ran at once");
        assert_eq!(be["threads"].as_array().unwrap().len(), WORKERS + 1, "{name}");
        // Each worker's blocks, freed by the next worker or (the last's) by main.
        assert_eq!(be["cross_thread_frees"], 50 * WORKERS as u64, "{name}");
        assert_eq!(be["end_live_bytes"], 0, "{name}");
    }
    assert!(r["notes"].to_string().contains("at most 3 threads alive at once"), "{}", r["notes"]);
}

#[test]
fn one_call_in_n_is_timed() {
    let mut l = LogBuilder::new(&[1]);
    for i in 0..6400u64 {
        l.malloc(0, 16 + i % 100, 0x1000_0000 + i * 0x100);
        l.free(0, 0x1000_0000 + i * 0x100);
    }
    let (_log_dir, log) = tmp("timing.shimlog");
    l.write(&log);
    for (args, every) in [(&[][..], 64u64), (&["--timing=16"][..], 16), (&["--timing=all"][..], 1)] {
        let r = replay_json(&log, args);
        for be in r["backends"].as_array().unwrap() {
            assert_eq!(be["excluded"]["time_every"], every, "{args:?}");
            assert_eq!(be["latency"]["all"]["calls"], 12_800 / every, "{args:?} {}", be["backend"]);
            assert_eq!(be["excluded"]["timed_calls"], 12_800 / every);
        }
    }
    let out = shimlog(&["replay", log.to_str().unwrap(), "--timing=0"], Duration::from_secs(30));
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    // clap's usage lines follow, as for every argument error.
    assert!(
        e.lines().next().unwrap().contains("unknown value '0' (accepted: all, or N from 1 to 1048576"),
        "{e}"
    );
}
