//! The recorder thread: compresses every full buffer into one frame and writes it, and every
//! ~500 µs does the housekeeping no hooked thread should pay for: the slow-call watchdog,
//! reaping exited threads, RSS samples (every 100 ms) and clock pairs (every second).
use crate::shared::{self, say, G};
use crate::thread::halt_all;
use crate::thread::REGISTRY;
use crate::tls;
use core::sync::atomic::Ordering::*;
use recorder::buffer::{Args, Buf};
use recorder::format::TICK_SHIFT;
use recorder::writer::LogWriter;
use recorder::{clock, Op};

const TICK_US: u64 = 500;

/// Starts the recorder with a raw pthread (std's spawn would register TLS destructors and
/// allocate on the new thread before it could mark itself internal).
pub fn start() {
    unsafe {
        let mut th: libc::pthread_t = 0;
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        // Running from now on, as far as the final flush is concerned: it must wait for a
        // recorder that has not been scheduled yet.
        shared::RECORDER_RUNNING.store(true, Release);
        let rc = libc::pthread_create(&mut th, &attr, entry, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        if rc != 0 {
            shared::RECORDER_RUNNING.store(false, Release);
            say("shim: cannot start the recorder thread; the program runs without recording");
            halt_all();
        }
    }
}

extern "C" fn entry(_: *mut libc::c_void) -> *mut libc::c_void {
    // Everything this thread does (zstd, writes, our own Vecs) passes straight through.
    tls::get().busy = 1;
    run();
    shared::RECORDER_DONE.store(true, Release);
    core::ptr::null_mut()
}

/// The tick rate is known: the header gets it, and threads their one-second flush.
fn calibrated(rec: &mut Rec, tps: f64) {
    let g = G.get();
    // One second, in the log's ticks (what buffers' first_ticks count in).
    shared::FLUSH_TICKS.store((tps as u64) >> TICK_SHIFT, Relaxed);
    if rec.failed {
        return;
    }
    if let Err(e) = recorder::writer::rewrite_header(g.fd, &crate::header::build(g, tps), g.header_reserved) {
        say(&format!("shim: writing log {} failed: {e}; recording stopped, the program continues", g.log_path));
        rec.failed = true;
        halt_all();
    }
}

fn rss_bytes(statm: &std::fs::File) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let mut b = [0u8; 128];
    let n = statm.read_at(&mut b, 0).ok()?;
    let s = core::str::from_utf8(&b[..n]).ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * shared::page_size() as u64)
}

struct Rec {
    w: LogWriter,
    own: Box<Buf>,
    failed: bool,
}

impl Rec {
    fn write(&mut self, b: &Buf) {
        if self.failed {
            return;
        }
        if let Err(e) = self.w.write_buf(b) {
            self.failed = true;
            say(&format!(
                "shim: writing log {} failed: {e}; recording stopped, the program continues",
                G.get().log_path
            ));
            halt_all();
        }
    }
    fn note(&mut self, op: Op, ticks: u64, value: u64) {
        if !self.own.has_room() {
            self.flush_own();
        }
        self.own.push(op, clock::to_log(ticks), &Args { value, ..Args::default() }, None);
    }
    fn flush_own(&mut self) {
        if !self.own.is_empty() {
            let own = core::mem::replace(&mut self.own, Buf::new_boxed(0));
            self.write(&own);
            self.own = own;
            self.own.reset(0);
        }
    }
}

fn run() {
    let g = G.get();
    let Ok(w) = LogWriter::new(g.fd, g.zstd_level) else {
        say("shim: cannot set up zstd; the program runs without recording");
        halt_all();
        return;
    };
    let mut rec = Rec { w, own: Buf::new_boxed(0), failed: false };
    rec.w.note_header(g.header_reserved);
    // The tick rate is measured against CLOCK_MONOTONIC over the first 20 ms (a fork child
    // keeps its parent's). Frames carry raw ticks, so draining starts at once: only the
    // header waits for the rate.
    let known = f64::from_bits(shared::TPS_BITS.load(Relaxed));
    let mut tps = 0.0;
    if known > 0.0 {
        tps = known;
        calibrated(&mut rec, tps);
    }
    let statm = std::fs::File::open("/proc/self/statm").ok();
    let (mut last_rss, mut last_clock, mut last_take) = (0u64, 0u64, 0u64);
    loop {
        let shutdown = shared::SHUTDOWN.load(Acquire);
        let mut drained = 0;
        while let Some(b) = g.pool.next_full() {
            rec.write(unsafe { &*b });
            g.pool.give_back(b);
            drained += 1;
        }
        let now = clock::now();
        if tps == 0.0 {
            let p = clock::pair();
            if p.mono_ns.saturating_sub(g.p0.mono_ns) >= 20_000_000 || shutdown {
                // Cut short when the program is already exiting: its timestamps span
                // little time, so the error stays small.
                tps = clock::rate(g.p0, p);
                shared::TPS_BITS.store(tps.to_bits(), Relaxed);
                calibrated(&mut rec, tps);
            }
        }
        let (ticks_100ms, ticks_1s) = if tps > 0.0 { ((tps / 10.0) as u64, tps as u64) } else { (u64::MAX, u64::MAX) };
        housekeeping(now);
        if now.wrapping_sub(last_take) >= ticks_1s / 4 {
            last_take = now;
            take_idle_buffers(now, ticks_1s);
        }
        if now.wrapping_sub(last_rss) >= ticks_100ms {
            last_rss = now;
            if let Some(rss) = statm.as_ref().and_then(rss_bytes) {
                rec.note(Op::Rss, now, rss);
            }
        }
        if now.wrapping_sub(last_clock) >= ticks_1s {
            last_clock = now;
            let p = clock::pair();
            rec.note(Op::Clock, p.ticks, p.mono_ns);
            rec.flush_own();
        }
        if shutdown && g.pool.pending() == 0 {
            break;
        }
        if drained == 0 {
            std::thread::sleep(std::time::Duration::from_micros(TICK_US));
        }
    }
    let now = clock::now();
    let untraced = shared::UNTRACED.load(Relaxed);
    if untraced > 0 {
        rec.note(Op::Untraced, now, untraced);
    }
    if let Some(rss) = statm.as_ref().and_then(rss_bytes) {
        rec.note(Op::Rss, now, rss);
    }
    rec.note(Op::End, now, clock::to_log(shared::CUT_TICKS.load(Relaxed)));
    rec.flush_own();
}

/// The watchdog (a call seen inside the same hook on two ticks in a row is marked slow, so
/// its record carries a backend time even when unsampled) and reaping of exited threads.
fn housekeeping(now: u64) {
    let stopping = crate::state::stopping();
    REGISTRY.for_each(|st| {
        let v = st.in_call.load(Relaxed);
        if v != 0 && v == st.wd_call {
            if st.slow_call.load(Relaxed) != v {
                st.slow_since.store(st.wd_at, Relaxed);
                st.slow_call.store(v, Release);
            }
        } else {
            st.wd_call = v;
            st.wd_at = now;
        }
        // Reap a thread whose destructor ran and whose last buffer is handed over.
        stopping || !(st.dead.load(Acquire) && st.closed.load(Acquire))
    });
}

/// A thread that stopped allocating keeps its partial buffer; so that a crash or SIGKILL
/// still leaves its events in the log, the recorder takes any buffer whose first record is
/// over a second old. Handshake: TAKE is stored to the thread's `halt`, membarrier, then
/// `in_call` is read: 0 means the thread is outside the hooks and, entering, will see TAKE
/// and wait; otherwise it is busy (and will hand the buffer over itself soon).
fn take_idle_buffers(now: u64, age: u64) {
    use crate::thread::{RUN, TAKE};
    if crate::state::stopping() {
        return;
    }
    let g = G.get();
    REGISTRY.lock();
    let mut marked = 0;
    REGISTRY.for_each_locked(|st| {
        let b = unsafe { &*st.buf };
        let (n, first) = unsafe { (core::ptr::read_volatile(&b.n), core::ptr::read_volatile(&b.first_ticks)) };
        if n > st.meta && (now >> TICK_SHIFT).wrapping_sub(first) > age >> TICK_SHIFT && !st.closed.load(Acquire) && st.in_call.load(Relaxed) == 0
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
