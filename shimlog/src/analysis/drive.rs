//! Reading the logs: one pass over each, in time order, feeding every event to its
//! process's analysis (and, for several logs read together, to the total's tracker), with a
//! progress bar on stderr when it is a terminal. [`pipelined`] (the reading on a second
//! thread) and [`Progress`] serve `shimlog export`'s own pass too.
use super::classes::SizeTable;
use super::inherit::{self, Inheritance};
use super::process::Analysis;
use super::section::{Issue, ReadReport};
use super::tracker::{Alone, Tracker};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use recorder::reader::Sink;
use recorder::{Event, LogReader};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io::IsTerminal;
use std::sync::mpsc::sync_channel;

/// Events between two progress updates.
const PROGRESS_EVERY: u64 = 1 << 16;
/// How many events ahead of the analysis their live-table slots are prefetched.
const AHEAD: usize = 8;
/// Chunks the reader thread may be ahead by, and their size: larger than on one thread,
/// so that handing one over (and waking the other thread) is rare.
const IN_FLIGHT: usize = 4;
const PIPE_CHUNK: usize = 8192;

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
            ProgressStyle::with_template("{spinner} {bar:30} {bytes}/{total_bytes} {msg} eta {eta}")
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
        columnar_frames: r.frames.iter().filter(|f| f.h.columnar).count() as u64,
        compressed_bytes: r.compressed_bytes(),
        file_bytes: r.file_len,
        issues: r.issues.iter().chain(sorted(decode_issues).iter()).map(|i| Issue::of(i, None)).collect(),
    }
}

/// Decoding's issues by the offset of their frame: the order they were met in depends on
/// which frames were decoded first, which the threads decide.
fn sorted(issues: &[recorder::reader::ReadIssue]) -> Vec<recorder::reader::ReadIssue> {
    use recorder::reader::ReadIssue::*;
    let mut v = issues.to_vec();
    v.sort_by_key(|i| match i {
        Truncated { offset } | CorruptHeader { offset, .. } | CorruptFrame { offset, .. } => *offset,
    });
    v
}

/// One log on its own. With `two` and a second CPU, the log's frames are decompressed and
/// decoded on a pool of threads (recorder::reader::Pool, SHIMLOG_DECODERS of them, by
/// default one per CPU) while the merge of the thread streams and the analysis run on this
/// one; the events, their order and what the reading reports are the same as on one thread.
pub fn one(r: &LogReader, a: &mut Analysis, t: &mut SizeTable, p: &Progress, two: bool) -> ReadReport {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if !two || cpus < 2 {
        return one_inline(r, r.events(), a, t, p);
    }
    // The frames decompressed and decoded on a pool of threads, the merge and the analysis
    // on this one.
    let workers = pool_threads(cpus);
    let pool = recorder::reader::Pool::new(r, workers);
    let pool_cpu = std::sync::atomic::AtomicU64::new(0);
    let read = std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                pool.work();
                pool_cpu.fetch_add(thread_cpu_ns(), std::sync::atomic::Ordering::Relaxed);
            });
        }
        let read = one_inline(r, r.events_pooled(&pool), a, t, p);
        pool.stop();
        read
    });
    if std::env::var_os("SHIMLOG_STAGES").is_some() {
        // The per-stage figures: what the decoding threads took, and what the merge and
        // the analysis took on this one (the part that does not spread over more CPUs).
        let n = a.totals.events.max(1) as f64;
        let (dec, main) = (pool_cpu.into_inner() as f64, thread_cpu_ns() as f64);
        eprintln!("stages: {workers} decoding threads {:.1} ns/event CPU in all; merge and analysis on one thread {:.1} ns/event CPU", dec / n, main / n);
    }
    read
}

/// CPU time of the calling thread so far, in ns.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid timespec to fill; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How many threads decode frames for the merge, on `cpus` CPUs (SHIMLOG_DECODERS sets it,
/// for the benchmarks' per-stage figures).
fn pool_threads(cpus: usize) -> usize {
    std::env::var("SHIMLOG_DECODERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n >= 1)
        .unwrap_or(cpus)
}

/// Runs the reading on a second thread, a chunk at a time and up to IN_FLIGHT chunks ahead
/// of `consume` on this one: `fill` fills a chunk (made by `new_chunk`) from `reader` and says
/// how many events it holds, 0 at the end; `bytes`, how far the reader is, for the progress
/// bar. Returns the reader once it is done.
pub(crate) fn pipelined<S: Send, C: Send>(
    mut reader: S,
    new_chunk: impl Fn() -> C,
    fill: impl Fn(&mut S, &mut C) -> usize + Send,
    bytes: impl Fn(&S) -> u64 + Send,
    mut consume: impl FnMut(&C, usize),
    p: &Progress,
) -> S {
    std::thread::scope(|s| {
        // Full chunks one way, empty ones back: at most IN_FLIGHT chunks exist.
        let (full_tx, full_rx) = sync_channel::<(C, usize, u64)>(IN_FLIGHT);
        let (empty_tx, empty_rx) = sync_channel::<C>(IN_FLIGHT + 1);
        for _ in 0..IN_FLIGHT {
            let _ = empty_tx.send(new_chunk());
        }
        let thread = s.spawn(move || {
            while let Ok(mut chunk) = empty_rx.recv() {
                let len = fill(&mut reader, &mut chunk);
                let at = bytes(&reader);
                if len == 0 || full_tx.send((chunk, len, at)).is_err() {
                    break;
                }
            }
            reader
        });
        let mut n: u64 = 0;
        for (chunk, len, at) in full_rx {
            consume(&chunk, len);
            let _ = empty_tx.send(chunk);
            n += len as u64;
            if n % PROGRESS_EVERY < len as u64 {
                p.set(at, n);
            }
        }
        drop(empty_tx);
        thread.join().expect("reader thread")
    })
}

/// [`one`] on this thread alone: the analysis runs inside the reader's merge loop
/// ([`recorder::reader::Events::drive`]), event by event.
fn one_inline(
    r: &LogReader,
    mut ev: recorder::reader::Events<'_>,
    a: &mut Analysis,
    t: &mut SizeTable,
    p: &Progress,
) -> ReadReport {
    let mut n: u64 = 0;
    let mut ahead = Ahead::new(One { a: &mut *a, t });
    loop {
        let got = ev.drive(PROGRESS_EVERY as usize, &mut ahead);
        n += got as u64;
        p.set(ev.bytes_read, n);
        if got < PROGRESS_EVERY as usize {
            break;
        }
    }
    ahead.flush();
    a.finish();
    read_report(r, &ev)
}

/// What [`Ahead`] feeds: one log's analysis, or several logs' with the total's tracker.
/// `From` says which log an event came from (nothing for one log).
trait Target {
    type From: Copy + Default;
    /// Starts loading what `e` will touch.
    fn prefetch(&self, from: Self::From, e: &Event);
    fn feed(&mut self, from: Self::From, e: &Event);
}

/// One log on its own.
struct One<'x> {
    a: &'x mut Analysis,
    t: &'x mut SizeTable,
}

impl Target for One<'_> {
    type From = ();
    #[inline(always)]
    fn prefetch(&self, _: (), e: &Event) {
        self.a.prefetch(e);
    }
    #[inline(always)]
    fn feed(&mut self, _: (), e: &Event) {
        self.a.feed(e, self.t, &mut Alone);
    }
}

/// Several logs read together: each event goes to its log's analysis, and the tracker
/// follows the total (on the total's clock: log i's time 0 is at `offsets[i]`).
struct Many<'x> {
    an: &'x mut [Analysis],
    t: &'x mut SizeTable,
    tr: &'x mut Tracker,
    offsets: &'x [u64],
    /// Fork children read with their parents, and how many have not inherited yet.
    forks: Vec<inherit::Fork>,
    pending: usize,
}

impl Target for Many<'_> {
    type From = u32;
    #[inline(always)]
    fn prefetch(&self, from: u32, e: &Event) {
        self.an[from as usize].prefetch(e);
    }
    #[inline(always)]
    fn feed(&mut self, from: u32, e: &Event) {
        let i = from as usize;
        if self.pending > 0 {
            let (an, offsets, t) = (&mut *self.an, self.offsets, &*self.t);
            inherit::before_event(&mut self.forks, &mut self.pending, (i, e.ts_ns), |p, c| {
                let parent = &an[p];
                let inh = Inheritance::at_fork(
                    parent.inherit.as_ref(),
                    &parent.heap.live,
                    t,
                    offsets[p],
                    offsets[c],
                );
                an[c].inherit = Some(inh);
            });
        }
        self.tr.cur = i;
        self.tr.offset = self.offsets[i];
        self.an[i].feed(e, self.t, self.tr);
    }
}

/// The last events handed over, so that each is fed AHEAD events after its live-table
/// slots were prefetched (without it, every event waited for its table lines: several
/// logs read together, before they went through here too, took 4 times as long).
struct Ahead<T: Target> {
    ring: [Event; RING],
    from: [T::From; RING],
    n: usize,
    target: T,
}

const RING: usize = 16;
const _: () = assert!(RING.is_power_of_two() && AHEAD < RING);

impl<T: Target> Ahead<T> {
    fn new(target: T) -> Self {
        Ahead { ring: [Event::default(); RING], from: [T::From::default(); RING], n: 0, target }
    }

    #[inline(always)]
    fn push(&mut self, from: T::From, e: &Event) {
        let k = self.n & (RING - 1);
        self.ring[k] = *e;
        self.from[k] = from;
        self.target.prefetch(from, e);
        if self.n >= AHEAD {
            let k = (self.n - AHEAD) & (RING - 1);
            self.target.feed(self.from[k], &self.ring[k]);
        }
        self.n += 1;
    }

    /// Feeds the events still waiting.
    fn flush(&mut self) {
        for i in self.n.saturating_sub(AHEAD)..self.n {
            let k = i & (RING - 1);
            self.target.feed(self.from[k], &self.ring[k]);
        }
        self.n = 0;
    }
}

impl Sink for Ahead<One<'_>> {
    #[inline(always)]
    fn take(&mut self, e: &Event) {
        self.push((), e);
    }
}

/// Several logs' events in one time order, on the total's clock (log i's time 0 lies at
/// `offsets[i]`), with the log each came from. Each log's events are taken a chunk at a
/// time into a buffer of its own, and handed out from there.
struct Merged<'r> {
    evs: Vec<recorder::reader::Events<'r>>,
    bufs: Vec<Vec<Event>>,
    pos: Vec<usize>,
    len: Vec<usize>,
    /// Each log's next event by (time on the total's clock, log): the top is the next one.
    order: BinaryHeap<Reverse<(u64, usize)>>,
    offsets: &'r [u64],
    /// The log of the event handed out last, not yet moved past.
    cur: Option<usize>,
    /// The smallest entry of the other logs while `cur` runs.
    bound: (u64, usize),
    /// Logs whose reading has started: one not started yet is in `order` by the earliest
    /// time its frames can hold, and opened (its first frames decoded, its buffers made)
    /// only when that comes up, so that a week of window logs, one after the other, holds
    /// one window's buffers at a time, not all of them; a log at its end lets its go.
    started: Vec<bool>,
}

/// No entry: after every real one (a log number is never usize::MAX).
const NONE: (u64, usize) = (u64::MAX, usize::MAX);

/// Events a log's buffer takes at a time.
const MERGE_CHUNK: usize = 256;

impl<'r> Merged<'r> {
    fn new(rs: &'r [LogReader], offsets: &'r [u64]) -> Self {
        let mut m = Merged {
            evs: rs.iter().map(|r| r.events()).collect(),
            bufs: vec![vec![Event::default(); MERGE_CHUNK]; rs.len()],
            pos: vec![0; rs.len()],
            len: vec![0; rs.len()],
            order: BinaryHeap::new(),
            offsets,
            cur: None,
            bound: NONE,
            started: vec![false; rs.len()],
        };
        for (i, (r, off)) in rs.iter().zip(offsets).enumerate() {
            let Some(first) = r.frames.iter().map(|f| f.h.first_ticks).min() else { continue };
            let earliest = recorder::format::NsScale::of(&r.header).ns(first).min(u64::MAX - off);
            m.order.push(Reverse((earliest + off, i)));
        }
        m
    }

    /// Starts the log at the top of `order` while it is one not started yet.
    fn start(&mut self) {
        while let Some(&Reverse((_, i))) = self.order.peek() {
            if self.started[i] {
                return;
            }
            self.started[i] = true;
            self.bufs[i] = vec![Event::default(); MERGE_CHUNK];
            self.len[i] = self.evs[i].fill(&mut self.bufs[i]);
            let mut top = self.order.peek_mut().expect("the log's entry");
            if self.len[i] > 0 {
                // Its first event is no earlier than its frames' earliest time.
                *top = Reverse((self.bufs[i][0].ts_ns + self.offsets[i], i));
            } else {
                std::collections::binary_heap::PeekMut::pop(top);
                self.evs[i].release();
                self.bufs[i] = Vec::new();
            }
        }
    }

    #[inline]
    fn next(&mut self) -> Option<(u32, &Event)> {
        if let Some(i) = self.cur.take() {
            self.pos[i] += 1;
            if self.pos[i] == self.len[i] {
                self.len[i] = self.evs[i].fill(&mut self.bufs[i]);
                self.pos[i] = 0;
            }
            let has = self.pos[i] < self.len[i];
            let k = if has { (self.bufs[i][self.pos[i]].ts_ns + self.offsets[i], i) } else { NONE };
            // Still before every other log's next event: out at once (a process's run of
            // calls between two of another's), the heap left as it is until the run ends.
            if has && k < self.bound {
                self.cur = Some(i);
                return Some((i as u32, &self.bufs[i][self.pos[i]]));
            }
            // Its entry is still the heap's top: replaced by its next event's, or removed.
            let mut top = self.order.peek_mut().expect("the last log's entry");
            if has {
                *top = Reverse(k);
            } else {
                std::collections::binary_heap::PeekMut::pop(top);
                self.evs[i].release();
                self.bufs[i] = Vec::new();
            }
        }
        self.start();
        let &Reverse((_, i)) = self.order.peek()?;
        // The second in the heap (a child of the top): where this log's run ends.
        let h = self.order.as_slice();
        self.bound = h[1..h.len().min(3)].iter().map(|r| r.0).min().unwrap_or(NONE);
        self.cur = Some(i);
        Some((i as u32, &self.bufs[i][self.pos[i]]))
    }

    fn bytes_read(&self) -> u64 {
        self.evs.iter().map(|e| e.bytes_read).sum()
    }
}

/// Several logs read together in one time order. `offsets[i]`: where log i's time 0 lies on
/// the total's clock. With `two` and a second CPU, as for one log, the reading (and the
/// merge of the logs) runs on a thread of its own a few chunks ahead of the analysis.
pub fn many(
    rs: &[LogReader],
    offsets: &[u64],
    an: &mut [Analysis],
    t: &mut SizeTable,
    tr: &mut Tracker,
    p: &Progress,
    two: bool,
) -> Vec<ReadReport> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let forks = inherit::forks(rs);
    let pending = forks.len();
    let mut ahead = Ahead::new(Many { an: &mut *an, t, tr: &mut *tr, offsets, forks, pending });
    let mut m = Merged::new(rs, offsets);
    let mut n: u64 = 0;
    let m = if two && cpus >= 2 {
        pipelined(
            m,
            || (vec![Event::default(); PIPE_CHUNK], vec![0u32; PIPE_CHUNK]),
            |m, (evs, from)| {
                let mut len = 0;
                while len < PIPE_CHUNK {
                    let Some((i, e)) = m.next() else { break };
                    (evs[len], from[len]) = (*e, i);
                    len += 1;
                }
                len
            },
            |m| m.bytes_read(),
            |(evs, from), len| {
                for (e, &i) in evs[..len].iter().zip(&from[..len]) {
                    ahead.push(i, e);
                }
            },
            p,
        )
    } else {
        while let Some((i, e)) = m.next() {
            ahead.push(i, e);
            n += 1;
            if n.is_multiple_of(PROGRESS_EVERY) {
                p.set(m.bytes_read(), n);
            }
        }
        m
    };
    ahead.flush();
    for a in an.iter_mut() {
        a.finish();
    }
    tr.finish();
    rs.iter().zip(&m.evs).map(|(r, e)| read_report(r, e)).collect()
}
