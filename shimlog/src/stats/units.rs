//! Numbers with their units, for the human report.

/// 1234567 -> "1,234,567".
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in B, KiB, MiB, GiB or TiB with three significant digits.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{} {}", sig3(v), UNITS[u])
}

/// Nanoseconds in ns, µs, ms or s.
pub fn ns(n: u64) -> String {
    let v = n as f64;
    if n < 1_000 {
        format!("{n} ns")
    } else if n < 1_000_000 {
        format!("{} µs", sig3(v / 1e3))
    } else if n < 1_000_000_000 {
        format!("{} ms", sig3(v / 1e6))
    } else {
        format!("{} s", sig3(v / 1e9))
    }
}

/// A point in time of the run (ns since the log's start): seconds with ms precision, or
/// a smaller unit early in the run.
pub fn at(n: u64) -> String {
    if n < 1_000_000_000 {
        ns(n)
    } else {
        format!("{:.3} s", n as f64 / 1e9)
    }
}

/// A rate per second with a k/M/G prefix.
pub fn rate(per_sec: f64) -> String {
    if per_sec >= 1e9 {
        format!("{} G/s", sig3(per_sec / 1e9))
    } else if per_sec >= 1e6 {
        format!("{} M/s", sig3(per_sec / 1e6))
    } else if per_sec >= 1e3 {
        format!("{} k/s", sig3(per_sec / 1e3))
    } else {
        format!("{} /s", sig3(per_sec))
    }
}

/// A share (0..1) as a percentage.
pub fn pct(share: f64) -> String {
    if share > 0.0 && share < 0.001 {
        return "<0.1%".into();
    }
    format!("{:.1}%", share * 100.0)
}

fn sig3(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(10 << 20), "10.0 MiB");
        assert_eq!(ns(999), "999 ns");
        assert_eq!(ns(1500), "1.50 µs");
        assert_eq!(ns(25_000_000), "25.0 ms");
        assert_eq!(pct(0.1234), "12.3%");
        assert_eq!(pct(0.0001), "<0.1%");
        assert_eq!(rate(20e6), "20.0 M/s");
        assert_eq!(at(1080), "1.08 µs");
        assert_eq!(at(61_234_567_890), "61.235 s");
    }
}
