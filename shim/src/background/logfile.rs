//! One log file as the recorder thread writes it: its frames' writer, the buffer of its
//! process records, and what to say when a write fails.
use crate::shared::{say, G, TPS_BITS};
use core::sync::atomic::Ordering::*;
use recorder::buffer::{Args, Buf};
use recorder::ownfd::OwnFd;
use recorder::writer::LogWriter;
use recorder::{clock, Op};
use std::sync::Arc;

pub struct LogFile {
    pub w: LogWriter,
    /// The process records gathered for this log: a buffer of the pool, so in the
    /// in-flight file like the threads' (given back when the file is dropped).
    own: *mut Buf,
    /// A write failed: nothing more goes to this file.
    pub failed: bool,
    pub path: String,
    reserved: u32,
    /// Window number (0: the watch log), None without windows.
    pub window: Option<u32>,
}

impl LogFile {
    /// Takes over `fd`, whose header (`reserved` bytes of JSON) is written already.
    pub fn new(
        fd: Arc<OwnFd>,
        path: String,
        reserved: u32,
        window: Option<u32>,
        level: i32,
    ) -> Option<LogFile> {
        let Ok(mut w) = LogWriter::new(fd, level) else {
            say("shim: cannot set up zstd; the program runs without recording");
            return None;
        };
        w.note_header(reserved);
        // SHIM_PACK=rows: zstd alone, for every frame of this log (the recorder thread
        // decides buffer by buffer otherwise).
        w.hurry(G.get().pack == crate::config::Pack::Rows);
        let Some(own) = G.get().pool.take_empty(0, true) else {
            say("shim: no buffer for the process records; the program runs without recording");
            return None;
        };
        unsafe { (*own).log = window.unwrap_or(0) };
        Some(LogFile { w, own, failed: false, path, reserved, window })
    }

    /// Creates window `n`'s log (0: the watch log) with its header; None, with one line on
    /// stderr, when it cannot be.
    pub fn create(n: u32) -> Option<LogFile> {
        let g = G.get();
        let (fd, path) = crate::init::open_log(g.log_pattern.as_deref(), Some(n))?;
        let tps = f64::from_bits(TPS_BITS.load(Relaxed));
        match recorder::writer::write_header(&fd, &crate::header::build_window(g, tps, Some(n))) {
            Ok(reserved) => LogFile::new(Arc::new(fd), path, reserved, Some(n), g.zstd_level),
            Err(e) => {
                say(&format!("shim: cannot write log {path}: {e}"));
                None
            }
        }
    }

    /// The clock rate is known: the header says it. False if the write failed.
    pub fn calibrated(&mut self, tps: f64) -> bool {
        if self.failed {
            return true;
        }
        let h = crate::header::build_window(G.get(), tps, self.window.or(G.get().windows.map(|_| 0)));
        let reserved = self.reserved;
        if let Err(e) = self.w.fd().with(|fd| recorder::writer::rewrite_header(fd, &h, reserved)) {
            self.fail(&e);
            return false;
        }
        true
    }

    /// The file ends at its last whole frame again (a full disk gets the partial frame's
    /// room back, for the watch log to say what happened).
    fn fail(&mut self, e: &std::io::Error) {
        self.failed = true;
        let bytes = self.w.bytes;
        // SAFETY: ftruncate on the log's own descriptor, checked by with().
        let _ = self.w.fd().with(|fd| Ok(unsafe { libc::ftruncate(fd, bytes as libc::off_t) }));
        let what = match self.window {
            None => "recording stopped",
            Some(0) => "the watch log stops",
            Some(_) => "the window closes, the program is watched on",
        };
        say(&format!("shim: writing log {} failed: {e}; {what}, the program continues", self.path));
    }

    /// Row frames rather than columnar ones while the recorder is behind (LogWriter::hurry).
    pub fn hurry(&mut self, on: bool) {
        self.w.hurry(on);
    }

    /// Writes one buffer as a frame. False if this write failed (said once on stderr).
    pub fn write(&mut self, b: &Buf) -> bool {
        if self.failed {
            return true;
        }
        if let Err(e) = self.w.write_buf(b) {
            self.fail(&e);
            return false;
        }
        true
    }

    /// Appends a process record.
    pub fn note(&mut self, op: Op, ticks: u64, value: u64) -> bool {
        self.note_full(op, ticks, 0, value, None)
    }

    /// Appends a process record with a `size` field and a backend time (watch records).
    pub fn note_full(&mut self, op: Op, ticks: u64, size: u64, value: u64, backend: Option<u64>) -> bool {
        let mut ok = true;
        if !unsafe { (*self.own).has_room() } {
            ok = self.flush_own();
        }
        let a = Args { size, value, ..Args::default() };
        unsafe { (*self.own).push(op, clock::to_log(ticks), &a, backend.map(clock::to_log)) };
        ok
    }

    /// Writes the process records gathered so far. False if the write failed.
    pub fn flush_own(&mut self) -> bool {
        // SAFETY: the pool's buffer is this file's alone until dropped.
        let own = unsafe { &mut *self.own };
        if own.is_empty() {
            return true;
        }
        let ok = self.write(own);
        // Written (or failed for good): the in-flight slot must not be recovered again.
        own.reset(0);
        ok
    }

    /// Bytes written to the file so far.
    pub fn bytes(&self) -> u64 {
        self.w.bytes
    }
}

impl Drop for LogFile {
    fn drop(&mut self) {
        G.get().pool.give_back(self.own);
    }
}
