//! What the watch log gets while the program runs, windows or not: the watchdog's stalls
//! (calls inside the allocator for over SHIM_STALL), threads starting and ending, forks,
//! and each second the RSS and the allocator's own statistics. All of it is found by the
//! recorder thread on its ticks: the hooked calls only mark themselves in `in_call`.
use super::logfile::LogFile;
use super::pace::Seen;
use crate::shared::{self, G};
use crate::state;
use crate::thread::{REGISTRY, WATCHED};
use core::sync::atomic::Ordering::*;
use recorder::Op;

/// A watch record found while walking the threads.
pub enum Note {
    /// A call seen inside the allocator for at least `ticks` (clock ticks).
    Stall { tid: u32, op: u64, ticks: u64 },
    /// `what`: 0 a thread started, 1 it ended.
    Thread { what: u64, tid: u32 },
}

/// The watchdog, on every tick of the recorder: a call seen inside the same hook on two
/// ticks in a row is marked slow (so its record carries a backend time even when
/// unsampled), and followed until it returns; one that lasted over `stall` ticks (give or
/// take the tick, `slack`) is a stall. Also reaps exited threads. With `notes`, threads
/// starting and ending are noted as well (windows: the watch log lists them). Returns what
/// it saw of the threads' calls, for the recorder's pace (pace.rs).
pub fn housekeeping(now: u64, stall: u64, slack: u64, mut notes: Option<&mut Vec<Note>>) -> Seen {
    let stopping = state::stopping();
    let mut seen = Seen::default();
    REGISTRY.for_each(|st| {
        if let Some(n) = notes.as_deref_mut() {
            if !st.seen {
                st.seen = true;
                n.push(Note::Thread { what: 0, tid: st.tid });
            }
        }
        let v = st.in_call.load(Relaxed);
        seen.add(st.calls.load(Relaxed), v);
        if v != 0 && v == st.wd_call {
            if v & WATCHED == 0 && st.slow_call.load(Relaxed) != v {
                st.slow_since.store(st.wd_at, Relaxed);
                st.slow_call.store(v, Release);
            }
            st.wd_stall = v;
            st.wd_last = now;
        } else {
            // A watched call only: a recorded one carries its time in its own record (and
            // its time includes the recording's, a wait for a free buffer too).
            if st.wd_stall & WATCHED != 0 {
                let ticks = st.wd_last.saturating_sub(st.wd_at);
                if ticks + slack >= stall {
                    if let Some(n) = notes.as_deref_mut() {
                        n.push(Note::Stall { tid: st.tid, op: st.wd_stall & 63, ticks });
                    }
                }
            }
            st.wd_stall = 0;
            st.wd_call = v;
            st.wd_at = now;
        }
        // Reap a thread whose destructor ran and whose last buffer is handed over.
        let keep = stopping || !(st.dead.load(Acquire) && st.closed.load(Acquire));
        if !keep {
            if let Some(n) = notes.as_deref_mut() {
                n.push(Note::Thread { what: 1, tid: st.tid });
            }
        }
        keep
    });
    seen
}

/// Writes the notes to the watch log.
pub fn write_notes(main: &mut LogFile, now: u64, notes: &mut Vec<Note>) {
    for n in notes.drain(..) {
        match n {
            Note::Stall { tid, op, ticks } => main.note_full(Op::Stall, now, op, tid as u64, Some(ticks)),
            Note::Thread { what, tid } => main.note_full(Op::ThreadSeen, now, what, tid as u64, None),
        };
    }
    let forks = shared::FORKS.swap(0, Relaxed);
    for _ in 0..forks {
        main.note_full(Op::ThreadSeen, now, 2, 0, None);
    }
}

/// The second's sample: RSS and the allocator's own statistics (jemalloc's after an epoch
/// refresh, mimalloc's process info, glibc's mallinfo2).
pub fn sample(main: &mut LogFile, now: u64, rss: Option<u64>) {
    if let Some(rss) = rss {
        main.note(Op::Rss, now, rss);
    }
    for (name, v) in shim_backend::stats::allocator_stats(G.get().backend) {
        main.note_full(Op::AllocStat, now, recorder::alloc_stat_code(name), v, None);
    }
}
