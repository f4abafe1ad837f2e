//! The on-disk layout (docs/format.md is the normative description).
//!
//! ```text
//! file    := preamble header frame*
//! preamble:= "SHIMLOG\0" u16le(version) u16le(0) u32le(header_len)
//! header  := header_len bytes of UTF-8 JSON (see [`Header`])
//! frame   := frame_header zstd_frame(comp_len bytes; decompresses to raw_len bytes of records)
//! ```
use serde::{Deserialize, Serialize};

pub const MAGIC: &[u8; 8] = b"SHIMLOG\0";
/// The version this build writes (2 added the `free_sized` record; 3 the watch records:
/// `stall`, `alloc_stat`, `window`, `thread_seen`; 4 the call-site records: `stack`,
/// `stack_pc`, `site`, `mapping*`, and `exit`, `recovered`; 5 columnar frames, see
/// [`crate::columns`]).
pub const VERSION: u16 = 5;
/// The first version whose frames may be columnar.
pub const COLUMNAR_VERSION: u16 = 5;
/// Bit 31 of a frame header's raw_len word: the body is columnar (version 5).
pub const RAW_LEN_COLUMNAR: u32 = 1 << 31;
/// The oldest version this build reads.
pub const OLDEST_VERSION: u16 = 1;
pub const PREAMBLE_LEN: usize = 16;
/// "SHMF" read as a little-endian u32.
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"SHMF");
pub const FRAME_HEADER_LEN: usize = 40;
/// No frame's records exceed this; a header claiming more is corrupt.
pub const MAX_RAW_LEN: u32 = 16 << 20;
/// The header JSON may not exceed this.
pub const MAX_HEADER_LEN: u32 = 1 << 20;

/// Tag byte: low 6 bits are the [`crate::Op`], this bit says a backend time follows.
pub const TAG_TIMED: u8 = 0x40;
/// Tag bit: the record's pointer deltas are stored in bytes, not in units of 8.
pub const TAG_PTR_BYTES: u8 = 0x80;
pub const TAG_OP_MASK: u8 = 0x3f;
/// Pointer deltas that are multiples of 8 are stored divided by 8.
pub const PTR_SHIFT: u32 = 3;
/// The shim's log ticks are clock ticks divided by 2^TICK_SHIFT (16 TSC ticks: about 6 ns
/// at 2.6 GHz), which drops the low bits of every time delta, the least compressible part
/// of a record. Readers need not know: the header's ticks_per_sec is in log ticks.
pub const TICK_SHIFT: u32 = 4;

/// The process described by a log, written once at its start.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Header {
    pub format_version: u16,
    pub pid: u32,
    pub ppid: u32,
    /// True for the log of a child that fork() made (it continues its parent's program).
    #[serde(default)]
    pub forked: bool,
    pub exe: String,
    pub cmdline: Vec<String>,
    pub backend: String,
    pub backend_version: String,
    /// The backend's settings from SHIM_BACKEND=NAME:KEY=VALUE,... as applied
    /// (`dirty_decay_ms=0,muzzy_decay_ms=0`; absent: its defaults).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend_settings: Option<String>,
    pub page_size: u64,
    /// Wall-clock time of the reference point, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// CLOCK_MONOTONIC of the reference point, ns.
    pub start_mono_ns: u64,
    /// "tsc" or "monotonic".
    pub clock: String,
    /// Event ticks per second (0 in a log whose process ended before the recorder had
    /// calibrated the clock; such a log has no frames).
    pub ticks_per_sec: f64,
    /// Tick count at the reference point.
    pub ref_ticks: u64,
    /// SHIM_TIMING as in force: "all", "none" or "1/N".
    pub timing: String,
    /// SHIM_ON_FULL as in force: "block" or "drop".
    pub on_full: String,
    pub shim_version: String,
    /// The allocators the program brings in its own executable or libraries (found in their
    /// symbol tables at start-up), and what the shim did with each: recorded it in place or
    /// served its entry points with `backend` instead. Empty for a program whose allocator
    /// LD_PRELOAD reaches on its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub own_allocators: Vec<OwnAllocator>,
    /// With capture windows (SHIM_WINDOW...): 0 for the process's watch log (its timeline:
    /// RSS, allocator statistics, stalls, windows), N >= 1 for the log of window N.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// In a fork child's log: the parent's log (as the parent named it), and the moment of
    /// the fork in ticks of the clock both share (version 4). The child starts with the
    /// parent's live blocks; readers given both logs match the child's frees of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_log: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fork_ticks: Option<u64>,
    /// The in-flight file of the process's buffers while it runs (absent: none, or beside
    /// the log as `LOG.inflight`) (version 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inflight: Option<String>,
    /// SHIM_STACKS in force: "off", "slow", "sample" or "all" (absent before version 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<String>,
    /// SHIM_SAMPLE_BYTES: the mean of the byte sampler (SHIM_STACKS=sample).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_bytes: Option<u64>,
    /// SHIM_UNWIND in force: "tables" or "fp"; and SHIM_STACK_DEPTH.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_depth: Option<u32>,
    /// SHIM_RECORD: "sample" when only the sampled allocations (mean `sample_bytes`), their
    /// frees and the slow calls were recorded (absent: every call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<String>,
}

/// An allocator linked into the program (see [`Header::own_allocators`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct OwnAllocator {
    /// "jemalloc", "mimalloc", "tcmalloc", or "malloc" (a malloc family of unknown make).
    pub family: String,
    /// The symbol prefix of its API: "" (it defines malloc itself), "je_", "_rjem_", "mi_", "tc_".
    pub prefix: String,
    /// As the allocator reports it (empty when it cannot be asked without running it).
    #[serde(default)]
    pub version: String,
    /// The file that defines it (the executable or a library).
    pub file: String,
    /// How many entry points it has (symbols; aliases counted once).
    pub entry_points: u32,
    /// "recorded" (its calls recorded, served by itself), "switched" (served by `backend`),
    /// or "untouched" (not recorded; `note` says why).
    pub mode: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

impl Header {
    /// Converts event ticks to ns since the reference point (0 for anything before it).
    #[inline]
    pub fn ticks_to_ns(&self, ticks: u64) -> u64 {
        if ticks <= self.ref_ticks {
            return 0;
        }
        self.dur_ns(ticks - self.ref_ticks)
    }
    #[inline]
    pub fn dur_ns(&self, ticks: u64) -> u64 {
        let tps = if self.ticks_per_sec > 0.0 { self.ticks_per_sec } else { 1e9 };
        (ticks as f64 * 1e9 / tps) as u64
    }
}

/// [`Header::ticks_to_ns`] and [`Header::dur_ns`] in fixed point, for converting every
/// event: a 64 x 64-bit multiply and a shift instead of two conversions and a division.
/// The scale is exact to about 2^-60 relative, so results agree with the header's float
/// formula to within 1 ns (and to the float's own rounding for the largest tick counts).
#[derive(Clone, Copy, Debug)]
pub struct NsScale {
    ref_ticks: u64,
    /// ns per tick times 2^shift.
    mul: u64,
    shift: u32,
    /// The float formula, for a scale the fixed point cannot hold (a nonsensical rate).
    float: Option<f64>,
}

impl NsScale {
    pub fn of(h: &Header) -> NsScale {
        let tps = if h.ticks_per_sec > 0.0 { h.ticks_per_sec } else { 1e9 };
        let ratio = 1e9 / tps;
        if !(ratio.is_finite() && ratio > 0.0 && ratio < (1u64 << 62) as f64) {
            return NsScale { ref_ticks: h.ref_ticks, mul: 0, shift: 0, float: Some(tps) };
        }
        // The largest shift that keeps mul below 2^63.
        let shift = (62 - ratio.log2().floor() as i32).clamp(0, 64) as u32;
        let mul = (ratio * (shift as f64).exp2()).round() as u64;
        NsScale { ref_ticks: h.ref_ticks, mul, shift, float: None }
    }

    /// Ticks to ns since the reference point (0 for anything before it).
    #[inline(always)]
    pub fn ns(&self, ticks: u64) -> u64 {
        self.dur(ticks.saturating_sub(self.ref_ticks))
    }

    /// A duration in ticks to ns.
    #[inline(always)]
    pub fn dur(&self, ticks: u64) -> u64 {
        if let Some(tps) = self.float {
            return (ticks as f64 * 1e9 / tps) as u64;
        }
        let p = ((ticks as u128 * self.mul as u128) >> self.shift).min(u64::MAX as u128);
        p as u64
    }
}

/// The fixed-size header before each compressed frame (little-endian).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameHeader {
    /// 0: the process stream (RSS, clock, end); otherwise one thread's stream.
    pub stream: u32,
    pub n_records: u32,
    pub raw_len: u32,
    pub comp_len: u32,
    pub first_ticks: u64,
    pub last_ticks: u64,
    /// The body is columns ([`crate::columns`]) that rebuild the `raw_len` bytes of records,
    /// rather than one zstd frame of them (version 5; bit 31 of the raw_len word).
    pub columnar: bool,
}

impl FrameHeader {
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.stream.to_le_bytes());
        b[8..12].copy_from_slice(&self.n_records.to_le_bytes());
        let raw = self.raw_len | if self.columnar { RAW_LEN_COLUMNAR } else { 0 };
        b[12..16].copy_from_slice(&raw.to_le_bytes());
        b[16..20].copy_from_slice(&self.comp_len.to_le_bytes());
        b[20..28].copy_from_slice(&self.first_ticks.to_le_bytes());
        b[28..36].copy_from_slice(&self.last_ticks.to_le_bytes());
        let crc = crc32fast::hash(&b[0..36]);
        b[36..40].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// None when the magic or the checksum is wrong, or the lengths are impossible.
    pub fn decode(b: &[u8]) -> Option<FrameHeader> {
        if b.len() < FRAME_HEADER_LEN {
            return None;
        }
        let u32at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64at = |i: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(x)
        };
        if u32at(0) != FRAME_MAGIC || crc32fast::hash(&b[0..36]) != u32at(36) {
            return None;
        }
        let h = FrameHeader {
            stream: u32at(4),
            n_records: u32at(8),
            raw_len: u32at(12) & !RAW_LEN_COLUMNAR,
            columnar: u32at(12) & RAW_LEN_COLUMNAR != 0,
            comp_len: u32at(16),
            first_ticks: u64at(20),
            last_ticks: u64at(28),
        };
        if h.raw_len > MAX_RAW_LEN || h.comp_len > MAX_RAW_LEN + (1 << 16) {
            return None;
        }
        Some(h)
    }
}

/// Encodes the preamble for a header JSON of `len` bytes.
pub fn preamble(len: u32) -> [u8; PREAMBLE_LEN] {
    let mut b = [0u8; PREAMBLE_LEN];
    b[0..8].copy_from_slice(MAGIC);
    b[8..10].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&len.to_le_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The fixed-point conversion gives the header's float formula to within 1 ns
        /// (for tick counts a double holds exactly), and never goes backwards.
        #[test]
        fn ns_scale_matches_the_float_formula(
            tps in prop_oneof![1e8f64..4e9, 1e3f64..1e12, Just(1e9), Just(0.0)],
            ref_ticks in 0u64..1 << 50,
            t in 0u64..1 << 52,
            d in 0u64..1 << 20,
        ) {
            let h = Header { ticks_per_sec: tps, ref_ticks, ..Default::default() };
            let s = NsScale::of(&h);
            for ticks in [t, t + d, ref_ticks.saturating_add(t)] {
                let (want, got) = (h.ticks_to_ns(ticks), s.ns(ticks));
                prop_assert!(want.abs_diff(got) <= 1 + want / (1 << 50), "{ticks} ticks at {tps}/s: float {want}, fixed {got}");
            }
            prop_assert!(s.ns(t + d) >= s.ns(t));
            let (want, got) = (h.dur_ns(d), s.dur(d));
            prop_assert!(want.abs_diff(got) <= 1, "{d} ticks at {tps}/s: float {want}, fixed {got}");
        }
    }
}
