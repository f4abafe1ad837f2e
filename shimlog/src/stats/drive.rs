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
/// How far ahead of the analysis the reader runs (a power of two).
const AHEAD: usize = 8;

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
    // Events are read AHEAD of the one analysed, so that the live-table slot each will
    // touch is already on its way to the cache when its turn comes. The slot just analysed
    // takes the next event read.
    let mut ring = [Event::default(); AHEAD];
    let mut len = 0usize;
    while len < AHEAD {
        match ev.next() {
            Some(e) => {
                a.prefetch(&e);
                ring[len] = e;
                len += 1;
            }
            None => break,
        }
    }
    let mut head = 0usize;
    let mut ended = len < AHEAD;
    while len > 0 {
        a.feed(&ring[head], t, &mut Alone);
        n += 1;
        if n.is_multiple_of(PROGRESS_EVERY) {
            p.set(ev.bytes_read, n);
        }
        if !ended {
            if let Some(e) = ev.next() {
                a.prefetch(&e);
                ring[head] = e;
                head = (head + 1) % AHEAD;
                continue;
            }
            ended = true;
        }
        head = (head + 1) % AHEAD;
        len -= 1;
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
