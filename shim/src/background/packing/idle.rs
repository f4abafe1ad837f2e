//! Idle cores, from /proc/stat: what `SHIM_PACK=auto` decides by.

/// Nanoseconds between two looks at /proc/stat.
pub const PERIOD_NS: u64 = 200_000_000;

/// Idle time of the CPUs in the thread's affinity mask, from /proc/stat's per-CPU lines
/// (idle + iowait, in clock ticks).
pub(super) struct IdleCores {
    /// /proc/stat, one of the shim's own descriptors (checked at each read).
    fd: recorder::ownfd::OwnFd,
    allowed: libc::cpu_set_t,
    hz: f64,
    last_ns: u64,
    last_idle: u64,
    buf: Vec<u8>,
    /// Reads that failed in a row.
    failures: u32,
}

impl IdleCores {
    pub(super) fn open(mono_ns: u64) -> Option<IdleCores> {
        // SAFETY: plain libc calls with valid arguments; the set is written by the kernel.
        unsafe {
            let fd = libc::open(c"/proc/stat".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return None;
            }
            let fd = recorder::ownfd::OwnFd::adopt(fd, "/proc/stat", libc::O_RDONLY).ok()?;
            let mut allowed: libc::cpu_set_t = core::mem::zeroed();
            if libc::sched_getaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &mut allowed) != 0 {
                libc::CPU_ZERO(&mut allowed);
                for i in 0..libc::CPU_SETSIZE as usize {
                    libc::CPU_SET(i, &mut allowed);
                }
            }
            let hz = libc::sysconf(libc::_SC_CLK_TCK);
            let mut s = IdleCores {
                fd,
                allowed,
                hz: if hz > 0 { hz as f64 } else { 100.0 },
                last_ns: mono_ns,
                last_idle: 0,
                buf: vec![0; 64 << 10],
                failures: 0,
            };
            match s.read() {
                Some(idle) => s.last_idle = idle,
                None => return None,
            }
            Some(s)
        }
    }

    /// The idle ticks of the allowed CPUs now.
    fn read(&mut self) -> Option<u64> {
        let buf = &mut self.buf;
        // SAFETY: buf is writable for its length.
        let n = self
            .fd
            .with(|fd| Ok(unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), 0) }))
            .unwrap_or(-1);
        if n <= 0 {
            self.failures += 1;
            return None;
        }
        self.failures = 0;
        let mut text = &self.buf[..n as usize];
        if text.len() == self.buf.len() {
            // Cut short (a machine of a thousand CPUs): the last line may be part of one.
            text = &text[..text.iter().rposition(|&b| b == b'\n').unwrap_or(0)];
        }
        let allowed = &self.allowed;
        // SAFETY: CPU_ISSET reads the set, `cpu` is below CPU_SETSIZE.
        idle_ticks(text, |cpu| cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, allowed) })
    }

    /// Three reads in a row failed (the descriptor closed under us, say).
    pub(super) fn failed(&self) -> bool {
        self.failures >= 3
    }

    /// Idle cores on average since the last sample, once PERIOD_NS have passed.
    pub(super) fn sample(&mut self, mono_ns: u64) -> Option<f64> {
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

/// Sum of idle + iowait over the `cpuN` lines of /proc/stat text whose N `allowed` takes.
/// None when there is no such line.
fn idle_ticks(text: &[u8], allowed: impl Fn(usize) -> bool) -> Option<u64> {
    let mut sum = 0u64;
    let mut any = false;
    for line in text.split(|&b| b == b'\n') {
        // "cpuN ...", not the total line "cpu  ...".
        let Some(rest) = line.strip_prefix(b"cpu").filter(|r| r.first().is_some_and(u8::is_ascii_digit))
        else {
            continue;
        };
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
    b.iter().try_fold(0u64, |n, &c| {
        if c.is_ascii_digit() {
            n.checked_mul(10)?.checked_add((c - b'0') as u64)
        } else {
            None
        }
    })
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
    fn this_machine_has_a_proc_stat() {
        let mut s = IdleCores::open(0).expect("/proc/stat readable");
        assert!(s.sample(PERIOD_NS - 1).is_none(), "sampled before its period");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let cores = s.sample(PERIOD_NS).expect("a sample after its period");
        assert!(cores >= 0.0, "{cores}");
    }
}
