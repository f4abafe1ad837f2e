//! Reading the logs: one pass over each, in time order, feeding every event to its
//! process's analysis (and, for several logs read together, to the total's tracker), with a
//! progress bar on stderr when it is a terminal.
use super::analysis::Analysis;
use super::classes::SizeTable;
use super::section::{Issue, ReadReport};
use super::total::{Alone, Tracker};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use recorder::{Event, LogReader};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::IsTerminal;

/// Events between two progress updates.
const PROGRESS_EVERY: u64 = 1 << 16;
/// How many events ahead of the analysis their live-table slots are prefetched.
const AHEAD: usize = 8;
/// Events taken from the reader at a time.
const CHUNK: usize = 1024;

pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar over `total` compressed bytes, shown only when stderr is a terminal.
    pub fn new(total: u64) -> Progress {
        if !std::io::stderr().is_terminal() {
            return Progress { bar: None };
        }
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} {bar:30} {bytes}/{total_bytes} {msg} eta {eta}",
            )
            .expect("progress template")
            .progress_chars("=> "),
        );
        Progress { bar: Some(bar) }
    }

    #[inline]
    fn set(&self, pos: u64, events: u64) {
        if let Some(b) = &self.bar {
            b.set_position(pos);
            b.set_message(format!("{}M events", events / 1_000_000));
        }
    }

    pub fn done(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// How a log read: its issues (index and decode) and whether it ended cleanly.
pub fn read_report(r: &LogReader, ev: &recorder::reader::Events<'_>) -> ReadReport {
    let (decode_issues, clean_end) = (&ev.issues, ev.clean_end);
    ReadReport {
        clean_end,
        calls_after_cut: ev.after_cut,
        frames: r.frames.len() as u64,
        compressed_bytes: r.compressed_bytes(),
        file_bytes: r.file_len,
        issues: r
            .issues
            .iter()
            .chain(decode_issues)
            .map(|i| Issue::of(i, None))
            .collect(),
    }
}

/// One log on its own.
pub fn one(r: &LogReader, a: &mut Analysis, t: &mut SizeTable, p: &Progress) -> ReadReport {
    let mut ev = r.events();
    let mut n: u64 = 0;
    // Events come from the reader a chunk at a time. The live-table slot an event will touch
    // is prefetched AHEAD events before its turn, so that it is in cache when it comes.
    let mut chunk = vec![Event::default(); CHUNK];
    loop {
        let len = ev.fill(&mut chunk);
        if len == 0 {
            break;
        }
        let c = &chunk[..len];
        for e in c.iter().take(AHEAD) {
            a.prefetch(e);
        }
        for i in 0..len {
            if let Some(e) = c.get(i + AHEAD) {
                a.prefetch(e);
            }
            a.feed(&c[i], t, &mut Alone);
        }
        n += len as u64;
        if n % PROGRESS_EVERY < len as u64 {
            p.set(ev.bytes_read, n);
        }
    }
    a.finish();
    read_report(r, &ev)
}

/// Several logs read together in one time order. `offsets[i]`: where log i's time 0 lies on
/// the total's clock.
pub fn many(
    rs: &[LogReader],
    offsets: &[u64],
    an: &mut [Analysis],
    t: &mut SizeTable,
    tr: &mut Tracker,
    p: &Progress,
) -> Vec<ReadReport> {
    let mut evs: Vec<_> = rs.iter().map(|r| r.events()).collect();
    let mut next: Vec<Option<Event>> = evs.iter_mut().map(|e| e.next()).collect();
    let mut order: BinaryHeap<Reverse<(u64, usize)>> = next
        .iter()
        .enumerate()
        .filter_map(|(i, e)| e.as_ref().map(|e| Reverse((e.ts_ns + offsets[i], i))))
        .collect();
    let mut n: u64 = 0;
    while let Some(Reverse((_, i))) = order.pop() {
        let e = next[i].take().expect("queued event");
        tr.cur = i;
        tr.offset = offsets[i];
        an[i].feed(&e, t, tr);
        next[i] = evs[i].next();
        if let Some(e) = &next[i] {
            order.push(Reverse((e.ts_ns + offsets[i], i)));
        }
        n += 1;
        if n.is_multiple_of(PROGRESS_EVERY) {
            p.set(evs.iter().map(|e| e.bytes_read).sum(), n);
        }
    }
    for a in an.iter_mut() {
        a.finish();
    }
    tr.finish();
    rs.iter()
        .zip(&evs)
        .map(|(r, e)| read_report(r, e))
        .collect()
}
