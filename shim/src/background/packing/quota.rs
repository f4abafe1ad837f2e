//! The process's cgroup CPU quota: whether it was throttled (its quota used up) lately, from
//! its cpu.stat (cgroup v2's `throttled_usec`, v1's `throttled_time` in ns). A container
//! with a quota is busy when it is throttled, however idle the machine's cores are.

/// How long the cgroup was throttled, read again each period.
pub(super) struct Throttle {
    file: std::fs::File,
    /// The key whose value counts, and its unit in ns.
    key: &'static [u8],
    unit_ns: u64,
    last: u64,
}

impl Throttle {
    /// None when the process's cgroup has no readable cpu.stat with throttling (no cpu
    /// controller, no quota support, a /sys without cgroups).
    pub(super) fn open() -> Option<Throttle> {
        let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        for (path, key, unit_ns) in candidates(&cg) {
            let Ok(file) = std::fs::File::open(&path) else { continue };
            let mut t = Throttle { file, key, unit_ns, last: 0 };
            if let Some(v) = t.read() {
                t.last = v;
                return Some(t);
            }
        }
        None
    }

    fn read(&mut self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 1024];
        let n = self.file.read_at(&mut buf, 0).ok()?;
        throttled(&buf[..n], self.key).map(|v| v.saturating_mul(self.unit_ns))
    }

    /// Whether the cgroup was throttled since the last call (None: it cannot be read now).
    pub(super) fn since_last(&mut self) -> Option<bool> {
        let v = self.read()?;
        let more = v > self.last;
        self.last = v;
        Some(more)
    }
}

/// The cpu.stat files to try, from /proc/self/cgroup's lines: v2's ("0::PATH") under
/// /sys/fs/cgroup, v1's cpu controller ("N:cpu,cpuacct:PATH") under its mount.
fn candidates(cgroup: &str) -> Vec<(String, &'static [u8], u64)> {
    let mut out = Vec::new();
    for line in cgroup.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(_), Some(ctrl), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
        let path = path.trim_end_matches('/');
        if ctrl.is_empty() {
            out.push((format!("/sys/fs/cgroup{path}/cpu.stat"), &b"throttled_usec"[..], 1000));
        } else if ctrl.split(',').any(|c| c == "cpu") {
            for mount in ["cpu", "cpu,cpuacct", "cpuacct,cpu"] {
                out.push((format!("/sys/fs/cgroup/{mount}{path}/cpu.stat"), &b"throttled_time"[..], 1));
            }
        }
    }
    out
}

/// The value of `key` in cpu.stat text ("key value" lines).
fn throttled(text: &[u8], key: &[u8]) -> Option<u64> {
    text.split(|&b| b == b'\n').find_map(|line| {
        let rest = line.strip_prefix(key)?.strip_prefix(b" ")?;
        std::str::from_utf8(rest).ok()?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_files_and_keys() {
        let c = candidates("12:cpu,cpuacct:/kubepods/pod1/\n0::/user.slice/app\n4:memory:/x\n");
        let paths: Vec<_> = c.iter().map(|(p, k, u)| (p.as_str(), *k, *u)).collect();
        assert_eq!(
            paths,
            [
                ("/sys/fs/cgroup/cpu/kubepods/pod1/cpu.stat", &b"throttled_time"[..], 1),
                ("/sys/fs/cgroup/cpu,cpuacct/kubepods/pod1/cpu.stat", &b"throttled_time"[..], 1),
                ("/sys/fs/cgroup/cpuacct,cpu/kubepods/pod1/cpu.stat", &b"throttled_time"[..], 1),
                ("/sys/fs/cgroup/user.slice/app/cpu.stat", &b"throttled_usec"[..], 1000),
            ]
        );
        assert_eq!(candidates("0::/\n")[0].0, "/sys/fs/cgroup/cpu.stat");
    }

    #[test]
    fn the_throttled_counters() {
        let v2 = b"usage_usec 123\nuser_usec 100\nnr_periods 10\nnr_throttled 2\nthrottled_usec 4567\n";
        assert_eq!(throttled(v2, b"throttled_usec"), Some(4567));
        let v1 = b"nr_periods 0\nnr_throttled 0\nthrottled_time 0\n";
        assert_eq!(throttled(v1, b"throttled_time"), Some(0));
        // nr_throttled is not throttled_time; a file without the key gives nothing.
        assert_eq!(throttled(b"nr_throttled 5\n", b"throttled_time"), None);
    }

    #[test]
    fn this_machine_if_it_has_one() {
        // Where the process's cgroup shows throttling, two reads in a row agree it did not
        // grow backwards.
        if let Some(mut t) = Throttle::open() {
            assert!(t.since_last().is_some());
        }
    }
}
