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
pub const VERSION: u16 = 1;
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
}

impl FrameHeader {
    pub fn encode(&self) -> [u8; FRAME_HEADER_LEN] {
        let mut b = [0u8; FRAME_HEADER_LEN];
        b[0..4].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.stream.to_le_bytes());
        b[8..12].copy_from_slice(&self.n_records.to_le_bytes());
        b[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
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
            raw_len: u32at(12),
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
