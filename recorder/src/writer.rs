//! Creating the log file and writing frames to it (the recorder thread's side).
use crate::buffer::Buf;
use crate::format::{self, FrameHeader, Header};
use crate::ownfd::OwnFd;
use core::sync::atomic::Ordering::Relaxed;
use std::io;
use std::sync::Arc;

/// Expands `%p` (pid) and `%e` (executable name) in a SHIM_LOG pattern.
pub fn expand_pattern(pattern: &str, pid: u32, exe_name: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.peek() {
                Some('p') => {
                    chars.next();
                    out.push_str(&pid.to_string());
                }
                Some('e') => {
                    chars.next();
                    out.push_str(exe_name);
                }
                Some('%') => {
                    chars.next();
                    out.push('%');
                }
                _ => out.push('%'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Puts window `n` into a SHIM_LOG pattern: `%n` is the window number (0: the watch log); a
/// pattern without `%n` gains `.N` before a final `.shimlog`, or at its end. `%%` is kept
/// for [`expand_pattern`].
pub fn window_pattern(pattern: &str, n: u32) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut found = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.peek() {
                Some('n') => {
                    chars.next();
                    out.push_str(&n.to_string());
                    found = true;
                }
                Some('%') => {
                    chars.next();
                    out.push_str("%%");
                }
                _ => out.push('%'),
            }
        } else {
            out.push(c);
        }
    }
    if !found {
        match out.strip_suffix(".shimlog") {
            Some(stem) => out = format!("{stem}.{n}.shimlog"),
            None => out = format!("{out}.{n}"),
        }
    }
    out
}

/// Creates a new log file with mode 0600. Never follows a symlink and never overwrites:
/// when `path` exists, tries `path.1`, `path.2`, ... Returns the descriptor (one of the
/// shim's own, [`crate::ownfd`]) and the path used.
pub fn create_log(path: &str) -> io::Result<(OwnFd, String)> {
    let mut candidate = path.to_string();
    for i in 1..1000 {
        let c = std::ffi::CString::new(candidate.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600 as libc::c_uint,
            )
        };
        if fd >= 0 {
            return Ok((OwnFd::adopt(fd, &candidate, libc::O_WRONLY)?, candidate));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EEXIST) {
            return Err(e);
        }
        candidate = format!("{path}.{i}");
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "too many logs with this name"))
}

/// pwrite(2) was refused (ENOSYS: the seccomp sandbox of a browser's content process,
/// Firefox's): frames go out with write(2) at the file's position from then on.
static NO_PWRITE: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Writes all of `b`: at `off` with pwrite(2), or at the file's position with write(2) (the
/// header of a new file; frames where pwrite is refused). pwrite for frames because a
/// descriptor the program took over by a raw system call between the check and the write is
/// a pipe or a socket far more often than a file, and pwrite refuses those (ESPIPE) where
/// write would put the bytes in.
fn write_all(fd: i32, mut b: &[u8], mut off: Option<u64>) -> io::Result<()> {
    while !b.is_empty() {
        let p = b.as_ptr() as *const libc::c_void;
        let n = match off {
            Some(o) => unsafe { libc::pwrite(fd, p, b.len(), o as libc::off_t) },
            None => unsafe { libc::write(fd, p, b.len()) },
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "write returned 0"));
        }
        b = &b[n as usize..];
        off = off.map(|o| o + n as u64);
    }
    Ok(())
}

/// Writes the preamble and the header at the start of a new log, the JSON padded with
/// spaces to leave room for [`rewrite_header`]. Returns the header length reserved.
///
/// The header goes out as soon as the file exists, so a process that execs or dies a
/// moment later still leaves a valid (if empty) log.
pub fn write_header(fd: &OwnFd, h: &Header) -> io::Result<u32> {
    let json = serde_json::to_vec(h).map_err(io::Error::other)?;
    // Room for what is added once known: the clock rate, the program's own allocators.
    let reserved = (json.len() + 2048).next_multiple_of(1024);
    let mut b = Vec::with_capacity(format::PREAMBLE_LEN + reserved);
    b.extend_from_slice(&format::preamble(reserved as u32));
    b.extend_from_slice(&json);
    b.resize(format::PREAMBLE_LEN + reserved, b' ');
    fd.with(|fd| write_all(fd, &b, None))?;
    Ok(reserved as u32)
}

/// Replaces the header in place (same reserved length), e.g. once the clock is calibrated.
pub fn rewrite_header(fd: i32, h: &Header, reserved: u32) -> io::Result<()> {
    let mut json = serde_json::to_vec(h).map_err(io::Error::other)?;
    if json.len() > reserved as usize {
        return Err(io::Error::other("header grew past its reserved space"));
    }
    json.resize(reserved as usize, b' ');
    let mut off = format::PREAMBLE_LEN as i64;
    let mut rest = &json[..];
    while !rest.is_empty() {
        let n = unsafe { libc::pwrite(fd, rest.as_ptr() as *const libc::c_void, rest.len(), off) };
        if n <= 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        rest = &rest[n as usize..];
        off += n as i64;
    }
    Ok(())
}

/// Writes a log's frames, one per buffer: columnar (version 5), or one zstd frame of the
/// records as they are (a log of an older version, which recovery appends to).
pub struct LogWriter {
    fd: Arc<OwnFd>,
    comp: zstd::bulk::Compressor<'static>,
    /// The column encoder and its scratch space; None: row frames.
    columns: Option<Box<(crate::columns::Encoder, Vec<u8>)>>,
    /// `comp` is set up for row frames (checksum and content size in the zstd frame).
    comp_rows: bool,
    /// Write row frames for now even where columns could be written (see [`LogWriter::hurry`]).
    hurry: bool,
    out: Vec<u8>,
    pub bytes: u64,
    /// The descriptor's reopen count at the last write ([`OwnFd::reopens`]).
    seen_reopens: u32,
    pub frames: u64,
    pub records: u64,
    columnar: u64,
}

impl LogWriter {
    /// A writer of columnar frames (what this build's logs hold).
    pub fn new(fd: impl Into<Arc<OwnFd>>, level: i32) -> io::Result<LogWriter> {
        let mut comp = zstd::bulk::Compressor::new(level)?;
        // The body's CRC covers the columns; their lengths are in the body.
        comp.include_checksum(false)?;
        comp.include_contentsize(false)?;
        let mut w = Self::with(fd, comp);
        w.columns = Some(Box::new((crate::columns::Encoder::new(), Vec::new())));
        w.comp_rows = false;
        Ok(w)
    }

    /// A writer of row frames, as versions 1 to 4 hold them.
    pub fn rows(fd: impl Into<Arc<OwnFd>>, level: i32) -> io::Result<LogWriter> {
        let mut comp = zstd::bulk::Compressor::new(level)?;
        comp.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))?;
        comp.include_contentsize(true)?;
        Ok(Self::with(fd, comp))
    }

    fn with(fd: impl Into<Arc<OwnFd>>, comp: zstd::bulk::Compressor<'static>) -> LogWriter {
        LogWriter {
            fd: fd.into(),
            comp,
            columns: None,
            comp_rows: true,
            hurry: false,
            out: Vec::with_capacity(
                zstd::zstd_safe::compress_bound(crate::buffer::BUF_CAP) + format::FRAME_HEADER_LEN,
            ),
            bytes: 0,
            seen_reopens: 0,
            frames: 0,
            records: 0,
            columnar: 0,
        }
    }

    /// Frames go from `offset` on (a recovery appending to a log).
    pub fn start_at(&mut self, offset: u64) {
        self.bytes = offset;
        self.seen_reopens = u32::MAX;
    }

    /// Counts the header that [`write_header`] already put in the file.
    pub fn note_header(&mut self, reserved: u32) {
        self.bytes += (format::PREAMBLE_LEN as u32 + reserved) as u64;
    }

    /// Row frames (cheap to make: zstd alone, 5-20 ns per record) instead of columnar ones
    /// (35-50 ns more) while `on`: the recorder thread says so when full buffers wait for it,
    /// so that packing never makes the program wait for a free buffer. A reader takes either.
    pub fn hurry(&mut self, on: bool) {
        self.hurry = on;
    }

    /// Columnar frames written, of `frames`.
    pub fn columnar_frames(&self) -> u64 {
        self.columnar
    }

    /// Compresses `buf` into one frame and writes it with one write(2), at the end of what
    /// was written.
    pub fn write_buf(&mut self, buf: &Buf) -> io::Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let raw = buf.records();
        self.out.clear();
        self.out.resize(format::FRAME_HEADER_LEN, 0);
        // (A buffer's records always decode: they were written by Buf::push.)
        let columns = match &mut self.columns {
            Some(c) if !self.hurry => c.0.encode(raw, buf.first_ticks).is_ok().then_some(c),
            _ => None,
        };
        let columnar = columns.is_some();
        if columnar == self.comp_rows {
            // Row frames carry zstd's checksum and content size; columns have their CRC.
            self.comp.include_checksum(!columnar)?;
            self.comp.include_contentsize(!columnar)?;
            self.comp_rows = !columnar;
        }
        self.columnar += columnar as u64;
        let comp_len = if let Some(c) = columns {
            let (enc, scratch) = &mut **c;
            crate::columns::pack(&enc.cols, &mut self.comp, scratch, &mut self.out)?;
            self.out.len() - format::FRAME_HEADER_LEN
        } else {
            self.out.reserve(zstd::zstd_safe::compress_bound(raw.len()));
            // The compressed frame goes right after the room left for its header.
            let mut cur = std::io::Cursor::new(&mut self.out);
            cur.set_position(format::FRAME_HEADER_LEN as u64);
            self.comp.compress_to_buffer(raw, &mut cur)?
        };
        let fh = FrameHeader {
            columnar,
            stream: buf.stream,
            n_records: buf.n,
            raw_len: raw.len() as u32,
            comp_len: comp_len as u32,
            first_ticks: buf.first_ticks,
            last_ticks: buf.last_ticks,
        };
        self.out[..format::FRAME_HEADER_LEN].copy_from_slice(&fh.encode());
        let (out, at) = (&self.out, self.bytes);
        let (own, seen) = (&self.fd, &mut self.seen_reopens);
        let mut put = |fd: i32| {
            if !NO_PWRITE.load(Relaxed) {
                match write_all(fd, out, Some(at)) {
                    Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                        NO_PWRITE.store(true, Relaxed);
                        // The position is the header's end, not the log's: put it there.
                        *seen = u32::MAX;
                    }
                    r => return r,
                }
            }
            // A descriptor reopened since the last write (the program closed ours) starts
            // at 0: it is put where the log ends first.
            if own.reopens() != *seen {
                if unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_SET) } < 0 {
                    return Err(io::Error::last_os_error());
                }
                *seen = own.reopens();
            }
            write_all(fd, out, None)
        };
        // A number taken over between the check and the write (a raw dup2 of the program's):
        // nothing was written; checked again (reopened by path) and written once more.
        match own.with(&mut put) {
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ESPIPE | libc::EBADF | libc::EINVAL | libc::ENXIO)
                ) =>
            {
                own.with(&mut put)?
            }
            r => r?,
        }
        self.bytes += self.out.len() as u64;
        self.frames += 1;
        self.records += buf.n as u64;
        Ok(())
    }

    /// The file's descriptor (checked at each use: [`OwnFd::with`]); closed with the writer.
    pub fn fd(&self) -> &OwnFd {
        &self.fd
    }
}

#[cfg(test)]
mod window_tests {
    use super::window_pattern;
    #[test]
    fn window_names() {
        assert_eq!(window_pattern("shim.%e.%p.%n.shimlog", 3), "shim.%e.%p.3.shimlog");
        assert_eq!(window_pattern("/tmp/a.shimlog", 2), "/tmp/a.2.shimlog");
        assert_eq!(window_pattern("/tmp/a", 0), "/tmp/a.0");
        assert_eq!(window_pattern("/tmp/%%n-%n", 1), "/tmp/%%n-1");
    }
}
