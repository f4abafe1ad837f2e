//! SHIM_PACK: whether the recorder writes a buffer as columns (about half the log bytes, at
//! up to 4 times the recorder thread's CPU) or as the rows the threads wrote (zstd alone).
//!
//! `auto`, the default, packs columns while the CPUs the process may run on have at least
//! half a core idle, measured from /proc/stat every 200 ms, and writes rows while they
//! have less than a quarter, or for a second after its cgroup's CPU quota was used up: on
//! a machine whose cores the program keeps busy, or in a container at its quota, the
//! packing would take core time from the program itself. Where /proc/stat cannot be read
//! it writes rows. Every mode but `rows` also writes rows
//! while more than HURRY_PENDING full buffers wait, so that the program never waits for
//! the packing (BENCHMARKS.md, "Columnar frames").

use crate::config::Pack;

/// Full buffers waiting beyond which the recorder writes row frames (zstd alone) instead of
/// columnar ones, to catch up.
const HURRY_PENDING: usize = 32;

mod idle;
mod quota;
use idle::IdleCores;
use quota::Throttle;

/// Idle cores below which `auto` turns to rows, and above which it turns back to columns.
const IDLE_LOW: f64 = 0.25;
const IDLE_HIGH: f64 = 0.5;

/// Samples to write rows for after the cgroup was throttled.
const THROTTLED_ROWS: u32 = 5;

/// The recorder thread's choice, one buffer at a time.
pub struct Packing {
    mode: Pack,
    /// `auto`: columns for now.
    columns: bool,
    /// `auto`: the idle cores (None when /proc/stat cannot be read: rows then).
    idle: Option<IdleCores>,
    quota: Option<Throttle>,
    /// Samples left in rows since the cgroup was last throttled.
    throttled: u32,
}

impl Packing {
    /// Called on the recorder thread (the CPUs it may run on are the process's).
    pub fn new(mode: Pack, mono_ns: u64) -> Packing {
        let auto = mode == Pack::Auto;
        let idle = if auto { IdleCores::open(mono_ns) } else { None };
        let quota = if auto { Throttle::open() } else { None };
        // Unmeasured, auto takes the choice that costs the program nothing.
        Packing { mode, columns: idle.is_some(), idle, quota, throttled: 0 }
    }

    /// Rows for the next buffer, with `pending` full buffers waiting.
    #[inline]
    pub fn rows(&self, pending: usize) -> bool {
        match self.mode {
            Pack::Rows => true,
            Pack::Columns => pending > HURRY_PENDING,
            Pack::Auto => !self.columns || pending > HURRY_PENDING,
        }
    }

    /// Looks at the idle time (and the cgroup's throttling) again when PERIOD_NS have
    /// passed since the last look.
    pub fn tick(&mut self, mono_ns: u64) {
        let Some(idle) = self.idle.as_mut() else { return };
        let Some(cores) = idle.sample(mono_ns) else {
            if idle.failed() {
                self.columns = false;
            }
            return;
        };
        if self.quota.as_mut().and_then(Throttle::since_last) == Some(true) {
            self.throttled = THROTTLED_ROWS;
        }
        self.throttled = self.throttled.saturating_sub(1);
        self.columns = decide(self.columns, cores) && self.throttled == 0;
    }
}

/// Columns or rows from the idle cores measured, with the previous choice between the
/// thresholds.
fn decide(columns: bool, idle_cores: f64) -> bool {
    if idle_cores < IDLE_LOW {
        false
    } else if idle_cores > IDLE_HIGH {
        true
    } else {
        columns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_turns_with_the_idle_cores_and_keeps_its_choice_between() {
        assert!(!decide(true, 0.1));
        assert!(!decide(false, 0.4));
        assert!(decide(false, 0.6));
        assert!(decide(true, 0.3));
        assert!(decide(true, 7.0));
    }

    #[test]
    fn each_mode_and_the_backlog() {
        let p = |mode, columns| Packing { mode, columns, idle: None, quota: None, throttled: 0 };
        assert!(p(Pack::Rows, true).rows(0));
        assert!(!p(Pack::Columns, false).rows(0));
        assert!(p(Pack::Columns, true).rows(HURRY_PENDING + 1));
        assert!(!p(Pack::Auto, true).rows(HURRY_PENDING));
        assert!(p(Pack::Auto, false).rows(0));
        assert!(p(Pack::Auto, true).rows(HURRY_PENDING + 1));
    }
}
