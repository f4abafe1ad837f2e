//! Capture windows and the watch log (SHIM_WINDOW...): which window a log is, and what the
//! watch log's timeline says: the windows (start, length, why each ended), the stalls, the
//! allocator's own statistics, the threads seen, gathered from the watch records
//! ([`Watch::take`]) into a [`WatchReport`]. RSS goes to the memory section as usual. The
//! text report prints it in stats/watch.rs.
use recorder::window_event::{INFLIGHT_EMPTY, INFLIGHT_LOG_GONE};
use recorder::{alloc_stat_name, window_event_name, Event, Op};
use serde::Serialize;
use std::collections::BTreeMap;

/// Stalls listed (the slowest).
const STALLS_LISTED: usize = 10;

#[derive(Default, Clone)]
pub struct Watch {
    windows: Vec<WindowRow>,
    stalls: Vec<StallRow>,
    stall_count: u64,
    stats: BTreeMap<&'static str, StatRow>,
    threads_started: u64,
    threads_ended: u64,
    forks: u64,
    notes: Vec<LimitRow>,
    removed: Vec<RemovedRow>,
}

#[derive(Serialize, Clone, Debug)]
pub struct RemovedRow {
    pub at_ns: u64,
    /// The dead process whose in-flight file this process removed without recovering it.
    pub pid: u64,
    pub why: &'static str,
}

#[derive(Serialize, Clone, Debug)]
pub struct LimitRow {
    pub at_ns: u64,
    pub window: u64,
    pub what: &'static str,
}

#[derive(Serialize, Clone, Debug)]
pub struct WindowRow {
    pub number: u64,
    /// ns since the process's reference point (absent: it began before the log did).
    pub start_ns: Option<u64>,
    pub length_ns: Option<u64>,
    pub started: &'static str,
    /// Why it ended (absent: still open when the log ended).
    pub ended: Option<&'static str>,
}

#[derive(Serialize, Clone, Debug)]
pub struct StallRow {
    pub at_ns: u64,
    pub tid: u64,
    /// The call (its record, in a window's log, carries its own time: "in a window").
    pub call: &'static str,
    /// At least this long inside the allocator.
    pub ns: u64,
}

#[derive(Serialize, Clone, Copy, Debug)]
pub struct StatRow {
    pub last: u64,
    pub min: u64,
    pub max: u64,
    pub samples: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct WatchReport {
    /// The header's window: 0 for a watch log, N for window N's log.
    pub window: u32,
    pub windows: Vec<WindowRow>,
    pub stalls: u64,
    pub slowest_stalls: Vec<StallRow>,
    /// The allocator's own statistics over the watch (bytes, page_faults a count).
    pub allocator_stats: BTreeMap<&'static str, StatRow>,
    pub threads_started: u64,
    pub threads_ended: u64,
    pub forks: u64,
    /// Logs deleted by rotation, the limit reached: (ns, window, what).
    pub log_limit: Vec<LimitRow>,
    /// Dead processes' in-flight files this process removed unrecovered (their logs gone).
    pub inflight_removed: Vec<RemovedRow>,
}

impl Watch {
    /// A watch record (any other is ignored).
    pub fn take(&mut self, e: &Event) {
        match e.op {
            Op::Window => {
                let v = e.value();
                if (INFLIGHT_LOG_GONE..=INFLIGHT_EMPTY).contains(&v) {
                    self.removed.push(RemovedRow { at_ns: e.ts_ns, pid: e.size, why: window_event_name(v) });
                } else if v >= 32 {
                    self.notes.push(LimitRow { at_ns: e.ts_ns, window: e.size, what: window_event_name(v) });
                } else if v < 16 {
                    self.windows.push(WindowRow {
                        number: e.size,
                        start_ns: Some(e.ts_ns),
                        length_ns: None,
                        started: window_event_name(v),
                        ended: None,
                    });
                } else {
                    if !self.windows.last().is_some_and(|w| w.number == e.size && w.ended.is_none()) {
                        self.windows.push(WindowRow {
                            number: e.size,
                            start_ns: None,
                            length_ns: None,
                            started: "before the log",
                            ended: None,
                        });
                    }
                    if let Some(w) = self.windows.last_mut() {
                        w.ended = Some(window_event_name(v));
                        w.length_ns = w.start_ns.map(|s| e.ts_ns.saturating_sub(s));
                    }
                }
            }
            Op::Stall => {
                self.stall_count += 1;
                let call = Op::from_u8(e.size as u8)
                    .filter(|o| o.is_alloc_family())
                    .map_or("in a window", |o| o.name());
                let ns = e.backend_ns().unwrap_or(0);
                self.stalls.push(StallRow { at_ns: e.ts_ns, tid: e.value(), call, ns });
                if self.stalls.len() > 4 * STALLS_LISTED {
                    self.trim();
                }
            }
            Op::AllocStat => {
                let v = e.value();
                let r = self.stats.entry(alloc_stat_name(e.size)).or_insert(StatRow {
                    last: v,
                    min: v,
                    max: v,
                    samples: 0,
                });
                r.last = v;
                r.min = r.min.min(v);
                r.max = r.max.max(v);
                r.samples += 1;
            }
            Op::ThreadSeen => match e.size {
                0 => self.threads_started += 1,
                1 => self.threads_ended += 1,
                _ => self.forks += 1,
            },
            _ => {}
        }
    }

    fn trim(&mut self) {
        self.stalls.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.at_ns.cmp(&b.at_ns)));
        self.stalls.truncate(STALLS_LISTED);
    }

    /// The report of a log whose header says `window` (None: a log without windows, and
    /// no report).
    pub fn report(&self, window: Option<u32>) -> Option<WatchReport> {
        let window = window?;
        let mut w = self.clone();
        w.trim();
        Some(WatchReport {
            window,
            windows: w.windows,
            stalls: w.stall_count,
            slowest_stalls: w.stalls,
            allocator_stats: w.stats,
            threads_started: w.threads_started,
            threads_ended: w.threads_ended,
            forks: w.forks,
            log_limit: w.notes,
            inflight_removed: w.removed,
        })
    }
}
