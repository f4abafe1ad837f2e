//! `shimlog dump`: every event, one per line.
use crate::open::open;
use recorder::{Event, Op};
use std::io::{BufWriter, Write};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned columns for people.
    Text,
    /// One JSON object per line.
    Jsonl,
    /// Firefox's logalloc text format (`pid tid func(args)=result`), allocation calls only.
    Logalloc,
    /// No events: one JSON object on the log's frames (from their headers alone: header,
    /// version, frames, records, raw and compressed bytes, columnar frames, threads, clean).
    Frames,
}

#[derive(clap::Args)]
pub struct Args {
    /// The log to read.
    pub log: String,
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

pub fn run(a: Args) -> Result<i32, String> {
    let r = open(&a.log)?;
    if a.format == Format::Frames {
        println!("{}", frames(&r));
        return Ok(0);
    }
    let out = std::io::stdout();
    let mut w = BufWriter::with_capacity(1 << 16, out.lock());
    let pid = r.header.pid;
    let mut events = r.events();
    let mut line = String::with_capacity(256);
    for e in &mut events {
        line.clear();
        match a.format {
            Format::Text => text(&mut line, &e),
            Format::Jsonl => jsonl(&mut line, &e),
            Format::Logalloc => {
                if !logalloc(&mut line, pid, &e) {
                    continue;
                }
            }
            Format::Frames => unreachable!("answered above"),
        }
        line.push('\n');
        if w.write_all(line.as_bytes()).is_err() {
            return Ok(0);
        }
    }
    let _ = w.flush();
    for i in r.issues.iter().chain(events.issues.iter()) {
        eprintln!("shimlog: {}: {i}", a.log);
    }
    Ok(0)
}

/// What the frame index says of a log, without decompressing a frame.
fn frames(r: &recorder::LogReader) -> serde_json::Value {
    let mut streams = std::collections::BTreeMap::new();
    let (mut records, mut raw, mut comp, mut columnar) = (0u64, 0u64, 0u64, 0u64);
    for f in &r.frames {
        records += f.h.n_records as u64;
        raw += f.h.raw_len as u64;
        comp += f.h.comp_len as u64;
        columnar += f.h.columnar as u64;
        if f.h.stream != 0 {
            *streams.entry(f.h.stream).or_insert(0u64) += f.h.n_records as u64;
        }
    }
    serde_json::json!({
        "header": r.header,
        "version": r.version,
        "frames": r.frames.len(),
        "records": records,
        "raw_bytes": raw,
        "comp_bytes": comp,
        "file_bytes": r.file_len,
        "clean": r.issues.is_empty(),
        "columnar_frames": columnar,
        "threads": streams.len(),
        "thread_records": streams.values().sum::<u64>(),
    })
}

fn text(s: &mut String, e: &Event) {
    use std::fmt::Write;
    let _ = write!(s, "{:>14} {:>7} {:<14}", e.ts_ns, e.tid, e.op.name());
    match e.op {
        Op::Free => {
            let _ = write!(s, " ptr=0x{:x}", e.ptr);
        }
        Op::FreeSized => {
            let _ = write!(s, " ptr=0x{:x} size={}", e.ptr, e.size);
        }
        op if op.is_alloc_family() => {
            if op.frees() {
                let _ = write!(s, " old=0x{:x}", e.old);
            }
            if matches!(op, Op::Calloc | Op::Reallocarray) {
                let _ = write!(s, " count={}", e.count());
            }
            if matches!(op, Op::PosixMemalign | Op::AlignedAlloc | Op::Memalign) {
                let _ = write!(s, " align={}", e.align());
            }
            let _ = write!(s, " size={} ptr=0x{:x}", e.size, e.ptr);
            if op == Op::PosixMemalign {
                let _ = write!(s, " ret={}", if e.ptr == 0 { libc::ENOMEM } else { 0 });
            }
        }
        Op::ThreadStart | Op::ThreadExit | Op::Fork | Op::End => {}
        Op::Stall => {
            let call =
                Op::from_u8(e.size as u8).filter(|o| o.is_alloc_family()).map_or("unknown", |o| o.name());
            let _ = write!(s, " call={call} thread={}", e.value());
        }
        Op::AllocStat => {
            let _ = write!(s, " {}={}", recorder::alloc_stat_name(e.size), e.value());
        }
        Op::Window => {
            let _ = write!(s, " window={} {}", e.size, recorder::window_event_name(e.value()));
        }
        Op::ThreadSeen => {
            let what = ["started", "ended", "forked"].get(e.size as usize).copied().unwrap_or("unknown");
            let _ = write!(s, " thread={} {what}", e.value());
        }
        Op::Stack => {
            let _ = write!(s, " stack={} depth={}", e.size, e.value());
        }
        Op::StackPc => {
            let _ = write!(s, " stack={} pc={:#x}", e.size, e.value());
        }
        Op::Site => {
            let _ = write!(s, " stack={} why={}", e.size, e.value());
        }
        Op::Mapping => {
            let _ = write!(s, " start={:#x} end={:#x}", e.size, e.value());
        }
        Op::MappingPath | Op::MappingBuildId => {
            let _ = write!(s, " length={} bytes={:#018x}", e.size, e.value());
        }
        _ => {
            let _ = write!(s, " value={}", e.value());
        }
    }
    if let Some(ns) = e.backend_ns() {
        let _ = write!(s, " backend_ns={ns}");
    }
}

fn jsonl(s: &mut String, e: &Event) {
    use std::fmt::Write;
    let _ = write!(s, "{{\"op\":\"{}\",\"tid\":{},\"ts_ns\":{}", e.op.name(), e.tid, e.ts_ns);
    if e.op.is_alloc_family() {
        let _ = write!(s, ",\"ptr\":{},\"size\":{}", e.ptr, e.size);
        if e.op.frees() && !e.op.is_free() {
            let _ = write!(s, ",\"old\":{}", e.old);
        }
        if matches!(e.op, Op::Calloc | Op::Reallocarray) {
            let _ = write!(s, ",\"count\":{}", e.count());
        }
        if matches!(e.op, Op::PosixMemalign | Op::AlignedAlloc | Op::Memalign) {
            let _ = write!(s, ",\"align\":{}", e.align());
        }
        if e.op == Op::PosixMemalign {
            let _ = write!(s, ",\"ret\":{}", if e.ptr == 0 { libc::ENOMEM } else { 0 });
        }
        if let Some(ns) = e.backend_ns() {
            let _ = write!(s, ",\"backend_ns\":{ns}");
        }
    } else {
        let _ = write!(s, ",\"value\":{}", e.value());
        if matches!(e.op, Op::Stall | Op::AllocStat | Op::Window | Op::ThreadSeen)
            || matches!(
                e.op,
                Op::Stack | Op::StackPc | Op::Site | Op::Mapping | Op::MappingPath | Op::MappingBuildId
            )
        {
            // The watch records' second field: the call's op, the statistic, the window, what
            // the thread did; the call-site records': the stack id, a mapping's start, a
            // length.
            let _ = write!(s, ",\"size\":{}", e.size);
        }
        if let Some(ns) = e.backend_ns() {
            let _ = write!(s, ",\"backend_ns\":{ns}");
        }
    }
    let _ = write!(s, ",\"stream\":{}}}", e.stream);
}

/// Firefox memory/replace/logalloc: `pid tid func(args)=result`, pointers in hex.
fn logalloc(s: &mut String, pid: u32, e: &Event) -> bool {
    use std::fmt::Write;
    let _ = write!(s, "{pid} {} ", e.tid);
    let _ = match e.op {
        Op::Malloc => write!(s, "malloc({})=0x{:x}", e.size, e.ptr),
        Op::Free | Op::FreeSized => write!(s, "free(0x{:x})", e.ptr),
        Op::Calloc => write!(s, "calloc({},{})=0x{:x}", e.count(), e.size, e.ptr),
        Op::Realloc => write!(s, "realloc(0x{:x},{})=0x{:x}", e.old, e.size, e.ptr),
        Op::Reallocarray => {
            write!(s, "realloc(0x{:x},{})=0x{:x}", e.old, e.count().saturating_mul(e.size), e.ptr)
        }
        Op::PosixMemalign | Op::Memalign => {
            write!(s, "memalign({},{})=0x{:x}", e.align(), e.size, e.ptr)
        }
        Op::AlignedAlloc => write!(s, "aligned_alloc({},{})=0x{:x}", e.align(), e.size, e.ptr),
        Op::Valloc => write!(s, "valloc({})=0x{:x}", e.size, e.ptr),
        Op::Pvalloc => write!(s, "memalign(4096,{})=0x{:x}", e.size, e.ptr),
        _ => return false,
    };
    true
}
