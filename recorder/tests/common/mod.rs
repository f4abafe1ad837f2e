//! What the reader's tests share.
use recorder::format::{self, Header};

/// The header of a test log: ticks are nanoseconds.
pub fn header() -> Header {
    Header {
        format_version: format::VERSION,
        pid: 1,
        backend: "glibc".into(),
        ticks_per_sec: 1e9,
        clock: "monotonic".into(),
        ..Default::default()
    }
}
