//! The shim log: what an event is ([`event`]), how it is laid out on disk ([`format`], see
//! docs/format.md), how a thread encodes it with plain stores ([`buffer`]), how full buffers
//! reach the recorder thread ([`transport`]), how the recorder compresses and writes them
//! ([`writer`]), and how a log is read back in merged time order ([`reader`]), with hot
//! loops compiled for the CPU's features ([`cpu`]).

pub mod buffer;
pub mod clock;
pub mod columns;
pub mod cpu;
pub mod ending;
pub mod event;
pub mod format;
pub mod inflight;
pub mod ownfd;
pub mod reader;
pub mod reclaim;
pub mod recover;
pub mod synth;
pub mod transport;
pub mod varint;
pub mod writer;

pub use ending::Ending;
pub use event::{
    alloc_stat_code, alloc_stat_name, exit_how, exit_how_name, recovered_end, recovered_end_name,
    window_event, window_event_name, Event, Op, ALLOC_STAT_NAMES,
};
pub use format::Header;
pub use reader::{LogReader, ReadIssue};
