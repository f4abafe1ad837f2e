//! `shimlog export LOG... -o DIR [--tables events,blocks,...] [--host NAME]`: the logs as
//! Parquet tables (written with the arrow and parquet crates, zstd row groups), for DuckDB,
//! Spark or Trino to query over many canaries at once (schema: docs/export.md).
//!
//! Each log goes to its own Hive-style partition, `DIR/host=NAME/pid=PID/TABLE.parquet`
//! (`TABLE-wN.parquet` for capture window N's log), so that `DIR/*/*/events*.parquet`
//! reads every process of every host together; `--layout table` puts each table in a tree
//! of its own, `DIR/TABLE/host=NAME/pid=PID/`, for engines that take a directory as a table. One streaming pass per log: the reading runs
//! on a second thread (as `stats`), events and blocks leave in batches of 64 Ki rows, so
//! memory is the live blocks (as `stats`) plus a row group being encoded.
mod blocks;
mod events;
mod sink;
mod small;
mod stacks;

use recorder::{Event, LogReader};
use sink::{Sink, BATCH};
use std::path::PathBuf;

const TABLES: [&str; 6] = ["events", "blocks", "threads", "samples", "processes", "stacks"];

#[derive(clap::Args)]
pub struct Args {
    /// Logs to export (each to its own host=/pid= directory).
    #[arg(required = true)]
    pub logs: Vec<String>,
    /// The directory to write into (created if missing).
    #[arg(short, long, value_name = "DIR")]
    pub output: PathBuf,
    /// Tables to write, comma-separated [default: events,blocks,threads,samples,processes,stacks]
    #[arg(long, value_delimiter = ',', value_parser = parse_table)]
    pub tables: Vec<String>,
    /// The host= partition's name [default: this machine's host name]
    #[arg(long)]
    pub host: Option<String>,
    /// log: DIR/host=H/pid=P/TABLE.parquet, one directory per log; table:
    /// DIR/TABLE/host=H/pid=P/TABLE.parquet, one tree per table (what Trino's Hive connector
    /// and Spark's partition discovery take as a table).
    #[arg(long, default_value = "log", value_parser = ["log", "table"])]
    pub layout: String,
    #[command(flatten)]
    pub alloc: crate::analysis::AllocFnArgs,
}

fn parse_table(s: &str) -> Result<String, String> {
    if TABLES.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!("unknown table '{s}' (accepted: {})", TABLES.join(", ")))
    }
}

pub fn run(a: Args) -> Result<i32, String> {
    let tables: Vec<&str> = if a.tables.is_empty() {
        TABLES.to_vec()
    } else {
        TABLES.iter().copied().filter(|t| a.tables.iter().any(|x| x == t)).collect()
    };
    let host = match &a.host {
        Some(h) => h.clone(),
        None => hostname(),
    };
    if host.is_empty() || host.contains(['/', '=']) {
        return Err(format!("export: --host '{host}' cannot name a directory (no '/', '=' or empty)"));
    }
    // The batches' column buffers (1 MiB each) are freed and made again 150 times a second:
    // kept in the heap, not mapped and unmapped each time (page faults and TLB shootdowns
    // were a fifth of the time).
    // SAFETY: mallopt only tunes glibc's malloc; any value is valid.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
    let wrappers = match crate::analysis::AllocFns::parse(&a.alloc.alloc_fn) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("shimlog export: {e}");
            return Ok(2);
        }
    };
    let readers: Vec<LogReader> = a.logs.iter().map(|p| crate::open::open(p)).collect::<Result<_, _>>()?;
    for (r, log) in readers.iter().zip(&a.logs) {
        let part = PathBuf::from(format!("host={host}")).join(format!("pid={}", r.header.pid));
        let at = Layout { root: a.output.clone(), part, by_table: a.layout == "table" };
        let n = one(r, log, &host, &at, &tables, &wrappers)?;
        println!("{}: {n} events -> {}", log, at.dir("TABLE").display());
    }
    Ok(0)
}

fn hostname() -> String {
    let mut b = [0u8; 256];
    // SAFETY: the buffer is writable for its length; gethostname NUL-terminates within it.
    let ok = unsafe { libc::gethostname(b.as_mut_ptr().cast(), b.len()) } == 0;
    let n = b.iter().position(|&c| c == 0).unwrap_or(0);
    if ok && n > 0 {
        String::from_utf8_lossy(&b[..n]).into_owned()
    } else {
        "unknown".into()
    }
}

/// Where a log's tables go: `root/part/` (by log) or `root/TABLE/part/` (by table).
struct Layout {
    root: PathBuf,
    part: PathBuf,
    by_table: bool,
}

impl Layout {
    fn dir(&self, table: &str) -> PathBuf {
        if self.by_table {
            self.root.join(table).join(&self.part)
        } else {
            self.root.join(&self.part)
        }
    }
}

/// The file of `table` for this log (a window's log gets its own files beside the others),
/// its directory made.
fn file(at: &Layout, r: &LogReader, table: &str) -> Result<PathBuf, String> {
    let dir = at.dir(table);
    std::fs::create_dir_all(&dir).map_err(|e| format!("export: cannot create {}: {e}", dir.display()))?;
    let p = match r.header.window {
        Some(w) => dir.join(format!("{table}-w{w}.parquet")),
        None => dir.join(format!("{table}.parquet")),
    };
    if p.exists() {
        return Err(format!("export: {} exists already (a log of the same pid and host exported before): export into another directory", p.display()));
    }
    Ok(p)
}

/// Events read at a time, and how far ahead of the one written an event's table slots are
/// prefetched.
const CHUNK: usize = 8192;
const AHEAD: usize = 8;
/// Rows of the events table held back at a batch's end for the site records of their calls
/// still to come (the shim writes a call's site record just after it in its stream; other
/// streams' records may come between in the merged order).
const HOLD: usize = 4096;

/// What one pass over a log writes as it goes.
struct Pass {
    ev_sink: Option<Sink>,
    bl_sink: Option<Sink>,
    evs: events::Events,
    bls: blocks::Blocks,
    small: small::Small,
    /// The stack ids (a log recorded with stacks).
    stacks: Option<stacks::Stacks>,
    /// The next event's position in the merged order.
    seq: u64,
}

impl Pass {
    #[inline(always)]
    fn prefetch(&self, e: &Event) {
        if self.bl_sink.is_some() && e.op.is_alloc_family() {
            self.bls.prefetch(e);
        }
    }

    #[inline]
    fn feed(&mut self, e: &Event) -> Result<(), String> {
        if self.ev_sink.is_some() {
            self.evs.push(self.seq, e);
        }
        if e.op.is_alloc_family() {
            if let Some(s) = self.bl_sink.as_mut() {
                self.bls.call(self.seq, e, s)?;
            }
        }
        if let Some(st) = self.stacks.as_mut() {
            if let Some(j) = st.take(self.seq, e) {
                self.evs.set_stack(j.call.seq, j.id);
                if j.block {
                    self.bls.set_stack(j.call.ptr, j.call.seq, j.id);
                }
            }
        }
        if self.evs.len() >= BATCH {
            if let Some(s) = self.ev_sink.as_mut() {
                let keep = self
                    .stacks
                    .as_ref()
                    .and_then(|st| st.oldest_waiting(self.seq.saturating_sub(HOLD as u64)));
                self.evs.flush(s, keep)?;
            }
        }
        self.small.take(e);
        self.seq += 1;
        Ok(())
    }
}

/// One log, in one pass; returns the events it held.
fn one(
    r: &LogReader,
    log: &str,
    host: &str,
    dir: &Layout,
    tables: &[&str],
    wrappers: &crate::analysis::AllocFns,
) -> Result<u64, String> {
    let want = |t: &str| tables.contains(&t);
    let pid = r.header.pid;
    let mut p = Pass {
        ev_sink: if want("events") {
            Some(Sink::create(&file(dir, r, "events")?, events::schema(), events::DICT, events::DELTA)?)
        } else {
            None
        },
        bl_sink: if want("blocks") {
            Some(Sink::create(&file(dir, r, "blocks")?, blocks::schema(), blocks::DICT, blocks::DELTA)?)
        } else {
            None
        },
        evs: events::Events::new(pid),
        bls: blocks::Blocks::new(pid),
        small: small::Small::default(),
        stacks: crate::analysis::sites::has_stacks(r).then(|| stacks::Stacks::new(r)),
        seq: 0,
    };
    let mut err: Option<String> = None;
    let progress = crate::analysis::Progress::new(r.compressed_bytes());
    // The reading thread's CPU time, taken when it meets the end.
    let read_cpu = std::sync::atomic::AtomicU64::new(0);
    crate::analysis::pipelined(
        r.events(),
        || vec![Event::default(); CHUNK],
        |ev, chunk| {
            let n = ev.fill(chunk);
            if n == 0 {
                read_cpu.store(crate::analysis::thread_cpu_ns(), std::sync::atomic::Ordering::Relaxed);
            }
            n
        },
        |ev| ev.bytes_read,
        |chunk, len| {
            if err.is_none() {
                let c = &chunk[..len];
                for (i, e) in c.iter().enumerate() {
                    // The live-table slots of an event a few ahead start loading now.
                    if let Some(a) = c.get(i + AHEAD) {
                        p.prefetch(a);
                    }
                    if let Err(x) = p.feed(e) {
                        err = Some(x);
                        break;
                    }
                }
            }
        },
        &progress,
    );
    progress.done();
    if let Some(e) = err {
        return Err(e);
    }
    let (mut ev_cpu, mut bl_cpu) = (0, 0);
    if let Some(mut s) = p.ev_sink {
        p.evs.flush(&mut s, None)?;
        ev_cpu = s.close()?;
    }
    if let Some(mut s) = p.bl_sink {
        p.bls.finish(&mut s)?;
        bl_cpu = s.close()?;
    }
    if std::env::var_os("SHIMLOG_STAGES").is_some() {
        // Where the CPU time of the big tables went, by thread: reading (decompressing,
        // decoding and merging the log's frames), the rows (the pass over the events and
        // the Arrow arrays made of them) and each file's Parquet encoding and compression.
        let n = p.seq.max(1) as f64;
        let ns = |t: u64| t as f64 / n;
        let rows = crate::analysis::thread_cpu_ns();
        eprintln!(
            "export stages: reading {:.1} ns/event CPU; rows and arrays {:.1}; events.parquet encoding {:.1}; blocks.parquet encoding {:.1}",
            ns(read_cpu.load(std::sync::atomic::Ordering::Relaxed)),
            ns(rows),
            ns(ev_cpu),
            ns(bl_cpu)
        );
    }
    if want("stacks") {
        // Empty for a log without stacks.
        let mut s = Sink::create(&file(dir, r, "stacks")?, stacks::schema(), &["pid"], &[])?;
        if let Some(st) = p.stacks.take() {
            s.write(&st.batch(r, pid, wrappers)?)?;
        }
        s.close()?;
    }
    let (small, seq) = (p.small, p.seq);
    let small_table =
        |name: &str, schema, batch: Result<arrow_array::RecordBatch, String>| -> Result<(), String> {
            if want(name) {
                let mut s = Sink::create(&file(dir, r, name)?, schema, &["pid", "stat"], &["ts_ns"])?;
                s.write(&batch?)?;
                s.close()?;
            }
            Ok(())
        };
    small_table("threads", small::threads_schema(), small.threads(pid))?;
    small_table("samples", small::samples_schema(), small.samples(pid))?;
    small_table("processes", small::processes_schema(), small::process(r, host, log, seq))?;
    Ok(seq)
}
