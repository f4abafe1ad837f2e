//! What a replay child measures about itself: resource usage, resident memory (now, its
//! high-water mark and a sampled series), per-call latency histograms and slop per size class.
//!
//! Nothing here allocates once set up, so that measuring does not disturb what is measured.
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};

/// getrusage(RUSAGE_SELF), the fields the report uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub user_ns: u64,
    pub sys_ns: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub vol_ctx: u64,
    pub invol_ctx: u64,
}

pub fn usage() -> Usage {
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    Usage {
        user_ns: tv(ru.ru_utime),
        sys_ns: tv(ru.ru_stime),
        minor_faults: ru.ru_minflt as u64,
        major_faults: ru.ru_majflt as u64,
        vol_ctx: ru.ru_nvcsw as u64,
        invol_ctx: ru.ru_nivcsw as u64,
    }
}

impl Usage {
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            user_ns: self.user_ns.saturating_sub(before.user_ns),
            sys_ns: self.sys_ns.saturating_sub(before.sys_ns),
            minor_faults: self.minor_faults.saturating_sub(before.minor_faults),
            major_faults: self.major_faults.saturating_sub(before.major_faults),
            vol_ctx: self.vol_ctx.saturating_sub(before.vol_ctx),
            invol_ctx: self.invol_ctx.saturating_sub(before.invol_ctx),
        }
    }
}

/// Reads small /proc files into a stack buffer, without allocating.
pub struct ProcFile {
    fd: i32,
}

impl ProcFile {
    pub fn open(path: &core::ffi::CStr) -> Option<ProcFile> {
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        (fd >= 0).then_some(ProcFile { fd })
    }
    fn read<'b>(&self, buf: &'b mut [u8]) -> &'b [u8] {
        let n = unsafe { libc::pread(self.fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), 0) };
        if n <= 0 {
            &buf[..0]
        } else {
            &buf[..n as usize]
        }
    }
}

impl Drop for ProcFile {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

fn page_size() -> u64 {
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// Resident set size from /proc/self/statm (its second field, in pages).
pub struct Statm {
    f: ProcFile,
    page: u64,
}

impl Statm {
    pub fn open() -> Option<Statm> {
        Some(Statm { f: ProcFile::open(c"/proc/self/statm")?, page: page_size() })
    }
    pub fn rss_bytes(&self) -> u64 {
        let mut b = [0u8; 128];
        let s = self.f.read(&mut b);
        let mut fields = s.split(|c| *c == b' ');
        fields.next();
        parse_u64(fields.next().unwrap_or(b"0")) * self.page
    }
}

fn parse_u64(s: &[u8]) -> u64 {
    s.iter().take_while(|c| c.is_ascii_digit()).fold(0u64, |a, c| a * 10 + (c - b'0') as u64)
}

/// VmHWM (peak resident set) from /proc/self/status, in bytes.
pub fn vm_hwm_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Anonymous memory backed by transparent huge pages (AnonHugePages of
/// /proc/self/smaps_rollup), in bytes.
pub fn anon_huge_pages_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/smaps_rollup").ok()?;
    let line = s.lines().find(|l| l.starts_with("AnonHugePages:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Resets the peak resident set to the current one (Linux: `5` to /proc/self/clear_refs), so
/// that VmHWM afterwards is the replay's own peak. False when the kernel refused.
pub fn reset_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", b"5").is_ok()
}

/// Ticks of [`recorder::clock::now`] per nanosecond, measured over a stretch of time.
pub struct Clock {
    start: recorder::clock::Pair,
}

impl Clock {
    pub fn start() -> Clock {
        Clock { start: recorder::clock::pair() }
    }
    /// Ticks per ns between `start()` and now.
    pub fn ticks_per_ns(&self) -> f64 {
        recorder::clock::rate(self.start, recorder::clock::pair()) / 1e9
    }
}

/// The average cost of one clock read, in ticks: what every latency measurement includes
/// on top of the call itself.
pub fn timer_cost_ticks() -> f64 {
    const N: u64 = 100_000;
    let a = recorder::clock::now();
    let mut x = 0u64;
    for _ in 0..N {
        x = x.wrapping_add(std::hint::black_box(recorder::clock::now()));
    }
    std::hint::black_box(x);
    recorder::clock::now().wrapping_sub(a) as f64 / N as f64
}

/// Latency histograms in clock ticks, one per backend function (see `plan::Action`).
pub struct Latency {
    pub h: [Histogram<u64>; 5],
    /// Sum of all recorded ticks, per function.
    pub total: [u64; 5],
}

/// Highest latency a histogram holds exactly (larger values saturate), in ticks: about
/// five minutes at 3.5 GHz.
const MAX_TICKS: u64 = 1 << 40;

impl Latency {
    pub fn new() -> Latency {
        let mk = || {
            let mut h = Histogram::<u64>::new_with_bounds(1, MAX_TICKS, 2).expect("valid histogram bounds");
            // Writes every count so that its pages are resident before the replay starts.
            h.reset();
            h
        };
        Latency { h: [mk(), mk(), mk(), mk(), mk()], total: [0; 5] }
    }
    #[inline(always)]
    pub fn record(&mut self, action: usize, ticks: u64) {
        self.h[action].saturating_record(ticks.max(1));
        self.total[action] = self.total[action].wrapping_add(ticks);
    }
}

/// Percentiles of one function's latency, in ns.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Percentiles {
    pub calls: u64,
    pub total_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p99_9_ns: u64,
    pub max_ns: u64,
}

pub fn percentiles(h: &Histogram<u64>, total_ticks: u64, ticks_per_ns: f64) -> Percentiles {
    let ns = |t: u64| (t as f64 / ticks_per_ns).round() as u64;
    if h.is_empty() {
        return Percentiles::default();
    }
    Percentiles {
        calls: h.len(),
        total_ns: ns(total_ticks),
        mean_ns: total_ticks as f64 / ticks_per_ns / h.len() as f64,
        p50_ns: ns(h.value_at_quantile(0.5)),
        p99_ns: ns(h.value_at_quantile(0.99)),
        p99_9_ns: ns(h.value_at_quantile(0.999)),
        max_ns: ns(h.max()),
    }
}

/// Requested sizes are grouped by powers of two: class k holds sizes in (2^(k-1), 2^k],
/// class 4 also everything up to 16 bytes.
pub const SLOP_CLASSES: usize = 41;

pub fn slop_class(requested: u64) -> usize {
    let k = if requested <= 16 { 4 } else { 64 - (requested - 1).leading_zeros() as usize };
    k.min(SLOP_CLASSES - 1)
}

/// The label of a slop class: the largest request it holds.
pub fn slop_class_label(k: usize) -> String {
    if k == SLOP_CLASSES - 1 {
        return format!("> {}", crate_bytes(1u64 << (k - 1)));
    }
    format!("<= {}", crate_bytes(1u64 << k))
}

fn crate_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{} GiB", b >> 30),
        b if b >= 1 << 20 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 => format!("{} KiB", b >> 10),
        b => format!("{b} B"),
    }
}

/// Allocations, requested and usable bytes per size class.
#[derive(Clone)]
pub struct Slop {
    pub allocs: [u64; SLOP_CLASSES],
    pub requested: [u64; SLOP_CLASSES],
    pub usable: [u64; SLOP_CLASSES],
}

impl Slop {
    pub fn new() -> Slop {
        Slop { allocs: [0; SLOP_CLASSES], requested: [0; SLOP_CLASSES], usable: [0; SLOP_CLASSES] }
    }
    #[inline(always)]
    pub fn add(&mut self, requested: u64, usable: u64) {
        let k = slop_class(requested);
        self.allocs[k] += 1;
        self.requested[k] += requested;
        self.usable[k] += usable;
    }
}

/// One line of the slop report.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SlopClass {
    /// e.g. "<= 64 B": the requests in (32, 64] bytes.
    pub class: String,
    /// The largest request of the class (its upper bound), for sorting.
    pub max_request: u64,
    pub allocs: u64,
    pub requested_bytes: u64,
    pub usable_bytes: u64,
    /// usable - requested, summed over the class's allocations.
    pub slop_bytes: u64,
}

pub fn slop_report(s: &Slop) -> Vec<SlopClass> {
    (0..SLOP_CLASSES)
        .filter(|&k| s.allocs[k] > 0)
        .map(|k| SlopClass {
            class: slop_class_label(k),
            max_request: if k == SLOP_CLASSES - 1 { u64::MAX } else { 1 << k },
            allocs: s.allocs[k],
            requested_bytes: s.requested[k],
            usable_bytes: s.usable[k],
            slop_bytes: s.usable[k].saturating_sub(s.requested[k]),
        })
        .collect()
}

/// A replay thread's counters that the sampler reads while it runs, on their own cache line.
#[repr(align(128))]
#[derive(Default)]
pub struct Progress {
    pub ops: AtomicU64,
    /// Requested bytes this thread allocated minus those it freed (negative when it frees
    /// other threads' blocks); the sum over threads is the replay's live bytes.
    pub live: AtomicI64,
}

/// Samples the resident set every `interval` until `stop` is set. When the series is full,
/// every other sample is dropped and the interval doubles, so memory stays fixed.
pub struct Sampler {
    pub samples: Vec<RssSample>,
    pub interval_ns: u64,
    pub peak_rss: u64,
}

#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RssSample {
    /// Nanoseconds since the replay started.
    pub t_ns: u64,
    /// Resident bytes above the baseline.
    pub rss_bytes: u64,
    /// Requested bytes the replay held live.
    pub live_bytes: i64,
}

pub const MAX_SAMPLES: usize = 2048;
/// The first sampling interval: 5 ms. Every wake-up takes a CPU from the replay threads on a
/// small machine (at 1 ms, a thousand context switches per second of replay); the peak
/// itself comes from VmHWM, not from the samples.
pub const SAMPLE_INTERVAL_NS: u64 = 5_000_000;

impl Sampler {
    pub fn new() -> Sampler {
        // Filled once so that its pages are resident before the baseline is taken.
        let mut samples = vec![RssSample::default(); MAX_SAMPLES];
        samples.clear();
        Sampler { samples, interval_ns: SAMPLE_INTERVAL_NS, peak_rss: 0 }
    }

    /// Runs on its own thread. `tick` is called after every sample (progress display).
    pub fn run(
        &mut self,
        statm: &Statm,
        baseline: u64,
        start_ns: u64,
        threads: &[Progress],
        stop: &AtomicBool,
        mut tick: impl FnMut(u64),
    ) {
        let mut next = start_ns;
        loop {
            let done = stop.load(Relaxed);
            let now = recorder::clock::mono_ns();
            let rss = statm.rss_bytes().saturating_sub(baseline);
            self.peak_rss = self.peak_rss.max(rss);
            let live: i64 = threads.iter().map(|p| p.live.load(Relaxed)).sum();
            if self.samples.len() == MAX_SAMPLES {
                let mut i = 0;
                self.samples.retain(|_| {
                    i += 1;
                    i % 2 == 1
                });
                self.interval_ns *= 2;
            }
            self.samples.push(RssSample {
                t_ns: now.saturating_sub(start_ns),
                rss_bytes: rss,
                live_bytes: live,
            });
            tick(threads.iter().map(|p| p.ops.load(Relaxed)).sum());
            if done {
                return;
            }
            next += self.interval_ns;
            let now = recorder::clock::mono_ns();
            if next > now {
                std::thread::sleep(std::time::Duration::from_nanos(next - now));
            } else {
                next = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slop_classes_are_powers_of_two() {
        assert_eq!(slop_class(0), 4);
        assert_eq!(slop_class(16), 4);
        assert_eq!(slop_class(17), 5);
        assert_eq!(slop_class(32), 5);
        assert_eq!(slop_class(33), 6);
        assert_eq!(slop_class(u64::MAX), SLOP_CLASSES - 1);
        assert_eq!(slop_class_label(6), "<= 64 B");
        assert_eq!(slop_class_label(20), "<= 1 MiB");
    }

    #[test]
    fn statm_sees_memory_being_touched() {
        let s = Statm::open().unwrap();
        let before = s.rss_bytes();
        let mut v = vec![0u8; 64 << 20];
        for i in (0..v.len()).step_by(4096) {
            v[i] = 1;
        }
        let after = s.rss_bytes();
        std::hint::black_box(&v);
        assert!(after >= before + (60 << 20), "before {before} after {after}");
    }
}
