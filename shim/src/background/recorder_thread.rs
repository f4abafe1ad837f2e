//! The recorder thread: compresses every full buffer into one frame and writes it, and on
//! each tick (every 500 µs while the program calls the allocator, less often while it does
//! not: pace.rs) does the housekeeping no hooked thread should pay for: the slow-call
//! watchdog, reaping exited threads, RSS samples (every 100 ms) and clock pairs (every
//! second). At its start it starts the thread that recovers dead processes' in-flight files
//! (reclaim.rs).
use super::control::{Control, Request};
use super::logfile::LogFile;
use super::pace::{self, Pace};
use super::packing::Packing;
use super::window::{self, Action, Schedule};
use super::{reclaim, watch};
use crate::shared::{self, say, G};
use crate::state;
use crate::thread::tls;
use crate::thread::{halt_all, QUIESCE, REGISTRY};
use core::sync::atomic::Ordering::*;
use recorder::format::TICK_SHIFT;
use recorder::ownfd::OwnFd;
use recorder::window_event::{
    DELETED, END_DEMAND, END_EXIT, END_LIMIT, END_SIGNAL, END_WRITE_ERROR, LIMIT_STOP, START_DEMAND,
    START_SIGNAL,
};
use recorder::{clock, Op};
use std::os::fd::IntoRawFd;

/// Starts the recorder with a raw pthread (shared::spawn_detached).
pub fn start() {
    // Running from now on, as far as the final flush is concerned: it must wait for a
    // recorder that has not been scheduled yet.
    shared::RECORDER_RUNNING.store(true, Release);
    if !shared::spawn_detached(entry) {
        shared::RECORDER_RUNNING.store(false, Release);
        say("shim: cannot start the recorder thread; the program runs without recording");
        halt_all();
    }
}

extern "C" fn entry(_: *mut libc::c_void) -> *mut libc::c_void {
    // Everything this thread does (zstd, writes, our own Vecs) passes straight through.
    tls::get().busy = 1;
    // Not forked while this thread works (thread::QUIESCE): it allocates through the backend,
    // whose locks a child would inherit held. Released between rounds, and at the end.
    QUIESCE.relock();
    run();
    QUIESCE.unlock();
    shared::RECORDER_DONE.store(true, Release);
    core::ptr::null_mut()
}

/// The program's resident set: the process's (`/proc/self/statm`) less the shim's own
/// buffers (their in-flight pages and heap buffers, `Pool::own_bytes`), which grow when the
/// recorder falls behind and would otherwise show as the program's memory (docs/recording.md).
fn rss_bytes(statm: &OwnFd) -> Option<u64> {
    let all = process_rss(statm)?;
    Some(all.saturating_sub(G.get().pool.own_bytes()))
}

fn process_rss(statm: &OwnFd) -> Option<u64> {
    let mut b = [0u8; 128];
    // SAFETY: pread into a local buffer of its length, on the descriptor checked ours.
    let n = statm.with(|fd| Ok(unsafe { libc::pread(fd, b.as_mut_ptr().cast(), b.len(), 0) })).ok()?;
    let s = core::str::from_utf8(b.get(..usize::try_from(n).ok()?)?).ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * shared::page_size() as u64)
}

/// With capture windows: the schedule, the window open now, and the watch log's pace.
struct Windowed {
    sched: Schedule,
    open: Option<window::Open>,
    notes: Vec<watch::Note>,
    last_sample: u64,
    last_flush: u64,
    /// Closed windows' logs still on disk, oldest first (for SHIM_LOG_FULL=rotate), and
    /// their bytes.
    closed: std::collections::VecDeque<(u32, String, u64)>,
    closed_bytes: u64,
    /// SHIM_LOG_LIMIT reached with SHIM_LOG_FULL=stop: no more windows, no more samples.
    limit_hit: bool,
    /// SHIM_CONTROL=1, and when it was last polled (CLOCK_MONOTONIC ns).
    control: Option<Control>,
    last_poll: u64,
}

impl Windowed {
    fn close(&mut self, why: u64, main: &mut LogFile, keep: bool) {
        if let Some(o) = self.open.take() {
            let n = o.number;
            let (path, bytes) = window::close(o, why, main, keep);
            self.closed.push_back((n, path, bytes));
            self.closed_bytes += bytes;
        }
    }

    /// How long until the schedule opens or closes a window, or the control socket is due
    /// (CLOCK_MONOTONIC ns from `mono`).
    fn next_due(&self, mono: u64) -> u64 {
        let next = if self.open.is_some() { self.sched.ends_at() } else { self.sched.next_start() };
        let due = next.map_or(u64::MAX, |t| t.saturating_sub(mono));
        if self.control.is_some() {
            due.min(20_000_000)
        } else {
            due
        }
    }

    /// Every log of the process together, in bytes.
    fn total(&self, main: &LogFile) -> u64 {
        main.bytes() + self.closed_bytes + self.open.as_ref().map_or(0, |o| o.file.bytes())
    }

    /// SHIM_LOG_LIMIT: checked after every write, so exceeded by at most one frame.
    /// `rotate`: the oldest closed window's log goes; when none is left, the open window
    /// closes (its log is the next to go). `stop`: the window closes and no other opens.
    fn enforce_limit(&mut self, main: &mut LogFile) {
        let g = G.get();
        if self.limit_hit || self.total(main) < g.log_limit {
            return;
        }
        if g.rotate {
            while self.total(main) >= g.log_limit {
                let Some((n, path, bytes)) = self.closed.pop_front() else { break };
                if let Ok(c) = std::ffi::CString::new(path) {
                    unsafe { libc::unlink(c.as_ptr()) };
                }
                self.closed_bytes -= bytes;
                main.note_full(Op::Window, clock::now(), n as u64, DELETED, None);
            }
            if self.total(main) >= g.log_limit {
                self.sched.closed_early();
                self.close(END_LIMIT, main, false);
            }
        } else {
            self.sched.closed_early();
            self.close(END_LIMIT, main, false);
            self.limit_hit = true;
            main.note_full(Op::Window, clock::now(), 0, LIMIT_STOP, None);
            main.flush_own();
        }
    }
}

/// The log the threads' buffers go to now: the only one without windows, the open
/// window's with them (None between windows: buffers are discarded).
fn target<'a>(main: &'a mut LogFile, win: &'a mut Option<Windowed>) -> Option<&'a mut LogFile> {
    match win {
        None => Some(main),
        Some(w) => w.open.as_mut().map(|o| &mut o.file),
    }
}

fn run() {
    let g = G.get();
    let Some(mut main) =
        LogFile::new(g.fd.clone(), g.log_path.clone(), g.header_reserved, g.windows.map(|_| 0), g.zstd_level)
    else {
        halt_all();
        return;
    };
    // Other processes' dead in-flight files, on a thread of their own (reclaim.rs).
    reclaim::start();
    let mut win = g.windows.map(|cfg| Windowed {
        sched: Schedule::new(cfg, g.p0.mono_ns),
        open: None,
        notes: Vec::new(),
        last_sample: 0,
        last_flush: 0,
        closed: Default::default(),
        closed_bytes: 0,
        limit_hit: false,
        control: if g.control { Control::open() } else { None },
        last_poll: 0,
    });
    // The tick rate is measured against CLOCK_MONOTONIC over the first 20 ms (a fork child
    // keeps its parent's). Frames carry raw ticks, so draining starts at once: only the
    // header waits for the rate.
    let known = f64::from_bits(shared::TPS_BITS.load(Relaxed));
    let mut tps = 0.0;
    if known > 0.0 {
        tps = known;
        calibrated(&mut main, &mut win, tps);
    }
    // One of the shim's own descriptors (recorder::ownfd): never a read of, nor a close of,
    // a number the program reused.
    let statm = std::fs::File::open("/proc/self/statm")
        .ok()
        .and_then(|f| OwnFd::adopt(f.into_raw_fd(), "/proc/self/statm", libc::O_RDONLY).ok());
    let (mut last_rss, mut last_clock, mut last_take) = (0u64, 0u64, 0u64);
    let mut packing = Packing::new(g.pack, clock::mono_ns());
    let mut pace = Pace::new();
    loop {
        let shutdown = shared::SHUTDOWN.load(Acquire);
        let mut drained = 0;
        while let Some(b) = g.pool.next_full() {
            drained += 1;
            let ok = match target(&mut main, &mut win) {
                Some(f) => {
                    // Rows or columns, as SHIM_PACK, the idle cores and the full buffers
                    // waiting say (packing/); looked at here as well as each tick, since
                    // a recorder that is behind may drain for a long while between ticks.
                    packing.tick(clock::mono_ns());
                    f.hurry(packing.rows(g.pool.pending()));
                    f.write(unsafe { &*b })
                }
                None => true,
            };
            g.pool.give_back(b);
            if !ok {
                write_failed(&mut main, &mut win);
            }
            if let Some(w) = win.as_mut() {
                w.enforce_limit(&mut main);
            }
        }
        let now = clock::now();
        if let Some(f) = g.pool.inflight() {
            // Recovery's clock rate, should the process die before the header has one.
            f.note_clock(now, clock::mono_ns());
        }
        if tps == 0.0 {
            let p = clock::pair();
            if p.mono_ns.saturating_sub(g.p0.mono_ns) >= 20_000_000 || shutdown {
                // Cut short when the program is already exiting: its timestamps span
                // little time, so the error stays small.
                tps = clock::rate(g.p0, p);
                shared::TPS_BITS.store(tps.to_bits(), Relaxed);
                calibrated(&mut main, &mut win, tps);
            }
        }
        let (ticks_100ms, ticks_1s) =
            if tps > 0.0 { ((tps / 10.0) as u64, tps as u64) } else { (u64::MAX, u64::MAX) };
        let stall = if tps > 0.0 { (g.stall_ns as f64 * tps / 1e9) as u64 } else { u64::MAX };
        let slack = if tps > 0.0 { (pace::TICK_NS as f64 * tps / 1e9) as u64 } else { 0 };
        let seen = watch::housekeeping(now, stall, slack, win.as_mut().map(|w| &mut w.notes));
        pace.observe(drained > 0, seen, clock::mono_ns());
        if state::writing() && now.wrapping_sub(last_take) >= ticks_1s / 4 {
            last_take = now;
            take_idle_buffers(now, ticks_1s);
        }
        if now.wrapping_sub(last_rss) >= ticks_100ms {
            last_rss = now;
            packing.tick(clock::mono_ns());
            if let (Some(rss), Some(f)) = (statm.as_ref().and_then(rss_bytes), target(&mut main, &mut win)) {
                f.note(Op::Rss, now, rss);
            }
        }
        if now.wrapping_sub(last_clock) >= ticks_1s {
            last_clock = now;
            if let Some(f) = g.pool.inflight() {
                // Its lock again, should a raw close by the program have taken it.
                f.keep_alive();
            }
            crate::patch::later::check();
            let p = clock::pair();
            if win.as_ref().is_some_and(|w| !w.limit_hit) {
                // The watch log gets a clock pair of its own (written every 10 s).
                main.note(Op::Clock, p.ticks, p.mono_ns);
            }
            if let Some(f) = target(&mut main, &mut win) {
                f.note(Op::Clock, p.ticks, p.mono_ns);
                if !f.flush_own() {
                    write_failed(&mut main, &mut win);
                }
            }
        }
        if let Some(w) = win.as_mut() {
            if !shutdown {
                watch_tick(w, &mut main, now, ticks_1s, statm.as_ref().and_then(rss_bytes));
            }
        }
        if shutdown && g.pool.pending() == 0 {
            break;
        }
        // A fork waits for this thread to be between two rounds (thread::QUIESCE).
        QUIESCE.unlock();
        if drained == 0 {
            // A doze lasts until the next RSS sample at most, or the next window's start or
            // end, or 20 ms with a control socket (its requests are answered from here).
            let doze = if tps > 0.0 {
                let due = ticks_100ms.saturating_sub(clock::now().wrapping_sub(last_rss));
                (due as f64 * 1e9 / tps) as u64
            } else {
                0
            };
            let doze = win.as_ref().map_or(doze, |w| doze.min(w.next_due(clock::mono_ns())));
            pace.rest(doze, || g.pool.pending() > 0 || shared::SHUTDOWN.load(Acquire));
        }
        QUIESCE.relock();
    }
    let now = clock::now();
    let rss = statm.as_ref().and_then(rss_bytes);
    if let Some(mut w) = win.take() {
        w.close(END_EXIT, &mut main, true);
        watch::write_notes(&mut main, now, &mut w.notes);
        removed_notes(&mut main, now);
    }
    let untraced = shared::UNTRACED.load(Relaxed);
    if untraced > 0 {
        main.note(Op::Untraced, now, untraced);
    }
    if let Some(rss) = rss {
        main.note(Op::Rss, now, rss);
    }
    let exit = shared::EXIT.load(Relaxed);
    if exit != 0 {
        main.note_full(Op::Exit, now, (exit >> 32) & 0x7fff_ffff, exit & 0xff, None);
    }
    main.note(Op::End, now, clock::to_log(shared::CUT_TICKS.load(Relaxed)));
    main.flush_own();
}

/// The tick rate is known: the headers get it, and threads their one-second flush.
fn calibrated(main: &mut LogFile, win: &mut Option<Windowed>, tps: f64) {
    // One second, in the log's ticks (what buffers' first_ticks count in).
    shared::FLUSH_TICKS.store((tps as u64) >> TICK_SHIFT, Relaxed);
    if !main.calibrated(tps) && win.is_none() {
        halt_all();
    }
    if let Some(o) = win.as_mut().and_then(|w| w.open.as_mut()) {
        o.file.calibrated(tps);
    }
}

/// A write to the log of the threads' buffers failed: without windows recording stops
/// (as it always did); with them the window closes and the program is watched.
fn write_failed(main: &mut LogFile, win: &mut Option<Windowed>) {
    match win {
        None => {
            halt_all();
        }
        Some(w) => {
            w.sched.closed_early();
            w.close(END_WRITE_ERROR, main, true);
        }
    }
}

/// With windows, once per tick: the schedule's transitions, the watch notes, and each
/// second the RSS and allocator statistics (the watch log written every 10 s).
fn watch_tick(w: &mut Windowed, main: &mut LogFile, now: u64, ticks_1s: u64, rss: Option<u64>) {
    let mono = clock::mono_ns();
    if mono.saturating_sub(w.last_poll) >= 20_000_000 {
        w.last_poll = mono;
        if let Some(c) = w.control.take() {
            c.poll(|r| serve(w, main, mono, r));
            w.control = Some(c);
        }
    }
    if shared::SIGNALS.swap(0, Relaxed) % 2 == 1 {
        // SHIM_SIGNAL: a window opens (for SHIM_WINDOW, or until the next signal) or closes.
        if w.open.is_some() {
            w.sched.closed_early();
            w.close(END_SIGNAL, main, true);
        } else if !w.limit_hit {
            let len = w.sched.length();
            if let Some(Action::Start { number, why }) = w.sched.demand(mono, false, len, START_SIGNAL) {
                w.open = window::open(number, why, main);
            }
        }
    }
    match w.sched.poll(mono, w.open.is_some()) {
        Action::Start { .. } if w.limit_hit => {}
        Action::Start { number, why } => w.open = window::open(number, why, main),
        Action::End { why } => w.close(why, main, true),
        Action::None => {}
    }
    if w.limit_hit {
        // Over the limit: the watch log gets nothing more but its end.
        w.notes.clear();
        return;
    }
    watch::write_notes(main, now, &mut w.notes);
    removed_notes(main, now);
    if now.wrapping_sub(w.last_sample) >= ticks_1s {
        w.last_sample = now;
        watch::sample(main, now, rss);
    }
    if now.wrapping_sub(w.last_flush) >= ticks_1s.saturating_mul(10) {
        w.last_flush = now;
        main.flush_own();
    }
}

/// Dead processes' in-flight files this process removed unrecovered (reclaim.rs): one
/// record each in the watch log.
fn removed_notes(main: &mut LogFile, now: u64) {
    reclaim::take_removed(|why, pid| {
        main.note_full(Op::Window, now, pid as u64, why, None);
    });
}

/// A thread that stopped allocating keeps its partial buffer; so that a crash or SIGKILL
/// still leaves its events in the log, the recorder takes any buffer whose first record is
/// over a second old. Handshake: TAKE is stored to the thread's `halt`, membarrier, then
/// `in_call` is read: 0 means the thread is outside the hooks and, entering, will see TAKE
/// and wait; otherwise it is busy (and will hand the buffer over itself soon).
fn take_idle_buffers(now: u64, age: u64) {
    use crate::thread::{RUN, TAKE};
    if state::stopping() {
        return;
    }
    let g = G.get();
    REGISTRY.lock();
    let mut marked = 0;
    REGISTRY.for_each_locked(|st| {
        if st.closed.load(Acquire) || st.buf.is_null() {
            return;
        }
        let b = unsafe { &*st.buf };
        let (n, first) =
            unsafe { (core::ptr::read_volatile(&b.n), core::ptr::read_volatile(&b.first_ticks)) };
        if n > st.meta
            && (now >> TICK_SHIFT).wrapping_sub(first) > age >> TICK_SHIFT
            && !st.closed.load(Acquire)
            && st.in_call.load(Relaxed) == 0
            && st.halt.compare_exchange(RUN, TAKE, SeqCst, Relaxed).is_ok()
        {
            marked += 1;
        }
    });
    if marked > 0 {
        shared::membarrier();
        REGISTRY.for_each_locked(|st| {
            if st.halt.load(SeqCst) != TAKE {
                return;
            }
            if st.in_call.load(SeqCst) == 0 {
                if let Some(next) = g.pool.take_empty(st.stream, true) {
                    g.pool.send_full(st.buf);
                    st.handed_over(next);
                }
            }
            let _ = st.halt.compare_exchange(TAKE, RUN, SeqCst, Relaxed);
        });
    }
    REGISTRY.unlock();
}

/// A control request (`shimlog ctl`), answered in one line.
fn serve(w: &mut Windowed, main: &mut LogFile, mono: u64, r: Request) -> String {
    let secs = |ns: u64| format!("{:.1}s", ns as f64 / 1e9);
    match r {
        Request::Start(_) if w.limit_hit => "error: the log limit was reached; no more windows".into(),
        Request::Start(len) => match w.sched.demand(mono, w.open.is_some(), len, START_DEMAND) {
            None => format!("error: window {} is recording already", w.open.as_ref().map_or(0, |o| o.number)),
            Some(Action::Start { number, why }) => {
                w.open = window::open(number, why, main);
                match &w.open {
                    Some(o) if len == u64::MAX => {
                        format!("recording window {} until stopped: {}", o.number, o.file.path)
                    }
                    Some(o) => format!("recording window {} for {}: {}", o.number, secs(len), o.file.path),
                    None => "error: the window's log could not be created".into(),
                }
            }
            Some(_) => "error: no window".into(),
        },
        Request::Stop => match w.open.as_ref().map(|o| o.number) {
            None => "error: not recording".into(),
            Some(n) => {
                w.sched.closed_early();
                w.close(END_DEMAND, main, true);
                format!("stopped window {n}; watching")
            }
        },
        Request::Status => {
            let state = match &w.open {
                Some(o) => match w.sched.ends_at() {
                    Some(e) => {
                        format!("recording window {} ({} left)", o.number, secs(e.saturating_sub(mono)))
                    }
                    None => format!("recording window {} (until stopped)", o.number),
                },
                None if w.limit_hit => "watching (log limit reached)".into(),
                None => match w.sched.next_start() {
                    Some(s) => format!("watching (next window in {})", secs(s.saturating_sub(mono))),
                    None => "watching".into(),
                },
            };
            format!(
                "{state}; {} windows so far; logs {} bytes; watch log {}",
                w.sched.number,
                w.total(main),
                main.path
            )
        }
    }
}
