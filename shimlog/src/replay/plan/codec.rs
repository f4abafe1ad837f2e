//! The plan's ops and their encoding: what a replay thread does, one op at a time.
//!
//! An op is a tag byte (its [`Action`] and flag bits), the recorded C function, the time
//! delta from the thread's previous op, the slot it works on, and its arguments as varints.
use recorder::varint;

/// Bytes of one thread's ops kept in memory before they are appended to the plan file.
pub const CHUNK: usize = 16 * 1024;
/// The longest encoded op: two bytes and at most five varints.
pub const MAX_OP: usize = 2 + 5 * varint::MAX_LEN;

/// Tag bit: wait for the slot's sequence number before replaying.
pub const WAIT: u8 = 0x80;
/// Tag bit: another thread's next op on this slot waits for this one (so wake it).
pub const NOTIFY: u8 = 0x40;
pub const ACTION_MASK: u8 = 0x07;

/// What the replaying thread does (the backend call it makes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Action {
    /// malloc(size) into an empty slot. Args: size.
    Malloc = 0,
    /// calloc(count, size) into an empty slot. Args: count, size.
    Calloc = 1,
    /// memalign(align, size) into an empty slot. Args: align, size, requested.
    Memalign = 2,
    /// realloc(slot's block, max(size, 1)). Args: requested (new) size.
    Realloc = 3,
    /// free(slot's block). No args.
    Free = 4,
    /// Start the recorded thread `slot` (its index in the plan), as lifecycle event `count`.
    Spawn = 5,
    /// Wait until the recorded thread `slot` has ended (lifecycle event `count`: its exit).
    Join = 6,
}

impl Action {
    pub fn from_u8(v: u8) -> Option<Action> {
        Some(match v {
            0 => Action::Malloc,
            1 => Action::Calloc,
            2 => Action::Memalign,
            3 => Action::Realloc,
            4 => Action::Free,
            5 => Action::Spawn,
            6 => Action::Join,
            _ => return None,
        })
    }
    /// The backend function it calls (the latency histograms are kept per function).
    pub fn name(self) -> &'static str {
        match self {
            Action::Malloc => "malloc",
            Action::Calloc => "calloc",
            Action::Memalign => "memalign",
            Action::Realloc => "realloc",
            Action::Free => "free",
            Action::Spawn => "thread start",
            Action::Join => "thread exit",
        }
    }
    /// The actions that call the allocator (the others order the threads).
    pub const ALL: [Action; 5] =
        [Action::Malloc, Action::Calloc, Action::Memalign, Action::Realloc, Action::Free];
}

/// One decoded op.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PlanOp {
    pub action: u8,
    /// The recorded C function (an [`Op`] as u8), for the per-operation counts.
    pub op: u8,
    pub ts_ns: u64,
    pub slot: u32,
    /// Some(n): wait until the slot's counter is n (the previous op was on another thread).
    pub wait: Option<u32>,
    /// Another thread's next op on the slot waits for this one.
    pub notify: bool,
    /// calloc's count; for Spawn and Join, the lifecycle event's index.
    pub count: u64,
    pub size: u64,
    pub align: u64,
    /// Bytes the program asked for (what the ideal and the slop are measured against).
    pub requested: u64,
}

/// Appends `o` to `out`, delta-encoding its time against `prev_ts`.
pub fn encode(out: &mut Vec<u8>, o: &PlanOp, prev_ts: u64) {
    let mut b = [0u8; MAX_OP];
    b[0] = o.action | if o.wait.is_some() { WAIT } else { 0 } | if o.notify { NOTIFY } else { 0 };
    b[1] = o.op;
    let mut i = 2;
    i += varint::put(&mut b[i..], varint::zigzag(o.ts_ns.wrapping_sub(prev_ts) as i64));
    i += varint::put(&mut b[i..], o.slot as u64);
    if let Some(w) = o.wait {
        i += varint::put(&mut b[i..], w as u64);
    }
    match Action::from_u8(o.action) {
        Some(Action::Malloc) => i += varint::put(&mut b[i..], o.size),
        Some(Action::Calloc) => {
            i += varint::put(&mut b[i..], o.count);
            i += varint::put(&mut b[i..], o.size);
        }
        Some(Action::Memalign) => {
            i += varint::put(&mut b[i..], o.align);
            i += varint::put(&mut b[i..], o.size);
            i += varint::put(&mut b[i..], o.requested);
        }
        Some(Action::Realloc) => i += varint::put(&mut b[i..], o.requested),
        Some(Action::Spawn | Action::Join) => i += varint::put(&mut b[i..], o.count),
        Some(Action::Free) | None => {}
    }
    out.extend_from_slice(&b[..i]);
}

/// A varint, with the one-byte case (most slots, sizes and time deltas) first.
#[inline(always)]
fn get(buf: &[u8], pos: &mut usize) -> Option<u64> {
    match buf.get(*pos) {
        Some(&b) if b < 0x80 => {
            *pos += 1;
            Some(b as u64)
        }
        _ => varint::get(buf, pos),
    }
}

/// Decodes the op at `buf[*pos..]`; None when the bytes are not a valid op.
#[inline]
pub fn decode(buf: &[u8], pos: &mut usize, prev_ts: u64) -> Option<PlanOp> {
    let tag = *buf.get(*pos)?;
    let op = *buf.get(*pos + 1)?;
    *pos += 2;
    let action = Action::from_u8(tag & ACTION_MASK)?;
    let dts = varint::unzigzag(get(buf, pos)?);
    let mut o = PlanOp {
        action: action as u8,
        op,
        ts_ns: prev_ts.wrapping_add(dts as u64),
        slot: u32::try_from(get(buf, pos)?).ok()?,
        notify: tag & NOTIFY != 0,
        ..PlanOp::default()
    };
    if tag & WAIT != 0 {
        o.wait = Some(u32::try_from(get(buf, pos)?).ok()?);
    }
    match action {
        Action::Malloc => {
            o.size = get(buf, pos)?;
            o.requested = o.size;
        }
        Action::Calloc => {
            o.count = get(buf, pos)?;
            o.size = get(buf, pos)?;
            o.requested = o.count.checked_mul(o.size)?;
        }
        Action::Memalign => {
            o.align = get(buf, pos)?;
            o.size = get(buf, pos)?;
            o.requested = get(buf, pos)?;
        }
        Action::Realloc => {
            o.requested = get(buf, pos)?;
            o.size = o.requested.max(1);
        }
        Action::Spawn | Action::Join => o.count = get(buf, pos)?,
        Action::Free => {}
    }
    Some(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn ops_roundtrip(ops in prop::collection::vec(
            (0u8..7, 1u8..12, any::<u32>(), any::<u32>(), any::<Option<u32>>(),
             0u64..1 << 20, 0u64..1 << 40, 0u32..30, any::<bool>()), 1..100)) {
            let mut buf = Vec::new();
            let mut want = Vec::new();
            let mut ts = 0u64;
            let mut prev = 0u64;
            for (action, op, dts, slot, wait, count, size, align_shift, notify) in ops {
                ts += dts as u64;
                let a = Action::from_u8(action).unwrap();
                let mut o = PlanOp { action, op, ts_ns: ts, slot, wait, notify, ..PlanOp::default() };
                match a {
                    Action::Malloc => { o.size = size; o.requested = size; }
                    Action::Calloc => { o.count = count; o.size = size >> 20;
                                        o.requested = o.count * o.size; }
                    Action::Memalign => { o.align = 1 << align_shift; o.size = size;
                                          o.requested = size / 2; }
                    Action::Realloc => { o.requested = size; o.size = size.max(1); }
                    Action::Spawn | Action::Join => o.count = count,
                    Action::Free => {}
                }
                encode(&mut buf, &o, prev);
                prev = ts;
                want.push(o);
            }
            let mut pos = 0;
            let mut prev = 0;
            for w in want {
                let got = decode(&buf, &mut pos, prev).unwrap();
                prev = got.ts_ns;
                prop_assert_eq!(got, w);
            }
            prop_assert_eq!(pos, buf.len());
        }
    }
}
