//! Synthetic logs for the tests, written with the recorder's own writer: one buffer per
//! stream (each thread's stream opens with its ThreadStart), frames written when a buffer
//! fills and at the end, ticks equal to nanoseconds.
#![allow(dead_code)]
pub mod random;
use recorder::buffer::{Args, Buf};
use recorder::format::{self, Header};
use recorder::writer::{create_log, write_header, LogWriter};
use recorder::Op;
use std::collections::BTreeMap;

pub struct Log {
    pub path: String,
    w: LogWriter,
    bufs: BTreeMap<u32, Box<Buf>>,
    /// Stream of each thread id.
    streams: BTreeMap<u32, u32>,
    last_ts: u64,
}

pub fn header(pid: u32, start_mono_ns: u64) -> Header {
    Header {
        format_version: format::VERSION,
        pid,
        ppid: 1,
        exe: "/usr/bin/synthetic".into(),
        cmdline: vec!["synthetic".into(), "--test".into()],
        backend: "jemalloc".into(),
        backend_version: "5.3.0".into(),
        page_size: 4096,
        start_mono_ns,
        clock: "monotonic".into(),
        ticks_per_sec: 1e9,
        timing: "all".into(),
        on_full: "drop".into(),
        shim_version: "test".into(),
        ..Default::default()
    }
}

impl Log {
    pub fn create(path: &str, h: &Header) -> Log {
        let _ = std::fs::remove_file(path);
        let (fd, path) = create_log(path).expect("create log");
        let reserved = write_header(&fd, h).expect("header");
        let mut w = LogWriter::new(fd, 3).expect("writer");
        w.note_header(reserved);
        Log { path, w, bufs: BTreeMap::new(), streams: BTreeMap::new(), last_ts: 0 }
    }

    fn push(&mut self, stream: u32, op: Op, ts: u64, a: Args, bt: Option<u64>) {
        let b = self.bufs.entry(stream).or_insert_with(|| Buf::new_boxed(stream));
        if !b.has_room() {
            self.w.write_buf(b).expect("write frame");
            b.reset(stream);
        }
        b.push(op, ts, &a, bt);
        self.last_ts = self.last_ts.max(ts);
    }

    /// The stream of thread `tid`, opened (with its ThreadStart at `ts`) on first use.
    fn stream(&mut self, tid: u32, ts: u64) -> u32 {
        if let Some(&s) = self.streams.get(&tid) {
            return s;
        }
        let s = self.streams.len() as u32 + 1;
        self.streams.insert(tid, s);
        self.push(s, Op::ThreadStart, ts, Args { value: tid as u64, ..Default::default() }, None);
        s
    }

    pub fn thread(&mut self, tid: u32, ts: u64) {
        self.stream(tid, ts);
    }

    pub fn call(&mut self, tid: u32, ts: u64, op: Op, a: Args, backend_ns: Option<u64>) {
        let s = self.stream(tid, ts);
        self.push(s, op, ts, a, backend_ns);
    }

    pub fn malloc(&mut self, tid: u32, ts: u64, size: u64, ptr: u64) {
        self.call(tid, ts, Op::Malloc, Args { size, ptr, ..Default::default() }, None);
    }

    pub fn free(&mut self, tid: u32, ts: u64, ptr: u64) {
        self.call(tid, ts, Op::Free, Args { ptr, ..Default::default() }, None);
    }

    pub fn thread_record(&mut self, tid: u32, ts: u64, op: Op, value: u64) {
        let s = self.stream(tid, ts);
        self.value_record(s, ts, op, value);
    }

    /// A process-stream record (RSS, ...).
    /// A watch record (stall, alloc_stat, window, thread_seen): two fields, and a time.
    pub fn watch(&mut self, ts: u64, op: Op, size: u64, value: u64, bt: Option<u64>) {
        self.push(0, op, ts, Args { size, value, ..Args::default() }, bt);
    }

    pub fn process(&mut self, ts: u64, op: Op, value: u64) {
        self.value_record(0, ts, op, value);
    }

    /// A record whose one field is its value, on stream `s`.
    fn value_record(&mut self, s: u32, ts: u64, op: Op, value: u64) {
        let a = Args { value, ..Default::default() };
        self.push(s, op, ts, a, None);
    }

    /// Writes every buffer; with `end`, closes the log with ThreadExits and End.
    pub fn finish(mut self, end: bool) -> String {
        if end {
            let t = self.last_ts + 1;
            let tids: Vec<u32> = self.streams.keys().copied().collect();
            for tid in tids {
                self.thread_record(tid, t, Op::ThreadExit, 0);
            }
            self.process(t + 1, Op::End, 0);
        }
        for b in self.bufs.values() {
            self.w.write_buf(b).expect("write frame");
        }
        self.path.clone()
    }
}

/// Runs the real shimlog binary.
pub fn shimlog(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_shimlog")).args(args).output().expect("run shimlog")
}

/// `shimlog stats --json ARGS...`, parsed; panics with stderr when it fails.
pub fn stats_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["stats", "--json"];
    a.extend_from_slice(args);
    let o = shimlog(&a);
    assert!(o.status.success(), "shimlog {a:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("stats --json prints one JSON document")
}

/// A scratch directory for one test.
pub fn dir(name: &str) -> String {
    let d = format!("{}/stats-tests/{name}", env!("CARGO_TARGET_TMPDIR"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// A number of the --json output, which must be an unsigned one.
pub fn u(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an unsigned number: {v}"))
}

/// One step of xorshift64: deterministic test data.
pub fn xorshift(x: &mut u64) {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
}

/// A log of process `pid` in a fresh directory `name`, with `tids` started at 100 ns.
pub fn four_threads(name: &str, pid: u32, tids: [u32; 4]) -> Log {
    let d = dir(name);
    let mut l = Log::create(&format!("{d}/{name}.shimlog"), &header(pid, 0));
    for t in tids {
        l.thread(t, 100);
    }
    l
}
