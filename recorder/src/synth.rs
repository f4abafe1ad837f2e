//! A synthetic log, deterministic for given arguments: what `shimlog stats` and `replay` are
//! measured on (the genlog example of shimlog writes one of any size for `make bench`; the
//! instruction budgets of itest/tests/budget.rs write small ones).
//!
//! THREADS threads interleave in time; each call is a malloc (sizes from a skewed mix),
//! calloc, realloc, aligned allocation or a free of a random live block (so many frees are
//! cross-thread). The live set hovers around LIVE blocks, freed addresses are reused, 1 call
//! in 16 carries a backend time, and the process stream gets an RSS record every simulated
//! 100 ms. LEVEL is the zstd level of its frames (1 is the shim's; -1 to -7 as
//! SHIM_ZSTD_LEVEL=-N would write them).
use crate::buffer::{Args, Buf};
use crate::format::{self, Header};
use crate::writer::{create_log, LogWriter};
use crate::Op;
use std::io;

/// What [`write`] wrote.
pub struct Written {
    /// The path used (create_log never overwrites: `out.1` when `out` exists).
    pub path: String,
    pub records: u64,
    pub bytes: u64,
}

/// xorshift64*: deterministic and fast.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }
}

struct Stream {
    buf: Box<Buf>,
}

fn push(w: &mut LogWriter, s: &mut Stream, op: Op, t: u64, a: &Args, bt: Option<u64>) -> io::Result<()> {
    if !s.buf.has_room() {
        w.write_buf(&s.buf)?;
        let id = s.buf.stream;
        s.buf.reset(id);
    }
    s.buf.push(op, t, a, bt);
    Ok(())
}

/// Writes a synthetic log of `events` records (thread starts and exits, RSS records and the
/// end included) to `out`.
pub fn write(out: &str, events: u64, threads: u32, target_live: usize, level: i32) -> io::Result<Written> {
    let (fd, path) = create_log(out)?;
    let h = Header {
        format_version: format::VERSION,
        pid: 4242,
        ppid: 1,
        exe: "/usr/bin/genlog".into(),
        cmdline: vec!["genlog".into()],
        backend: "glibc".into(),
        backend_version: "2.36".into(),
        page_size: 4096,
        clock: "monotonic".into(),
        ticks_per_sec: 1e9,
        timing: "1/16".into(),
        on_full: "block".into(),
        shim_version: "synthetic".into(),
        ..Default::default()
    };
    let reserved = crate::writer::write_header(&fd, &h)?;
    let mut w = LogWriter::new(fd, level)?;
    w.note_header(reserved);

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut proc_s = Stream { buf: Buf::new_boxed(0) };
    let mut ths: Vec<Stream> = (1..=threads).map(|i| Stream { buf: Buf::new_boxed(i) }).collect();
    let mut t: u64 = 1000;
    for (i, s) in ths.iter_mut().enumerate() {
        let a = Args { value: 10_000 + i as u64, ..Default::default() };
        push(&mut w, s, Op::ThreadStart, t, &a, None)?;
        t += 1;
    }
    // Live blocks (ptr, size) and addresses free for reuse.
    let mut live: Vec<(u64, u64)> = Vec::with_capacity(target_live * 2);
    let mut free_addrs: Vec<u64> = Vec::new();
    let mut next_addr: u64 = 0x5555_0000_0000;
    let mut new_addr = |free_addrs: &mut Vec<u64>, rng: &mut Rng| -> u64 {
        if !free_addrs.is_empty() && rng.below(4) != 0 {
            let i = rng.below(free_addrs.len() as u64) as usize;
            free_addrs.swap_remove(i)
        } else {
            next_addr += 4096;
            next_addr
        }
    };
    const SIZES: [u64; 12] = [8, 16, 24, 32, 48, 64, 100, 128, 256, 1000, 4096, 40000];
    let mut next_rss = 100_000_000u64;
    let mut n = threads as u64;
    while n < events {
        let ti = rng.below(threads as u64) as usize;
        t += 50 + rng.below(200);
        if t >= next_rss {
            let a = Args { value: 50_000_000 + live.len() as u64 * 64, ..Default::default() };
            push(&mut w, &mut proc_s, Op::Rss, t, &a, None)?;
            next_rss += 100_000_000;
            n += 1;
            continue;
        }
        let bt = (rng.below(16) == 0).then(|| 20 + rng.below(200) + rng.below(2) * rng.below(5000));
        let r = rng.below(100);
        let want_free = live.len() >= target_live || (live.len() > target_live / 2 && r < 52);
        let s = &mut ths[ti];
        if r >= 5 && want_free && !live.is_empty() {
            let i = rng.below(live.len() as u64) as usize;
            let (p, _) = live.swap_remove(i);
            push(&mut w, s, Op::Free, t, &Args { ptr: p, ..Default::default() }, bt)?;
            free_addrs.push(p);
        } else if r < 5 && !live.is_empty() {
            let i = rng.below(live.len() as u64) as usize;
            let (old, size) = live[i];
            let ns = ((size * 3 / 2 + 16) & !15).min(1 << 16);
            let p = if rng.below(2) == 0 { old } else { new_addr(&mut free_addrs, &mut rng) };
            if p != old {
                free_addrs.push(old);
            }
            live[i] = (p, ns);
            push(&mut w, s, Op::Realloc, t, &Args { old, size: ns, ptr: p, ..Default::default() }, bt)?;
        } else {
            let size = SIZES[rng.below(SIZES.len() as u64) as usize] + rng.below(8);
            let p = new_addr(&mut free_addrs, &mut rng);
            let (op, a) = match rng.below(20) {
                0 => (Op::Calloc, Args { count: 4, size: size / 4 + 1, ptr: p, ..Default::default() }),
                1 => (Op::PosixMemalign, Args { align: 64, size, ptr: p, ..Default::default() }),
                _ => (Op::Malloc, Args { size, ptr: p, ..Default::default() }),
            };
            let req = if op == Op::Calloc { a.count * a.size } else { size };
            live.push((p, req));
            push(&mut w, s, op, t, &a, bt)?;
        }
        n += 1;
    }
    for s in ths.iter_mut() {
        t += 1;
        push(&mut w, s, Op::ThreadExit, t, &Args::default(), None)?;
        w.write_buf(&s.buf)?;
    }
    t += 1;
    push(&mut w, &mut proc_s, Op::End, t, &Args::default(), None)?;
    w.write_buf(&proc_s.buf)?;
    let written = Written { path, records: w.records, bytes: w.bytes };
    drop(w); // closes the file
    Ok(written)
}
