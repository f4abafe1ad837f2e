//! The small tables, kept in memory while the log is read and written at its end: threads
//! (one row per thread stream), samples (RSS and the allocator's own statistics over time)
//! and processes (the log's header, one row).
use arrow_array::{ArrayRef, BooleanArray, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use recorder::{Event, Op};
use rustc_hash::FxHashMap;
use std::sync::Arc;

fn schema(cols: &[(&str, DataType, bool)]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter().map(|(n, t, null)| Field::new(*n, t.clone(), *null)).collect::<Vec<_>>(),
    ))
}

pub fn threads_schema() -> SchemaRef {
    use DataType::*;
    schema(&[
        ("pid", Int32, false),
        ("tid", Int32, false),
        ("stream", Int32, false),
        ("first_ts", Int64, false),
        ("last_ts", Int64, false),
        ("events", Int64, false),
        ("allocs", Int64, false),
        ("frees", Int64, false),
        ("bytes_allocated", Int64, false),
    ])
}

pub fn samples_schema() -> SchemaRef {
    use DataType::*;
    schema(&[("pid", Int32, false), ("ts_ns", Int64, false), ("stat", Utf8, false), ("value", Int64, false)])
}

pub fn processes_schema() -> SchemaRef {
    use DataType::*;
    schema(&[
        ("pid", Int32, false),
        ("ppid", Int32, false),
        ("forked", Boolean, false),
        ("exe", Utf8, false),
        ("cmdline", Utf8, false),
        ("backend", Utf8, false),
        ("backend_version", Utf8, false),
        ("page_size", Int64, false),
        ("start_unix_ns", Int64, false),
        ("start_mono_ns", Int64, false),
        ("clock", Utf8, false),
        ("timing", Utf8, false),
        ("on_full", Utf8, false),
        ("shim_version", Utf8, false),
        ("window", Int32, true),
        ("host", Utf8, false),
        ("log", Utf8, false),
        ("events", Int64, false),
        ("file_bytes", Int64, false),
    ])
}

#[derive(Default, Clone, Copy)]
struct Thread {
    tid: u32,
    first: u64,
    last: u64,
    events: u64,
    allocs: u64,
    frees: u64,
    bytes: u64,
}

/// Threads and samples, fed every event.
#[derive(Default)]
pub struct Small {
    /// Each stream's place in `order`, `last` the stream of the event before (most events
    /// follow one of the same stream: no hashing for them).
    index: FxHashMap<u32, usize>,
    last: Option<(u32, usize)>,
    /// The streams in the order first seen, with their counts.
    order: Vec<(u32, Thread)>,
    samples: Vec<(u64, &'static str, u64)>,
}

impl Small {
    #[inline]
    pub fn take(&mut self, e: &Event) {
        match e.op {
            Op::Rss => self.samples.push((e.ts_ns, "rss", e.value())),
            Op::AllocStat => {
                self.samples.push((e.ts_ns, recorder::event::alloc_stat_name(e.size), e.value()))
            }
            _ => {}
        }
        if e.stream == 0 {
            return;
        }
        let i = match self.last {
            Some((s, i)) if s == e.stream => i,
            _ => {
                let i = *self.index.entry(e.stream).or_insert_with(|| {
                    self.order.push((e.stream, Thread { tid: e.tid, first: e.ts_ns, ..Default::default() }));
                    self.order.len() - 1
                });
                self.last = Some((e.stream, i));
                i
            }
        };
        let t = &mut self.order[i].1;
        t.events += 1;
        if e.op.is_alloc_family() {
            t.last = e.ts_ns;
            if e.op.is_free() {
                t.frees += (e.ptr != 0) as u64;
            } else if e.ptr != 0 {
                t.allocs += 1;
                t.bytes += e.requested();
            }
        }
    }

    pub fn threads(&self, pid: u32) -> Result<RecordBatch, String> {
        let ts = &self.order;
        let i64s = |f: &dyn Fn(&Thread) -> u64| {
            Arc::new(Int64Array::from_iter_values(ts.iter().map(|(_, t)| f(t) as i64))) as ArrayRef
        };
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![pid as i32; ts.len()])),
            Arc::new(Int32Array::from_iter_values(ts.iter().map(|(_, t)| t.tid as i32))),
            Arc::new(Int32Array::from_iter_values(ts.iter().map(|(s, _)| *s as i32))),
            i64s(&|t| t.first),
            i64s(&|t| t.last.max(t.first)),
            i64s(&|t| t.events),
            i64s(&|t| t.allocs),
            i64s(&|t| t.frees),
            i64s(&|t| t.bytes),
        ];
        RecordBatch::try_new(threads_schema(), cols).map_err(|e| e.to_string())
    }

    pub fn samples(&self, pid: u32) -> Result<RecordBatch, String> {
        let s = &self.samples;
        let cols: Vec<ArrayRef> = vec![
            Arc::new(Int32Array::from(vec![pid as i32; s.len()])),
            Arc::new(Int64Array::from_iter_values(s.iter().map(|x| x.0 as i64))),
            Arc::new(StringArray::from_iter_values(s.iter().map(|x| x.1))),
            Arc::new(Int64Array::from_iter_values(s.iter().map(|x| x.2 as i64))),
        ];
        RecordBatch::try_new(samples_schema(), cols).map_err(|e| e.to_string())
    }
}

/// The processes table's one row: the header, where the log is, and how many events it held.
pub fn process(r: &recorder::LogReader, host: &str, log: &str, events: u64) -> Result<RecordBatch, String> {
    let h = &r.header;
    let s = |v: &str| Arc::new(StringArray::from(vec![v.to_string()])) as ArrayRef;
    let i = |v: u64| Arc::new(Int64Array::from(vec![v as i64])) as ArrayRef;
    let cols: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from(vec![h.pid as i32])),
        Arc::new(Int32Array::from(vec![h.ppid as i32])),
        Arc::new(BooleanArray::from(vec![h.forked])),
        s(&h.exe),
        s(&h.cmdline.join(" ")),
        s(&h.backend),
        s(&h.backend_version),
        i(h.page_size),
        i(h.start_unix_ns),
        i(h.start_mono_ns),
        s(&h.clock),
        s(&h.timing),
        s(&h.on_full),
        s(&h.shim_version),
        Arc::new(Int32Array::from(vec![h.window.map(|w| w as i32)])),
        s(host),
        s(log),
        i(events),
        i(r.file_len),
    ];
    RecordBatch::try_new(processes_schema(), cols).map_err(|e| e.to_string())
}
