//! SHIM_PACK under the real shim: itest/programs/c/counts.c recorded with columnar frames reads back
//! as the same calls as with rows, in a smaller log, and consistent (every free of a block
//! made, no reuse conflict), on every backend; `auto` (the default) writes rows while every
//! core is busy.
use itest::*;

const OPS: [&str; 8] =
    ["malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign", "valloc"];

fn recorded(backend: &str, pack: &str) -> (Analysis, u64, usize) {
    let t = run_traced(backend, || {
        let mut c = command(cprog("counts"));
        c.arg("400").env("SHIM_PACK", pack);
        c
    });
    t.out.assert_success(&format!("counts under SHIM_PACK={pack}, {backend}"));
    assert!(!t.out.stderr.contains("shim:"), "{}", t.out.stderr);
    let log = t.only_log();
    let r = recorder::LogReader::open(log.to_str().unwrap()).expect("open the log");
    let columnar = r.frames.iter().filter(|f| f.h.columnar).count();
    (analyze(&log, |_| true), std::fs::metadata(&log).unwrap().len(), columnar)
}

#[test]
fn columns_read_back_as_rows_do() {
    for backend in BACKENDS {
        let (rows, rows_bytes, rows_columnar) = recorded(backend, "rows");
        let (cols, cols_bytes, cols_columnar) = recorded(backend, "columns");
        assert_eq!(rows_columnar, 0, "{backend}: SHIM_PACK=rows wrote columnar frames");
        assert!(cols_columnar > 0, "{backend}: SHIM_PACK=columns wrote no columnar frame");
        for op in OPS {
            assert_eq!(cols.count(op), rows.count(op), "{backend}: {op} calls, columns against rows");
        }
        cols.assert_consistent(true);
        assert!(cols_bytes < rows_bytes, "{backend}: columns {cols_bytes} bytes, rows {rows_bytes}");
    }
}

/// The share of a log's thread-stream frames that are columnar.
fn columnar_share(log: &std::path::Path) -> (usize, usize) {
    let r = recorder::LogReader::open(log.to_str().unwrap()).expect("open the log");
    let frames: Vec<_> = r.frames.iter().filter(|f| f.h.stream != 0).collect();
    (frames.iter().filter(|f| f.h.columnar).count(), frames.len())
}

/// SHIM_PACK=auto (the default) writes rows while no core is idle: with twice as many
/// spinning threads as CPUs beside it, a program allocating for 2 s gets columns only until
/// the recorder's first look at /proc/stat (200 ms), and SHIM_PACK=columns packs regardless.
#[test]
fn auto_writes_rows_while_every_core_is_busy() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let stop = Arc::new(AtomicBool::new(false));
    let n = 2 * std::thread::available_parallelism().map_or(2, |n| n.get());
    let hogs: Vec<_> = (0..n)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
                }
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let run = |pack: Option<&str>| {
        let t = run_traced("glibc", || {
            let mut c = command(cprog("windows"));
            c.arg("2");
            if let Some(p) = pack {
                c.env("SHIM_PACK", p);
            }
            c
        });
        t.out.assert_success("windows 2");
        assert!(!t.out.stderr.contains("shim:"), "{}", t.out.stderr);
        columnar_share(&t.only_log())
    };
    let auto = run(None);
    let columns = run(Some("columns"));
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    assert!(auto.1 >= 8 && columns.1 >= 8, "too few frames to judge: auto {auto:?}, columns {columns:?}");
    assert!(
        auto.0 * 2 < auto.1,
        "SHIM_PACK=auto packed {} of {} frames with every core busy",
        auto.0,
        auto.1
    );
    assert!(
        columns.0 * 10 >= columns.1 * 9,
        "SHIM_PACK=columns packed only {} of {} frames",
        columns.0,
        columns.1
    );
}

/// A bad SHIM_PACK gives one line and the default.
#[test]
fn an_unknown_pack_gives_one_line() {
    let t = run_traced("glibc", || {
        let mut c = command(cprog("counts"));
        c.arg("10").env("SHIM_PACK", "zip");
        c
    });
    t.out.assert_success("counts under SHIM_PACK=zip");
    let lines: Vec<_> = t.out.stderr.lines().filter(|l| l.contains("shim:")).collect();
    assert_eq!(
        lines,
        ["shim: unknown SHIM_PACK (accepted: auto, columns, rows); using auto"],
        "{}",
        t.out.stderr
    );
}

/// A cgroup v1 cpu group with a CPU quota, removed when dropped (None where the machine
/// has no cgroup v1 cpu controller mounted or the test may not create one).
struct QuotaGroup(std::path::PathBuf);

impl QuotaGroup {
    fn create(quota_us: u32) -> Option<QuotaGroup> {
        let root = std::path::Path::new("/sys/fs/cgroup/cpu");
        if !root.join("cpu.cfs_quota_us").is_file() {
            return None;
        }
        let dir = root.join(format!("shim-itest-{}", std::process::id()));
        std::fs::create_dir(&dir).ok()?;
        let g = QuotaGroup(dir);
        std::fs::write(g.0.join("cpu.cfs_period_us"), "100000").ok()?;
        std::fs::write(g.0.join("cpu.cfs_quota_us"), quota_us.to_string()).ok()?;
        Some(g)
    }
}

impl Drop for QuotaGroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// SHIM_PACK=auto writes rows in a container at its CPU quota, however idle the machine's
/// cores are: python3 allocating in a cgroup limited to 0.2 CPU is throttled, and the
/// recorder sees it in the group's cpu.stat. (A `cgroup` skip where no cgroup can be made.)
#[test]
fn auto_writes_rows_in_a_cgroup_at_its_quota() {
    let Some(g) = QuotaGroup::create(20_000) else {
        return itest::skip(
            "cgroup",
            "no cgroup v1 cpu controller to make a group with a quota in (not delegated here)",
        );
    };
    let tasks = g.0.join("tasks");
    let t = run_traced("glibc", || {
        let mut c = command("sh");
        c.arg("-c")
            .arg(format!("echo $$ > {} && exec \"$0\" -c \"$1\"", tasks.display()))
            .arg(python3())
            .arg("x = [str(i) * 3 for i in range(1500000)]; print(len(x))")
            .env("PYTHONMALLOC", "malloc");
        c
    });
    t.out.assert_success("python3 in a cgroup with a quota");
    let throttled = std::fs::read_to_string(g.0.join("cpu.stat")).unwrap_or_default();
    assert!(
        throttled.contains("nr_throttled") && !throttled.contains("nr_throttled 0\n"),
        "the group was never throttled:\n{throttled}"
    );
    let log = t
        .logs()
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a log");
    let (packed, frames) = columnar_share(&log);
    assert!(frames >= 8, "too few frames to judge: {frames}");
    assert!(packed * 2 < frames, "SHIM_PACK=auto packed {packed} of {frames} frames in a throttled cgroup");
}
