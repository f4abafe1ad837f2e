//! Totals: events, calls and bytes requested per operation, failures, the process records
//! (threads, RSS, forks...), events dropped (when and on which thread) and calls served but
//! not recorded.
use super::threads::Threads;
use recorder::Op;
use serde::Serialize;
use std::collections::BTreeMap;

/// How many drop records the report lists with their time.
pub const DROPS_LISTED: usize = 100;

/// Op codes are 6 bits.
const NOPS: usize = 64;

#[derive(Clone)]
pub struct Totals {
    pub events: u64,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// Indexed by `op as usize`.
    pub calls: [u64; NOPS],
    pub bytes: [u64; NOPS],
    pub failed: [u64; NOPS],
    pub free_null: u64,
    pub dropped: u64,
    pub drop_records: u64,
    pub drops: Vec<DropRecord>,
    pub untraced: u64,
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            events: 0,
            first_ns: None,
            last_ns: 0,
            calls: [0; NOPS],
            bytes: [0; NOPS],
            failed: [0; NOPS],
            free_null: 0,
            dropped: 0,
            drop_records: 0,
            drops: Vec::new(),
            untraced: 0,
        }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct DropRecord {
    /// The drop happened just before this time.
    pub ts_ns: u64,
    pub pid: u32,
    pub tid: u32,
    pub events: u64,
}

impl Totals {
    pub fn drop_record(&mut self, d: DropRecord) {
        self.dropped += d.events;
        self.drop_records += 1;
        if self.drops.len() < DROPS_LISTED {
            self.drops.push(d);
        }
    }

    pub fn duration_ns(&self) -> u64 {
        self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f))
    }

    /// Adds another process's totals, its times shifted by `offset_ns`.
    pub fn merge(&mut self, o: &Totals, offset_ns: u64) {
        self.events += o.events;
        if let Some(f) = o.first_ns {
            let f = f + offset_ns;
            self.first_ns = Some(self.first_ns.map_or(f, |s| s.min(f)));
            self.last_ns = self.last_ns.max(o.last_ns + offset_ns);
        }
        for i in 0..NOPS {
            self.calls[i] += o.calls[i];
            self.bytes[i] += o.bytes[i];
            self.failed[i] += o.failed[i];
        }
        self.free_null += o.free_null;
        self.untraced += o.untraced;
        self.dropped += o.dropped;
        self.drop_records += o.drop_records;
        self.drops.extend(o.drops.iter().map(|d| DropRecord { ts_ns: d.ts_ns + offset_ns, ..d.clone() }));
        self.drops.sort_by_key(|d| d.ts_ns);
        self.drops.truncate(DROPS_LISTED);
    }

    pub fn report(&self, threads: &Threads) -> TotalsReport {
        let d = self.duration_ns();
        let mut ops = BTreeMap::new();
        let mut bytes = BTreeMap::new();
        let mut failed = BTreeMap::new();
        for op in Op::ALLOC_OPS {
            let i = op as usize;
            ops.insert(op.name(), self.calls[i]);
            if !op.is_free() {
                bytes.insert(op.name(), self.bytes[i]);
            }
            if self.failed[i] > 0 {
                failed.insert(op.name(), self.failed[i]);
            }
        }
        let mut records = BTreeMap::new();
        for v in 32..NOPS as u8 {
            if let Some(op) = Op::from_u8(v) {
                records.insert(op.name(), self.calls[v as usize]);
            }
        }
        let per_thread = threads
            .list
            .iter()
            .filter(|t| t.dropped > 0)
            .map(|t| ThreadDrops { pid: t.pid, tid: t.tid, events: t.dropped })
            .collect();
        TotalsReport {
            events: self.events,
            duration_ns: d,
            events_per_sec: if d == 0 { 0.0 } else { self.events as f64 * 1e9 / d as f64 },
            threads: threads.list.len() as u64,
            ops,
            bytes,
            failed,
            free_null: self.free_null,
            records,
            dropped: DroppedReport {
                events: self.dropped,
                records: self.drop_records,
                per_thread,
                when: self.drops.clone(),
            },
            untraced_calls: self.untraced,
        }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct TotalsReport {
    /// Every record of the log, allocation calls and process records.
    pub events: u64,
    /// From the first record to the last.
    pub duration_ns: u64,
    /// Of the workload (events / duration), not of this analysis.
    pub events_per_sec: f64,
    /// Threads that wrote records.
    pub threads: u64,
    /// Calls per operation, keyed by C function name.
    pub ops: BTreeMap<&'static str, u64>,
    /// Bytes requested per operation (count * size for calloc and reallocarray).
    pub bytes: BTreeMap<&'static str, u64>,
    /// Calls that returned NULL (or a posix_memalign error), where any did.
    pub failed: BTreeMap<&'static str, u64>,
    /// free(NULL) calls (counted in ops.free).
    pub free_null: u64,
    /// Process and thread records: thread_start, thread_exit, rss, fork, clock, ...
    pub records: BTreeMap<&'static str, u64>,
    pub dropped: DroppedReport,
    /// Calls served but not recorded (after a thread's exit or the final flush).
    pub untraced_calls: u64,
}

#[derive(Serialize, Clone, Debug)]
pub struct DroppedReport {
    /// Events discarded (SHIM_ON_FULL=drop).
    pub events: u64,
    /// Drop records: batches discarded.
    pub records: u64,
    pub per_thread: Vec<ThreadDrops>,
    /// The first drop records in time order (at most 100).
    pub when: Vec<DropRecord>,
}

#[derive(Serialize, Clone, Debug)]
pub struct ThreadDrops {
    pub pid: u32,
    pub tid: u32,
    pub events: u64,
}
