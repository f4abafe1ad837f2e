//! The capture schedule: when the next window starts and when the current one ends
//! (SHIM_WINDOW, SHIM_START, SHIM_EVERY), as the recorder thread asks it on each tick. Pure
//! arithmetic on CLOCK_MONOTONIC nanoseconds: the recorder makes the transitions.
use super::logfile::LogFile;
use crate::config::Windows;
use crate::shared::G;
use crate::{state, thread};
use recorder::window_event::*;
use recorder::{clock, Op};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    /// Open window `number` (the `Op::Window` start code says why).
    Start {
        number: u32,
        why: u64,
    },
    /// Close the current window (the `Op::Window` end code says why).
    End {
        why: u64,
    },
}

pub struct Schedule {
    cfg: Windows,
    /// When the next scheduled window opens (None: no more).
    next_start: Option<u64>,
    /// When the current window closes (None: none open, or open until exit).
    end: Option<u64>,
    /// Windows opened so far (the last one's number).
    pub number: u32,
}

impl Schedule {
    /// The schedule of a process that started at `t0` (ns).
    pub fn new(cfg: Windows, t0: u64) -> Schedule {
        Schedule { cfg, next_start: Some(t0.saturating_add(cfg.start)), end: None, number: 0 }
    }

    /// What to do at `now`, given whether a window is open.
    pub fn poll(&mut self, now: u64, open: bool) -> Action {
        if open {
            if let Some(e) = self.end {
                if now >= e {
                    self.end = None;
                    return Action::End { why: END_LENGTH };
                }
            }
            return Action::None;
        }
        match self.next_start {
            Some(s) if now >= s => {
                self.next_start = self.following(s, now);
                self.open(now, self.cfg.length, START_SCHEDULE)
            }
            _ => Action::None,
        }
    }

    /// The scheduled start after `s`, skipping those already past at `now` (a window that
    /// overran, a recorder that was late).
    fn following(&self, s: u64, now: u64) -> Option<u64> {
        if self.cfg.every == 0 {
            return None;
        }
        let mut n = s.saturating_add(self.cfg.every);
        while n <= now {
            n = n.saturating_add(self.cfg.every);
        }
        Some(n)
    }

    fn open(&mut self, now: u64, length: u64, why: u64) -> Action {
        self.number += 1;
        self.end = (length != u64::MAX).then(|| now.saturating_add(length));
        Action::Start { number: self.number, why }
    }

    /// A window asked for now (control socket, signal), for `length` ns (u64::MAX: until
    /// stopped or exit). None when one is open already.
    pub fn demand(&mut self, now: u64, open: bool, length: u64, why: u64) -> Option<Action> {
        (!open).then(|| self.open(now, length, why))
    }

    /// The current window closes early (on demand, limit, error): no scheduled end pending.
    pub fn closed_early(&mut self) {
        self.end = None;
    }

    /// SHIM_WINDOW (u64::MAX: until exit, or stopped).
    pub fn length(&self) -> u64 {
        self.cfg.length
    }

    /// When the current window ends, if it has an end (for `status`).
    pub fn ends_at(&self) -> Option<u64> {
        self.end
    }

    /// When the next scheduled window opens.
    pub fn next_start(&self) -> Option<u64> {
        self.next_start
    }
}

/// The window open now, as the recorder thread holds it.
pub struct Open {
    pub file: LogFile,
    pub number: u32,
}

/// Opens window `number`: its log, then every thread armed, then the state RECORDING.
/// The watch log says so. None (and the watch log says why) when the log cannot be
/// created or the process is stopping.
pub fn open(number: u32, why: u64, main: &mut LogFile) -> Option<Open> {
    let g = G.get();
    // Anything still queued came from a window whose close could not wait for its thread.
    while let Some(b) = g.pool.next_full() {
        g.pool.give_back(b);
    }
    let Some(file) = LogFile::create(number) else {
        main.note_full(Op::Window, clock::now(), number as u64, END_WRITE_ERROR, None);
        return None;
    };
    // Buffers taken from now on are this window's, and recovery knows where its log is.
    g.pool.log.store(number, core::sync::atomic::Ordering::Relaxed);
    if let Some(f) = g.pool.inflight() {
        f.note_window(number, &file.path);
    }
    thread::arm_window_threads();
    if !state::open_window() {
        return None;
    }
    main.note_full(Op::Window, clock::now(), number as u64, why, None);
    Some(Open { file, number })
}

/// Closes the open window: back to watching, every thread's buffer into the window's log,
/// then its end record. `why`: an `Op::Window` end code. At exit the final flush has
/// halted the threads already. With `keep` false (the log limit), what the threads still
/// held is discarded, counted in the watch log (`untraced`). Returns the log's path and size.
pub fn close(mut w: Open, why: u64, main: &mut LogFile, keep: bool) -> (String, u64) {
    let g = G.get();
    let mut stuck = 0;
    let cut = if state::close_window() {
        let cut = clock::now();
        stuck = thread::close_window_threads(1_000_000_000);
        cut
    } else {
        match crate::shared::CUT_TICKS.load(core::sync::atomic::Ordering::Relaxed) {
            0 => clock::now(),
            c => c,
        }
    };
    let mut discarded = 0u64;
    while let Some(b) = g.pool.next_full() {
        if keep {
            w.file.write(unsafe { &*b });
        } else {
            discarded += unsafe { (*b).n } as u64;
        }
        g.pool.give_back(b);
    }
    let now = clock::now();
    g.pool.log.store(0, core::sync::atomic::Ordering::Relaxed);
    if let Some(f) = g.pool.inflight() {
        f.note_window(0, "");
    }
    if discarded > 0 {
        main.note(Op::Untraced, now, discarded);
    }
    if stuck > 0 {
        crate::shared::say(&format!(
            "shim: {stuck} thread(s) stayed inside the allocator past the close of window {}; their last calls are not in its log",
            w.number
        ));
    }
    w.file.note(Op::End, now, clock::to_log(cut));
    w.file.flush_own();
    main.note_full(Op::Window, now, w.number as u64, why, None);
    let bytes = w.file.bytes();
    (core::mem::take(&mut w.file.path), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    const S: u64 = 1_000_000_000;

    fn run(cfg: Windows, until: u64) -> Vec<(u64, Action)> {
        let mut s = Schedule::new(cfg, 0);
        let mut open = false;
        let mut out = Vec::new();
        let mut t = 0;
        while t <= until {
            let a = s.poll(t, open);
            match a {
                Action::Start { .. } => open = true,
                Action::End { .. } => open = false,
                Action::None => {}
            }
            if a != Action::None {
                out.push((t, a));
            }
            t += S / 10;
        }
        out
    }

    #[test]
    fn window_every() {
        let cfg = Windows { length: S, start: 0, every: 2 * S };
        let got = run(cfg, 5 * S);
        let starts: Vec<u64> =
            got.iter().filter(|(_, a)| matches!(a, Action::Start { .. })).map(|(t, _)| *t).collect();
        let ends: Vec<u64> =
            got.iter().filter(|(_, a)| matches!(a, Action::End { .. })).map(|(t, _)| *t).collect();
        assert_eq!(starts, vec![0, 2 * S, 4 * S]);
        assert_eq!(ends, vec![S, 3 * S, 5 * S]);
    }

    #[test]
    fn start_delay_one_window() {
        let cfg = Windows { length: S, start: 3 * S, every: 0 };
        let got = run(cfg, 10 * S);
        assert_eq!(
            got,
            vec![
                (3 * S, Action::Start { number: 1, why: START_SCHEDULE }),
                (4 * S, Action::End { why: END_LENGTH })
            ]
        );
    }

    #[test]
    fn until_exit() {
        let cfg = Windows { length: u64::MAX, start: S, every: 0 };
        let got = run(cfg, 10 * S);
        assert_eq!(got, vec![(S, Action::Start { number: 1, why: START_SCHEDULE })]);
    }

    #[test]
    fn demand_numbers_follow() {
        let cfg = Windows { length: S, start: 100 * S, every: 0 };
        let mut s = Schedule::new(cfg, 0);
        assert_eq!(
            s.demand(5, false, 2 * S, START_DEMAND),
            Some(Action::Start { number: 1, why: START_DEMAND })
        );
        assert_eq!(s.demand(6, true, 2 * S, START_DEMAND), None);
        assert_eq!(s.poll(2 * S + 5, true), Action::End { why: END_LENGTH });
        assert_eq!(s.poll(100 * S, false), Action::Start { number: 2, why: START_SCHEDULE });
    }
}
