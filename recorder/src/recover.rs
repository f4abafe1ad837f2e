//! Recovery: what a dead process left in its in-flight file ([`crate::inflight`]) goes into
//! its log, as the frames the recorder would have written, followed by a `recovered` record.
//!
//! A slot with records (`n > 0`) was being filled, or was full and waiting for the
//! recorder, when the process died; a slot the recorder wrote says `n = 0`. A slot written
//! whose mark did not make it (the process died between the write and the mark) is found
//! in the log by its stream and first tick, and left out. Records are decoded up to the
//! first that does not decode (at most one, cut by the death). The file is deleted after.
use crate::buffer::{Buf, Decoder, BUF_CAP};
use crate::event::Op;
use crate::format::{self, Header, TICK_SHIFT};
use crate::inflight::{self, InflightHeader};
use crate::reader::LogReader;
use crate::writer::{rewrite_header, LogWriter};
use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;

/// What recovery did to one log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    pub log: String,
    pub frames: u64,
    pub records: u64,
    /// The header had no clock rate (the process died within its first 20 ms): it now has
    /// the one the in-flight file's clock notes give.
    pub rate_estimated: bool,
}

/// Why a log was not recovered.
#[derive(Debug)]
pub enum NotRecovered {
    /// No in-flight file beside the log: nothing to do (a clean exit removed it).
    Nothing,
    /// Its process still runs (it holds the file's lock, or maps the file).
    Running,
    /// The file was left as it is, one line saying why: it could not be opened, or another
    /// version of the shim wrote it.
    Untouched(String),
    /// Its process is gone but its records could not be put in its log: one line saying
    /// what is wrong. The file is still there.
    Failed(String),
}

/// Recovers `log` from its in-flight file when its process is gone. Returns what was put in
/// each log (the main log and, with capture windows, the open window's).
pub fn recover(log: &str) -> Result<Vec<Recovered>, NotRecovered> {
    claim(&inflight_of(log))?.recover(log)
}

/// A dead process's in-flight file, locked by this process until dropped.
pub struct Claimed {
    file: File,
    pub path: String,
    /// The process that wrote it.
    pub pid: u32,
    header: Vec<u8>,
}

/// Opens and locks the in-flight file at `path` when its process is gone: the file's lock is
/// free, the process (the header's pid) does not map it, and the path still names the file
/// locked (another reader did not just recover and remove it).
pub fn claim(path: &str) -> Result<Claimed, NotRecovered> {
    let file = match File::options().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(NotRecovered::Nothing),
        Err(e) => return Err(NotRecovered::Untouched(format!("{path}: {e}"))),
    };
    // The process holds the lock while it lives; its death (however it came) releases it.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(NotRecovered::Running);
    }
    use std::os::unix::fs::MetadataExt;
    let ours = file.metadata().ok().map(|m| (m.dev(), m.ino()));
    if ours.is_none() || std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino())) != ours {
        return Err(NotRecovered::Nothing);
    }
    let mut header = vec![0u8; inflight::HEADER_LEN];
    if file.read_exact_at(&mut header, 0).is_err() || &header[..8] != inflight::MAGIC {
        // No header yet: its process is creating it (the name's pid lives), or died doing so.
        return match pid_in_name(path).is_some_and(alive) {
            true => Err(NotRecovered::Running),
            false => Err(NotRecovered::Failed(format!(
                "{path}: holds no header (its process died while making it)"
            ))),
        };
    }
    let pid = u32::from_le_bytes([header[20], header[21], header[22], header[23]]);
    // The lock is gone with the process, or with its descriptor (a program that closes every
    // descriptor it did not open): a process that still maps the file is alive.
    if still_mapped(pid, path) {
        return Err(NotRecovered::Running);
    }
    Ok(Claimed { file, path: path.to_string(), pid, header })
}

impl Claimed {
    fn h(&self) -> &InflightHeader {
        // SAFETY: HEADER_LEN bytes, at least the header's size; every field is plain data.
        unsafe { &*(self.header.as_ptr() as *const InflightHeader) }
    }

    /// The process's main log (or watch log), as the header names it (empty: not named).
    pub fn log(&self) -> String {
        let h = self.h();
        let mlen = (h.log_path_len as usize).min(inflight::PATH_MAX);
        String::from_utf8_lossy(&h.log_path[..mlen]).into_owned()
    }

    /// Whether this build of the shim wrote it (another version's file is left alone).
    pub fn readable(&self) -> Result<(), NotRecovered> {
        let h = self.h();
        if h.version != inflight::VERSION
            || h.slot_size as usize != inflight::slot_size()
            || h.slots as usize > inflight::SLOTS
        {
            return Err(NotRecovered::Untouched(format!(
                "{}: written by another version of the shim (in-flight version {}, slots of {} bytes; this build reads version {}, {} bytes)",
                self.path,
                h.version,
                h.slot_size,
                inflight::VERSION,
                inflight::slot_size()
            )));
        }
        Ok(())
    }

    /// Puts the file's records into the logs they belong to (`log` where the header names
    /// none), then deletes the file. On failure the file stays.
    pub fn recover(&self, log: &str) -> Result<Vec<Recovered>, NotRecovered> {
        self.readable()?;
        let path = &self.path;
        let fail = |m: String| NotRecovered::Failed(format!("{path}: {m}"));
        let h = self.h();
        use core::sync::atomic::Ordering::Relaxed;
        let window = h.window.load(Relaxed);
        let wlen = (h.window_path_len.load(Relaxed) as usize).min(inflight::PATH_MAX);
        let window_log = String::from_utf8_lossy(&h.window_path[..wlen]).into_owned();
        let main_log = match self.log() {
            // The log named by the caller when the process wrote the one it was told (a window's
            // log names the in-flight file too, but its slots' main log is the process's).
            m if m.is_empty() => log.to_string(),
            m => m,
        };
        let end = h.ending.load(Relaxed) as u64;
        let clock = (h.p0_ticks, h.p0_mono, h.last_ticks.load(Relaxed), h.last_mono.load(Relaxed));

        // Every slot with records, by the log it belongs to.
        let mut main = Vec::new();
        let mut win = Vec::new();
        let size = self.file.metadata().map_err(|e| fail(e.to_string()))?.len();
        let mut raw = vec![0u8; inflight::slot_size()];
        for i in 0..h.slots as usize {
            let at = (inflight::HEADER_LEN + i * inflight::slot_size()) as u64;
            if at + raw.len() as u64 > size {
                break;
            }
            // The counts first (a slot never used is a hole: nothing more to read).
            if self.file.read_exact_at(&mut raw[..12], at).is_err() {
                break;
            }
            if raw[4..12].iter().all(|&b| b == 0) {
                continue;
            }
            if self.file.read_exact_at(&mut raw, at).is_err() {
                break;
            }
            let Some(b) = slot(&raw) else { continue };
            match b.log {
                0 => main.push(b),
                n if n == window && window != 0 => win.push(b),
                _ => {} // a window's buffer whose log is closed: its records were discarded
            }
        }
        let mut done = Vec::new();
        for (target, bufs) in [(main_log, main), (window_log, win)] {
            if bufs.is_empty() || target.is_empty() {
                continue;
            }
            if !std::path::Path::new(&target).exists() {
                return Err(fail(format!("its log {target} is gone")));
            }
            done.push(
                append(&target, bufs, end, clock)
                    .map_err(|e| fail(format!("its log {target} cannot be written: {e}")))?,
            );
        }
        // Everything is in the logs now.
        let _ = std::fs::remove_file(path);
        Ok(done)
    }

    /// Deletes the file (its records are lost: the caller says why).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The in-flight file of `log`: the one its header names, else `LOG.inflight`.
pub fn inflight_of(log: &str) -> String {
    match LogReader::open(log) {
        Ok(r) => r.header.inflight.clone().unwrap_or_else(|| inflight::path_for(log)),
        Err(_) => inflight::path_for(log),
    }
}

/// The pid an in-flight file's name starts with (`PID-START.inflight`), if it does.
pub(crate) fn pid_in_name(path: &str) -> Option<u32> {
    let name = path.rsplit('/').next()?;
    name.split_once('-')?.0.parse().ok()
}

/// True when process `pid` exists (it may be another user's).
fn alive(pid: u32) -> bool {
    pid != 0
        && pid <= i32::MAX as u32
        && (unsafe { libc::kill(pid as i32, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// True when process `pid` runs and maps the in-flight file at `path` (or runs and its maps
/// cannot be read: then it may, and the file is left alone).
fn still_mapped(pid: u32, path: &str) -> bool {
    if !alive(pid) {
        return false;
    }
    let want = std::fs::canonicalize(path)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_string());
    std::fs::read_to_string(format!("/proc/{pid}/maps"))
        .map(|m| m.lines().any(|l| l.ends_with(want.as_str())))
        .unwrap_or(true)
}

/// Slot bytes as a buffer of whole records, or None when it holds none.
fn slot(raw: &[u8]) -> Option<Box<Buf>> {
    let mut b = Buf::new_boxed(0);
    // SAFETY: `raw` holds at least size_of::<Buf>() bytes (a slot), copied over a Buf of
    // plain integers and bytes.
    unsafe {
        core::ptr::copy_nonoverlapping(
            raw.as_ptr(),
            &mut *b as *mut Buf as *mut u8,
            core::mem::size_of::<Buf>(),
        )
    };
    if b.n == 0 || b.len == 0 {
        return None;
    }
    let len = (b.len as usize).min(BUF_CAP);
    let mut d = Decoder::new(&b.data[..len], b.first_ticks);
    let (mut n, mut last, mut good) = (0u32, b.first_ticks, 0usize);
    while n < b.n {
        match d.next_record() {
            Ok(Some(r)) => {
                n += 1;
                last = r.ticks;
                good = d.pos();
            }
            _ => break,
        }
    }
    if n == 0 {
        return None;
    }
    b.n = n;
    b.len = good as u32;
    b.last_ticks = last;
    Some(b)
}

/// Appends `bufs` to the log at `path` (cut back to its last whole frame first), then a
/// process frame with the `recovered` record.
fn append(
    path: &str,
    mut bufs: Vec<Box<Buf>>,
    end: u64,
    clock: (u64, u64, u64, u64),
) -> io::Result<Recovered> {
    let r = LogReader::open(path)?;
    let written: HashSet<(u32, u64)> = r.frames.iter().map(|f| (f.h.stream, f.h.first_ticks)).collect();
    bufs.retain(|b| !written.contains(&(b.stream, b.first_ticks)));
    if bufs.is_empty() && matches!(r.ending, crate::Ending::Recovered { .. }) {
        // A recovery that was cut off after its last write (its process ended before it
        // removed the file): everything is in the log already, its end record too.
        return Ok(Recovered { log: path.to_string(), ..Default::default() });
    }
    bufs.sort_by_key(|b| (b.stream, b.first_ticks));
    let whole = r
        .frames
        .iter()
        .map(|f| f.offset + format::FRAME_HEADER_LEN as u64 + f.h.comp_len as u64)
        .max()
        .unwrap_or(0)
        .max(format::PREAMBLE_LEN as u64 + reserved(&File::open(path)?)? as u64);
    let mut header = r.header.clone();
    let columnar = r.version >= format::COLUMNAR_VERSION;
    drop(r);

    let file = File::options().read(true).write(true).open(path)?;
    file.set_len(whole)?;
    let fd = unsafe { libc::dup(file.as_raw_fd()) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // One of the shim's own descriptors while it is written (a recovery runs in a program's
    // process, whose other threads may close what they did not open).
    let fd = crate::ownfd::OwnFd::adopt(fd, path, libc::O_RDWR)?;
    // Frames of the kind the log's version holds (a log an older shim wrote gets row frames).
    let mut w = if columnar { LogWriter::new(fd, 1)? } else { LogWriter::rows(fd, 1)? };
    w.start_at(whole);
    let mut out = Recovered { log: path.to_string(), ..Default::default() };
    let mut last = 0u64;
    for b in &bufs {
        w.write_buf(b)?;
        out.frames += 1;
        out.records += b.n as u64;
        last = last.max(b.last_ticks);
    }
    let mut note = Buf::new_boxed(0);
    let a = crate::buffer::Args { size: end, value: out.records, ..Default::default() };
    note.push(Op::Recovered, last.max(header.ref_ticks), &a, None);
    w.write_buf(&note)?;
    if header.ticks_per_sec == 0.0 {
        if let Some(tps) = rate(&header, clock) {
            header.ticks_per_sec = tps;
            out.rate_estimated = true;
            let reserved = reserved(&file)?;
            w.fd().with(|fd| rewrite_header(fd, &header, reserved))?;
        }
    }
    file.sync_data()?;
    Ok(out)
}

/// The header's length, from the preamble.
fn reserved(file: &File) -> io::Result<u32> {
    let mut pre = [0u8; format::PREAMBLE_LEN];
    file.read_exact_at(&mut pre, 0)?;
    Ok(u32::from_le_bytes([pre[12], pre[13], pre[14], pre[15]]))
}

/// The log's clock rate (log ticks per second) from the in-flight file's two clock notes:
/// the shim's start and the recorder's last look.
fn rate(h: &Header, (t0, m0, t1, m1): (u64, u64, u64, u64)) -> Option<f64> {
    if h.clock == "monotonic" {
        return Some(1e9 / (1u64 << TICK_SHIFT) as f64);
    }
    if t1 <= t0 || m1 <= m0 + 1_000_000 {
        return None;
    }
    Some((t1 - t0) as f64 / (m1 - m0) as f64 * 1e9 / (1u64 << TICK_SHIFT) as f64)
}
