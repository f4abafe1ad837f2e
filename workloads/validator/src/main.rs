//! validator: a multi-threaded Rust program whose global allocator is the one a cargo feature
//! links in (tikv-jemallocator unprefixed or prefixed, or mimalloc; the system allocator
//! without a feature), wrapped in a counting `GlobalAlloc`.
//!
//! `validator [ITERATIONS] [THREADS]` (defaults 2000 and 4; THREADS 0: the same work on the
//! main thread alone, no channel, for measuring what each call costs): the main thread sends ITERATIONS
//! messages into a ring of THREADS workers (at most 4 per worker in flight); each message goes
//! round the ring HOPS times, every worker reading it, growing it and handing it on, then
//! comes back to the main thread. Messages carry byte vectors (every 64th one larger than
//! 1 MiB), boxes aligned to 64 and 4096 bytes, raw 64-byte-aligned blocks grown with
//! `realloc`, hash maps that grow at every hop, and strings. Each worker also keeps a cache
//! (a hash map of strings) that it grows and clears.
//!
//! Output, the same whatever the allocator and the thread timing:
//!   checksum ITERATIONS THREADS HEX
//! then one JSON line with the calls the counting allocator saw, from the start of the
//! process to the line before it (the runtime's allocations included):
//!   {"alloc":N,"alloc_zeroed":N,"realloc":N,"dealloc":N}
//!
//! Apart from the work on the messages, what the program does (threads started, channels,
//! the output) does not depend on ITERATIONS: the calls that reach the allocator without
//! going through the counting allocator (the C library's own) are the same in a run with
//! 0 iterations, so that (log - counted) is the same for both runs. To that end every
//! thread first blocks once on an empty channel, so that the channel's per-thread context
//! (a thread-local with a destructor, which the C library registers with calloc) exists in
//! every run, whether or not the thread would otherwise ever have waited.
use std::alloc::{GlobalAlloc, Layout};
use std::collections::HashMap;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

#[cfg(any(
    all(feature = "je-unprefixed", feature = "mimalloc"),
    all(feature = "je-prefixed", feature = "mimalloc"),
    all(feature = "je-prefixed", feature = "je-unprefixed")
))]
compile_error!("choose one allocator feature: je-unprefixed, je-prefixed or mimalloc");

#[cfg(any(feature = "je-unprefixed", feature = "je-prefixed"))]
type Inner = tikv_jemallocator::Jemalloc;
#[cfg(any(feature = "je-unprefixed", feature = "je-prefixed"))]
const INNER: Inner = tikv_jemallocator::Jemalloc;
#[cfg(feature = "mimalloc")]
type Inner = mimalloc::MiMalloc;
#[cfg(feature = "mimalloc")]
const INNER: Inner = mimalloc::MiMalloc;
#[cfg(not(any(feature = "je-unprefixed", feature = "je-prefixed", feature = "mimalloc")))]
type Inner = std::alloc::System;
#[cfg(not(any(feature = "je-unprefixed", feature = "je-prefixed", feature = "mimalloc")))]
const INNER: Inner = std::alloc::System;

/// Which allocator this build links (printed by `--which`).
const WHICH: &str = if cfg!(feature = "je-unprefixed") {
    "jemalloc-unprefixed"
} else if cfg!(feature = "je-prefixed") {
    "jemalloc-prefixed"
} else if cfg!(feature = "mimalloc") {
    "mimalloc"
} else {
    "system"
};

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static ZEROED: AtomicU64 = AtomicU64::new(0);
static REALLOCS: AtomicU64 = AtomicU64::new(0);
static DEALLOCS: AtomicU64 = AtomicU64::new(0);

/// Counts every call, then hands it to the allocator unchanged (one call of it each).
struct Counting<A>(A);

unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Relaxed);
        unsafe { self.0.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ZEROED.fetch_add(1, Relaxed);
        unsafe { self.0.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        REALLOCS.fetch_add(1, Relaxed);
        unsafe { self.0.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        DEALLOCS.fetch_add(1, Relaxed);
        unsafe { self.0.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting<Inner> = Counting(INNER);

/// How many times a message goes round the ring.
const HOPS: u32 = 3;
/// Messages in flight per worker.
const WINDOW: usize = 4;

/// FNV-1a, so that the checksum does not depend on std's hasher.
fn fnv(h: u64, bytes: &[u8]) -> u64 {
    let mut h = h;
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn mix(h: u64, x: u64) -> u64 {
    fnv(h, &x.to_le_bytes())
}

/// A cache line's worth of state, 64-byte aligned (Box::new asks for align 64).
#[repr(align(64))]
struct Line {
    words: [u64; 8],
}

/// A page, 4096-byte aligned.
#[repr(C, align(4096))]
struct Page {
    bytes: [u8; 4096],
}

/// A block with a 64-byte-aligned layout, allocated, zeroed and grown through std::alloc
/// directly (alloc / alloc_zeroed / realloc with align 64).
struct Aligned {
    ptr: *mut u8,
    len: usize,
}

unsafe impl Send for Aligned {}

impl Aligned {
    const ALIGN: usize = 64;
    fn new(len: usize, zeroed: bool) -> Aligned {
        let layout = Layout::from_size_align(len, Self::ALIGN).expect("layout");
        let ptr = unsafe {
            if zeroed {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        if !zeroed {
            unsafe { std::ptr::write_bytes(ptr, 0, len) };
        }
        Aligned { ptr, len }
    }
    fn grow(&mut self, len: usize, fill: u8) {
        let layout = Layout::from_size_align(self.len, Self::ALIGN).expect("layout");
        let ptr = unsafe { std::alloc::realloc(self.ptr, layout, len) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Layout::from_size_align(len, Self::ALIGN).expect("layout"));
        }
        assert_eq!(ptr as usize % Self::ALIGN, 0, "realloc lost the alignment");
        unsafe { std::ptr::write_bytes(ptr.add(self.len), fill, len - self.len) };
        self.ptr = ptr;
        self.len = len;
    }
    fn bytes(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        let layout = Layout::from_size_align(self.len, Self::ALIGN).expect("layout");
        unsafe { std::alloc::dealloc(self.ptr, layout) };
    }
}

enum Body {
    /// Bytes, grown at every hop (every 64th message starts above 1 MiB).
    Bytes(Vec<u8>),
    /// A 64-byte-aligned box and a page-aligned box, replaced at every hop.
    Boxes(Box<Line>, Box<Page>),
    /// A raw 64-byte-aligned block grown with realloc.
    Raw(Aligned),
    /// A map that gains entries at every hop (its table grows).
    Map(HashMap<u64, String>),
    /// Strings, one more per hop.
    Text(Vec<String>),
}

struct Msg {
    id: u64,
    hops: u32,
    body: Body,
}

fn make(id: u64) -> Msg {
    let body = match id % 5 {
        0 => {
            let n = if id % 64 == 0 {
                (1 << 20) + 4096 + (id as usize % 7) * 512
            } else {
                32 + (id as usize * 37) % 3000
            };
            if id % 2 == 0 {
                Body::Bytes(vec![(id & 0xff) as u8; n])
            } else {
                Body::Bytes(vec![0u8; n])
            }
        }
        1 => {
            let mut line = Box::new(Line { words: [0; 8] });
            line.words[0] = id;
            let mut page = Box::new(Page { bytes: [0; 4096] });
            page.bytes[(id % 4096) as usize] = id as u8;
            Body::Boxes(line, page)
        }
        2 => Body::Raw(Aligned::new(64 + (id as usize % 200), id % 4 == 2)),
        3 => {
            let mut m = HashMap::new();
            m.insert(id, format!("message-{id}"));
            Body::Map(m)
        }
        _ => Body::Text(vec![format!("{id:x}")]),
    };
    Msg { id, hops: 0, body }
}

/// One hop: grows or replaces the message's contents, as a function of the message alone.
fn hop(m: &mut Msg) {
    m.hops += 1;
    let (id, k) = (m.id, m.hops as u64);
    match &mut m.body {
        Body::Bytes(v) => {
            let extra = 16 + ((id + k) as usize * 13) % 300;
            v.extend(std::iter::repeat_n((id + k) as u8, extra));
        }
        Body::Boxes(line, page) => {
            let mut l = Box::new(Line { words: line.words });
            l.words[k as usize % 8] = l.words[k as usize % 8].wrapping_add(id * k);
            let mut p = Box::new(Page { bytes: [0; 4096] });
            p.bytes.copy_from_slice(&page.bytes);
            p.bytes[((id * 31 + k) % 4096) as usize] ^= k as u8;
            *line = l;
            *page = p;
        }
        Body::Raw(a) => {
            let to = a.len * 2 + (k as usize * 8);
            a.grow(to, k as u8);
        }
        Body::Map(map) => {
            for j in 0..(4 << k) {
                map.insert(id * 1000 + k * 100 + j, format!("{id}/{k}/{j}"));
            }
        }
        Body::Text(v) => {
            let mut s = String::new();
            for j in 0..(8 * k) {
                s.push_str(&format!("{:x}-", id ^ j));
            }
            v.push(s);
        }
    }
}

/// What the main thread adds to the checksum for a message that has done its round.
fn digest(m: &Msg) -> u64 {
    let h = mix(0xcbf2_9ce4_8422_2325, m.id);
    let h = mix(h, m.hops as u64);
    match &m.body {
        Body::Bytes(v) => {
            // Large blocks: every 509th byte and the tail.
            let step = if v.len() > 65536 { 509 } else { 1 };
            let mut h = mix(h, v.len() as u64);
            for b in v.iter().step_by(step) {
                h = fnv(h, &[*b]);
            }
            fnv(h, &v[v.len().saturating_sub(64)..])
        }
        Body::Boxes(line, page) => {
            assert_eq!(&**line as *const Line as usize % 64, 0, "Box<Line> not 64-aligned");
            assert_eq!(&**page as *const Page as usize % 4096, 0, "Box<Page> not 4096-aligned");
            let mut h = h;
            for w in line.words {
                h = mix(h, w);
            }
            fnv(h, &page.bytes)
        }
        Body::Raw(a) => fnv(mix(h, a.len as u64), a.bytes()),
        Body::Map(map) => {
            // Order-independent: the sum of the entries' hashes.
            let sum = map.iter().fold(0u64, |acc, (k, v)| {
                acc.wrapping_add(fnv(mix(0x84222325, *k), v.as_bytes()))
            });
            mix(mix(h, map.len() as u64), sum)
        }
        Body::Text(v) => v.iter().fold(h, |h, s| fnv(h, s.as_bytes())),
    }
}

/// Blocks once on a channel nobody sends on, so that the thread's channel context exists in
/// every run (see the module comment). A zero-capacity channel: its receive goes straight to
/// the blocking path when no sender waits (a list channel spins first and may see its
/// deadline pass before it gets there, when the thread is preempted while spinning).
fn block_once() {
    let (_tx, rx) = bounded::<()>(0);
    let _ = rx.recv_timeout(Duration::ZERO);
}

fn worker(
    i: usize,
    rx: Receiver<Option<Msg>>,
    next: Sender<Option<Msg>>,
    done: Sender<Msg>,
    ready: Sender<()>,
) {
    block_once();
    ready.send(()).expect("ready");
    drop(ready);
    // A per-worker cache that grows and is cleared now and then.
    let mut cache: HashMap<u64, String> = HashMap::new();
    // None: the run is over (passed on round the ring, which holds no message by then).
    while let Ok(Some(mut m)) = rx.recv() {
        hop(&mut m);
        cache.insert(m.id * 8 + m.hops as u64, format!("w{i}:{}", m.id));
        if cache.len() > 512 {
            cache = HashMap::new();
        }
        let sent = if m.hops >= HOPS {
            done.send(m).is_ok()
        } else {
            next.send(Some(m)).is_ok()
        };
        if !sent {
            break;
        }
    }
    let _ = next.send(None);
}

fn run(iterations: u64, threads: usize) -> u64 {
    let (done_tx, done_rx) = unbounded::<Msg>();
    let (ready_tx, ready_rx) = unbounded::<()>();
    let chans: Vec<(Sender<Option<Msg>>, Receiver<Option<Msg>>)> =
        (0..threads).map(|_| unbounded()).collect();
    let senders: Vec<Sender<Option<Msg>>> = chans.iter().map(|(s, _)| s.clone()).collect();
    let mut handles = Vec::with_capacity(threads);
    for (i, (_, rx)) in chans.into_iter().enumerate() {
        let next = senders[(i + 1) % threads].clone();
        let done = done_tx.clone();
        let ready = ready_tx.clone();
        handles.push(
            std::thread::Builder::new()
                .name(format!("worker-{i}"))
                .spawn(move || worker(i, rx, next, done, ready))
                .expect("spawn worker"),
        );
    }
    drop(done_tx);
    drop(ready_tx);
    for _ in 0..threads {
        ready_rx.recv().expect("a worker did not start");
    }
    block_once();

    let window = (threads * WINDOW) as u64;
    let (mut sent, mut received, mut sum) = (0u64, 0u64, 0u64);
    while received < iterations {
        while sent < iterations && sent - received < window {
            senders[(sent % threads as u64) as usize]
                .send(Some(make(sent)))
                .expect("send");
            sent += 1;
        }
        let m = done_rx.recv().expect("a worker stopped");
        assert_eq!(m.hops, HOPS);
        sum = sum.wrapping_add(digest(&m));
        received += 1;
    }
    // Every message is back: stop the ring.
    senders[0].send(None).expect("stop");
    drop(senders);
    for h in handles {
        h.join().expect("worker panicked");
    }
    sum
}

/// The same work as `run`, on the calling thread alone: each message makes its HOPS hops in
/// turn (a cache as a worker's), with no channel and no thread to wait for.
fn solo(iterations: u64) -> u64 {
    let mut cache: HashMap<u64, String> = HashMap::new();
    let mut sum = 0u64;
    for i in 0..iterations {
        let mut m = make(i);
        while m.hops < HOPS {
            hop(&mut m);
            cache.insert(m.id * 8 + m.hops as u64, format!("w0:{}", m.id));
            if cache.len() > 512 {
                cache = HashMap::new();
            }
        }
        sum = sum.wrapping_add(digest(&m));
    }
    sum
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--which") {
        println!("{WHICH}");
        return;
    }
    let arg = |i: usize, default: u64| -> u64 {
        args.get(i).map_or(default, |s| {
            s.parse().unwrap_or_else(|_| {
                eprintln!("usage: validator [ITERATIONS] [THREADS] (not a number: {s})");
                std::process::exit(2)
            })
        })
    };
    let iterations = arg(1, 2000);
    let threads = arg(2, 4) as usize;
    drop(args);
    let sum = if threads == 0 { solo(iterations) } else { run(iterations, threads) };
    let mut out = std::io::stdout().lock();
    writeln!(out, "checksum {iterations} {threads} {sum:016x}").expect("stdout");
    // Counted up to here: writing the line below allocates nothing (the buffer exists).
    let (a, z, r, d) = (
        ALLOCS.load(Relaxed),
        ZEROED.load(Relaxed),
        REALLOCS.load(Relaxed),
        DEALLOCS.load(Relaxed),
    );
    writeln!(
        out,
        "{{\"alloc\":{a},\"alloc_zeroed\":{z},\"realloc\":{r},\"dealloc\":{d}}}"
    )
    .expect("stdout");
    out.flush().expect("stdout");
}
