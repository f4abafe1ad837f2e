//! Stack records for synthetic logs (format version 4): objects, stacks and sites as the
//! shim writes them, for the call-site tests and the JSON doc test.
#![allow(dead_code)]
use super::synth::Log;
use recorder::buffer::Args;
use recorder::Op;

/// A record with two fields on thread `tid`'s stream.
pub fn rec(l: &mut Log, tid: u32, ts: u64, op: Op, size: u64, value: u64) {
    l.call(tid, ts, op, Args { size, value, ..Args::default() }, None);
}

/// Bytes as the mapping_path and mapping_build_id records carry them.
fn bytes(l: &mut Log, tid: u32, ts: u64, op: Op, b: &[u8]) {
    for c in b.chunks(8) {
        let mut x = [0u8; 8];
        x[..c.len()].copy_from_slice(c);
        rec(l, tid, ts, op, b.len() as u64, u64::from_le_bytes(x));
    }
}

/// A loaded object: its executable range, load bias, path and build id.
#[allow(clippy::too_many_arguments, reason = "one argument per field of the records it writes")]
pub fn mapping(l: &mut Log, tid: u32, ts: u64, start: u64, end: u64, bias: u64, path: &str, build_id: &[u8]) {
    rec(l, tid, ts, Op::Mapping, start, end);
    rec(l, tid, ts, Op::MappingBias, 0, bias);
    bytes(l, tid, ts, Op::MappingPath, path.as_bytes());
    bytes(l, tid, ts, Op::MappingBuildId, build_id);
}

/// Stack `id` with `depth` in its header and the frames `pcs` (fewer: a corrupt stack).
pub fn stack(l: &mut Log, tid: u32, ts: u64, id: u64, depth: u64, pcs: &[u64]) {
    rec(l, tid, ts, Op::Stack, id, depth);
    for &pc in pcs {
        rec(l, tid, ts, Op::StackPc, id, pc);
    }
}

/// The call just recorded on `tid` was made from stack `id`.
pub fn site(l: &mut Log, tid: u32, ts: u64, id: u64, flags: u64) {
    rec(l, tid, ts, Op::Site, id, flags);
}

/// An address inside a function of shimlog's own (its ELF address: a mapping with bias 0),
/// one that its debug info has a line for, as a return address into it would be.
pub fn shimlog_main() -> (String, u64) {
    use object::{Object, ObjectSymbol, SymbolKind};
    let path = env!("CARGO_BIN_EXE_shimlog").to_string();
    let data = std::fs::read(&path).expect("read shimlog");
    let f = object::File::parse(&*data).expect("parse shimlog");
    let main = f
        .symbols()
        .find(|s| {
            s.kind() == SymbolKind::Text
                && s.size() > 16
                && s.name().is_ok_and(|n| n.starts_with("_ZN7shimlog4main"))
        })
        .or_else(|| {
            f.symbols().find(|s| {
                s.kind() == SymbolKind::Text
                    && s.size() > 16
                    && s.name().is_ok_and(|n| n.starts_with("_ZN7shimlog"))
            })
        })
        .expect("a function of shimlog's in its symbols")
        .address();
    (path, main + 9)
}
