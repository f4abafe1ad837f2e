//! SHIM_PACK: whether the recorder writes a buffer as columns (about half the log bytes, at
//! up to 4 times the recorder thread's CPU) or as the rows the threads wrote (zstd alone).
//!
//! `auto`, the default, packs columns while the CPUs the process may run on have at least
//! half a core idle, measured from /proc/stat every 200 ms, and writes rows while they
//! have less than a quarter: on a machine whose cores the program keeps busy, the packing
//! would take core time from the program itself. Every mode but `rows` also writes rows
//! while more than HURRY_PENDING full buffers wait, so that the program never waits for
//! the packing (BENCHMARKS.md, "Columnar frames").

/// How the recorder packs buffers, as SHIM_PACK says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pack {
    Rows,
    Columns,
    Auto,
}

/// Full buffers waiting beyond which the recorder writes row frames (zstd alone) instead of
/// columnar ones, to catch up.
const HURRY_PENDING: usize = 32;

/// Idle cores below which `auto` turns to rows, and above which it turns back to columns.
const IDLE_LOW: f64 = 0.25;
const IDLE_HIGH: f64 = 0.5;

/// Nanoseconds between two looks at /proc/stat.
const PERIOD_NS: u64 = 200_000_000;

/// The recorder thread's choice, one buffer at a time.
pub struct Packing {
    mode: Pack,
    /// `auto`: columns for now.
    columns: bool,
    idle: Option<IdleCores>,
}

impl Packing {
    /// Called on the recorder thread (the CPUs it may run on are the process's).
    pub fn new(mode: Pack, mono_ns: u64) -> Packing {
        let idle = if mode == Pack::Auto { IdleCores::open(mono_ns) } else { None };
        Packing { mode, columns: true, idle }
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

    /// Looks at the idle time again when PERIOD_NS have passed since the last look.
    pub fn tick(&mut self, mono_ns: u64) {
        let Some(idle) = self.idle.as_mut() else { return };
        if let Some(cores) = idle.sample(mono_ns) {
            self.columns = decide(self.columns, cores);
        }
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

/// Idle time of the CPUs in the thread's affinity mask, from /proc/stat's per-CPU lines
/// (idle + iowait, in clock ticks).
struct IdleCores {
    fd: i32,
    allowed: libc::cpu_set_t,
    hz: f64,
    last_ns: u64,
    last_idle: u64,
    buf: Vec<u8>,
}

impl IdleCores {
    fn open(mono_ns: u64) -> Option<IdleCores> {
        // SAFETY: plain libc calls with valid arguments; the set is written by the kernel.
        unsafe {
            let fd = libc::open(c"/proc/stat".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return None;
            }
            let mut allowed: libc::cpu_set_t = core::mem::zeroed();
            if libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
                libc::CPU_ZERO(&mut allowed);
                for i in 0..libc::CPU_SETSIZE as usize {
                    libc::CPU_SET(i, &mut allowed);
                }
            }
            let hz = libc::sysconf(libc::_SC_CLK_TCK);
            let mut s = IdleCores { fd, allowed, hz: if hz > 0 { hz as f64 } else { 100.0 }, last_ns: mono_ns, last_idle: 0, buf: vec![0; 64 << 10] };
            match s.read() {
                Some(idle) => s.last_idle = idle,
                None => {
                    libc::close(fd);
                    return None;
                }
            }
            Some(s)
        }
    }

    /// The idle ticks of the allowed CPUs now.
    fn read(&mut self) -> Option<u64> {
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::pread(self.fd, self.buf.as_mut_ptr().cast(), self.buf.len(), 0) };
        if n <= 0 {
            return None;
        }
        let allowed = &self.allowed;
        // SAFETY: CPU_ISSET reads the set, `cpu` is below CPU_SETSIZE.
        idle_ticks(&self.buf[..n as usize], |cpu| cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, allowed) })
    }

    /// Idle cores on average since the last sample, once PERIOD_NS have passed.
    fn sample(&mut self, mono_ns: u64) -> Option<f64> {
        let dt = mono_ns.saturating_sub(self.last_ns);
        if dt < PERIOD_NS {
            return None;
        }
        let idle = self.read()?;
        let cores = idle.saturating_sub(self.last_idle) as f64 / self.hz / (dt as f64 / 1e9);
        self.last_ns = mono_ns;
        self.last_idle = idle;
        Some(cores)
    }
}

impl Drop for IdleCores {
    fn drop(&mut self) {
        // SAFETY: fd is ours.
        unsafe { libc::close(self.fd) };
    }
}

/// Sum of idle + iowait over the `cpuN` lines of /proc/stat text whose N `allowed` takes.
/// None when there is no such line.
fn idle_ticks(text: &[u8], allowed: impl Fn(usize) -> bool) -> Option<u64> {
    let mut sum = 0u64;
    let mut any = false;
    for line in text.split(|&b| b == b'\n') {
        // "cpuN ...", not the total line "cpu  ...".
        let Some(rest) = line.strip_prefix(b"cpu").filter(|r| r.first().is_some_and(u8::is_ascii_digit)) else { continue };
        let mut fields = rest.split(|&b| b == b' ').filter(|f| !f.is_empty());
        let Some(cpu) = fields.next().and_then(number) else { continue };
        if !allowed(cpu as usize) {
            continue;
        }
        // user nice system idle iowait ...
        let v: Vec<u64> = fields.take(5).filter_map(number).collect();
        if v.len() == 5 {
            sum += v[3] + v[4];
            any = true;
        }
    }
    any.then_some(sum)
}

fn number(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 19 {
        return None;
    }
    b.iter().try_fold(0u64, |n, &c| if c.is_ascii_digit() { n.checked_mul(10)?.checked_add((c - b'0') as u64) } else { None })
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"cpu  4705 356 584 3699176 23 23 0 0 0 0\n\
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 0 0\n\
cpu1 1335 0 200 500 100 0 0 0 0 0\n\
cpu12 10 0 0 7 3 0 0 0 0 0\n\
intr 114930548 113199788 3 0 5 263 0 4 [...]\n\
ctxt 1990473\n";

    #[test]
    fn idle_of_the_allowed_cpus() {
        assert_eq!(idle_ticks(STAT, |_| true), Some(13343292 + 6130 + 500 + 100 + 7 + 3));
        assert_eq!(idle_ticks(STAT, |c| c == 1), Some(600));
        assert_eq!(idle_ticks(STAT, |c| c == 12), Some(10));
        // The total line ("cpu  ...") is not a CPU; nothing allowed, nothing known.
        assert_eq!(idle_ticks(STAT, |c| c == 5), None);
        assert_eq!(idle_ticks(b"garbage\ncpu3 1 2\n", |_| true), None);
    }

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
        let p = |mode, columns| Packing { mode, columns, idle: None };
        assert!(p(Pack::Rows, true).rows(0));
        assert!(!p(Pack::Columns, false).rows(0));
        assert!(p(Pack::Columns, true).rows(HURRY_PENDING + 1));
        assert!(!p(Pack::Auto, true).rows(HURRY_PENDING));
        assert!(p(Pack::Auto, false).rows(0));
        assert!(p(Pack::Auto, true).rows(HURRY_PENDING + 1));
    }

    #[test]
    fn this_machine_has_a_proc_stat() {
        let mut s = IdleCores::open(0).expect("/proc/stat readable");
        assert!(s.sample(PERIOD_NS - 1).is_none(), "sampled before its period");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let cores = s.sample(PERIOD_NS).expect("a sample after its period");
        assert!(cores >= 0.0, "{cores}");
    }
}
