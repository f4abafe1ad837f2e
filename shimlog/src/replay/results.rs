//! The replay's results as they travel from a child to the parent and out as `--json`.
use super::plan::{PlanMeta, Skipped};
use super::run::measure::{Percentiles, RssSample, SlopClass};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The whole `--json` document.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub log: String,
    pub program: Program,
    pub options: Options,
    pub plan: PlanSummary,
    /// One per backend, in the order asked for.
    pub backends: Vec<BackendResult>,
    /// Sentences a reader should see with the numbers (what was excluded, not touched...).
    pub notes: Vec<String>,
    /// The best column for allocator time, peak RSS and mean RSS, what each costs in the
    /// others, the rankings and their ties (medians and ranges of the rounds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<Verdict>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Program {
    pub exe: String,
    pub cmdline: Vec<String>,
    pub pid: u32,
    /// The backend the program ran on while it was recorded.
    pub recorded_backend: String,
    /// The log is one capture window of the process (SHIM_WINDOW...): its number (0: the
    /// watch log, which has no calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// A fork child's log: it began with its parent's live blocks.
    #[serde(default)]
    pub forked: bool,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Options {
    pub pace: bool,
    /// "sleep" or "busy" when paced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace_mode: Option<String>,
    /// none, first or all (see `--touch`).
    pub touch: String,
    /// How many times each column was replayed (`--rounds`).
    #[serde(default = "one")]
    pub rounds: usize,
}

fn one() -> usize {
    1
}

/// What the pre-pass found: the same for every backend.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PlanSummary {
    pub events: u64,
    pub calls: u64,
    pub threads: usize,
    pub ops: BTreeMap<String, u64>,
    pub ops_total: u64,
    pub skipped: Skipped,
    pub cross_thread_frees: u64,
    pub cross_thread_reallocs: u64,
    pub waiting_ops: u64,
    pub late_realloc_frees: u64,
    /// Most threads alive at once in the log, and thread starts and exits replayed.
    pub peak_threads: u32,
    pub lifecycle_events: u32,
    pub ideal_bytes: u64,
    pub peak_live_blocks: u64,
    pub end_live_bytes: u64,
    pub end_live_blocks: u64,
    pub slots: u32,
    pub recorded_duration_ns: u64,
    pub dropped_events: u64,
    pub untraced_calls: u64,
    pub plan_bytes: u64,
    pub issues: Vec<String>,
}

impl PlanSummary {
    pub fn of(m: &PlanMeta) -> PlanSummary {
        PlanSummary {
            events: m.events,
            calls: m.calls,
            threads: m.threads.len(),
            ops: m.ops.clone(),
            ops_total: m.ops.values().sum(),
            skipped: m.skipped.clone(),
            cross_thread_frees: m.cross_thread_frees,
            cross_thread_reallocs: m.cross_thread_reallocs,
            waiting_ops: m.waiting_ops,
            late_realloc_frees: m.late_realloc_frees,
            peak_threads: m.peak_threads,
            lifecycle_events: m.lifecycle_events,
            ideal_bytes: m.ideal_bytes,
            peak_live_blocks: m.peak_live_blocks,
            end_live_bytes: m.end_live_bytes,
            end_live_blocks: m.end_live_blocks,
            slots: m.slots,
            recorded_duration_ns: m.last_ts_ns.saturating_sub(m.first_ts_ns),
            dropped_events: m.dropped_events,
            untraced_calls: m.untraced_calls,
            plan_bytes: m.plan_bytes,
            issues: m.issues.clone(),
        }
    }
}

/// A backend's column: its replay's figures, or why there are none.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BackendResult {
    /// The column's label: the backend's name, with its settings (`jemalloc:dirty_decay_ms=0`).
    pub backend: String,
    /// Each figure of merit over the rounds (median, range, each round's value); the other
    /// fields are those of the median round (by time in the allocator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<Rounds>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub replay: Option<Replay>,
}

/// What one child measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Replay {
    pub version: String,
    pub wall_ns: u64,
    pub cpu_user_ns: u64,
    pub cpu_sys_ns: u64,
    /// Time inside the allocator, summed over all calls and threads.
    pub alloc_ns_total: u64,
    /// Latency of each backend function called ("all" for every call together).
    pub latency: BTreeMap<String, Percentiles>,
    /// Ops made, by recorded C function: the same in every backend's column.
    pub ops: BTreeMap<String, u64>,
    pub ops_total: u64,
    /// Events per second of each replay thread (ops / the thread's own running time).
    pub events_per_s_per_thread: Throughput,
    pub events_per_s_total: f64,
    pub threads: Vec<ThreadResult>,
    /// Most threads the program had alive at once (the plan's figure) and most replay
    /// threads that ran at once (counted by the threads as they start and end; a thread
    /// counts until its ops are done, its exit joined a moment later).
    pub peak_threads: u32,
    pub max_threads_running: u32,
    pub memory: Memory,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_context_switches: u64,
    pub involuntary_context_switches: u64,
    /// usable - requested per request size class, over every allocation made.
    pub slop: Vec<SlopClass>,
    pub slop_bytes_total: u64,
    pub requested_bytes_total: u64,
    /// Frees (and reallocs to 0) that this replay made on a thread other than the one that
    /// allocated the block.
    pub cross_thread_frees: u64,
    pub cross_thread_reallocs: u64,
    /// Ops that found the block's previous op not yet replayed by its thread and waited.
    pub waits: u64,
    /// Allocations that returned NULL in the replay though the program got a block.
    pub replay_failures: u64,
    /// Aligned allocations whose result was not aligned as asked (should be 0).
    pub misaligned_results: u64,
    /// Requested bytes still live when the replay ended (the plan's end_live_bytes).
    pub end_live_bytes: i64,
    /// The allocator's own counters after the replay (names as it calls them).
    pub allocator_stats: BTreeMap<String, u64>,
    /// The column's settings as the allocator itself reports them after the replay
    /// (jemalloc's `opt.*`, mimalloc's options, tcmalloc's properties; absent for glibc's).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    pub excluded: Excluded,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Throughput {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ThreadResult {
    pub tid: u32,
    pub ops: u64,
    pub run_ns: u64,
    pub events_per_s: f64,
    pub waits: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Memory {
    /// The replay's peak resident set above the baseline (VmHWM after a reset at the start).
    pub peak_rss_bytes: u64,
    /// The same from the sampled series (a lower bound of the true peak).
    pub peak_rss_sampled_bytes: u64,
    /// Resident set above the baseline once every thread ended.
    pub end_rss_bytes: u64,
    /// Of that, memory in transparent huge pages (AnonHugePages), when the kernel says.
    pub end_huge_page_bytes: Option<u64>,
    /// Peak live requested bytes in log order (same for every backend).
    pub ideal_bytes: u64,
    /// peak_rss_bytes / ideal_bytes.
    pub fragmentation: f64,
    /// How peak_rss_bytes was read.
    pub peak_source: String,
    pub samples: Vec<RssSample>,
    pub sample_interval_ns: u64,
}

/// What the child kept out of the measured figures.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Excluded {
    /// Resident set just before the first replayed op: shimlog itself, the child's
    /// bookkeeping (below) and the replay threads' stacks. Subtracted from every RSS figure.
    pub baseline_rss_bytes: u64,
    /// The slot table (one entry per block the replay can hold at once).
    pub slot_table_bytes: u64,
    /// Each thread's op buffer.
    pub op_buffer_bytes: u64,
    pub histogram_bytes: u64,
    /// What one clock read costs on average; every latency includes about one.
    pub timer_cost_ns: f64,
    /// The clock the latencies were read from ("tsc" or "monotonic").
    pub clock: String,
    /// One call in this many was timed; the latency figures are of those calls, and the
    /// totals (alloc_ns_total, total_ns) are the timed calls' times scaled by it.
    pub time_every: u64,
    pub timed_calls: u64,
}

// What `--rounds` gives (computed in rounds.rs).

/// One figure over the rounds of one column.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Each round's value, in the order the rounds ran.
    pub values: Vec<f64>,
}

impl Spread {
    pub fn of(values: Vec<f64>) -> Spread {
        let mut v = values.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let n = v.len();
        let median = if n == 0 {
            f64::NAN
        } else if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v.first().copied().unwrap_or(f64::NAN),
            max: v.last().copied().unwrap_or(f64::NAN),
            values,
        }
    }
    /// Whether the two ranges overlap (the difference is within the rounds' noise).
    pub fn overlaps(&self, o: &Spread) -> bool {
        self.min <= o.max && o.min <= self.max
    }
}

/// A column's rounds: each metric's spread, and which round the table's figures come from.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Rounds {
    pub n: usize,
    /// metric name (see `rounds::METRICS`) -> spread.
    pub metrics: std::collections::BTreeMap<String, Spread>,
    /// The round (0-based) whose time in the allocator is the median: the detailed table's.
    pub median_round: usize,
}

/// The ranking of one metric: columns best first, and the tied pairs.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Ranking {
    pub metric: String,
    /// Column labels, best (lowest median) first.
    pub order: Vec<String>,
    /// Pairs of columns whose ranges overlap: no difference beyond the rounds' noise.
    pub ties: Vec<(String, String)>,
}

/// The verdict: per deciding metric its best column and what that column costs in the
/// other two; the rankings with their ties; and the same in sentences.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Verdict {
    pub rounds: usize,
    pub rankings: Vec<Ranking>,
    pub best: Vec<Best>,
    pub lines: Vec<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Best {
    pub metric: String,
    pub backend: String,
    /// Columns tied with it (their ranges overlap its).
    pub tied_with: Vec<String>,
    /// In each other deciding metric: how much more this column takes than that metric's
    /// best, as a fraction (0.2 = 20% more; 0 where it is that best too).
    pub costs: std::collections::BTreeMap<String, f64>,
}
