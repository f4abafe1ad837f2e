//! The log file mapped read-only, its pages populated ahead of the reader and released
//! behind it.
use std::fs::File;

/// The log file mapped read-only, so that frame bodies are decompressed from the page cache
/// without a copy into a buffer first. (A log is only ever appended to and rewritten in
/// place, never truncated, while a reader may have it mapped.)
pub(super) struct Mapped {
    pub(super) ptr: *const u8,
    pub(super) len: usize,
}

// SAFETY: a read-only mapping, shared like a &[u8].
unsafe impl Send for Mapped {}
unsafe impl Sync for Mapped {}

impl Mapped {
    pub(super) fn of(file: &File, len: u64) -> Option<Mapped> {
        use std::os::fd::AsRawFd;
        let len = usize::try_from(len).ok().filter(|&l| l > 0)?;
        // SAFETY: a new private read-only mapping of an open file; checked for failure.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0)
        };
        (p != libc::MAP_FAILED).then_some(Mapped { ptr: p as *const u8, len })
    }

    pub(super) fn bytes(&self) -> &[u8] {
        // SAFETY: the mapping holds len readable bytes for the life of self.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Unmaps the whole pages of bytes `from..to` from this process (they stay in the page
    /// cache, and reading them again maps them again), so that the reader's resident memory
    /// does not grow with the log.
    pub(super) fn release(&self, from: u64, to: u64) {
        let page = page_size();
        let (start, end) = (from / page * page, to.min(self.len as u64) / page * page);
        // MADV_DONTNEED on a private read-only file mapping only drops the process's page
        // table entries.
        self.advise(start, end, libc::MADV_DONTNEED);
    }

    /// Maps the pages of bytes `from..to` in one call (MADV_POPULATE_READ, Linux 5.14 and
    /// later; where it fails, the pages are faulted in as they are read, as before).
    pub(super) fn populate(&self, from: u64, to: u64) {
        let start = from / page_size() * page_size();
        self.advise(start, to.min(self.len as u64), libc::MADV_POPULATE_READ);
    }

    /// Gives the kernel `advice` on bytes `start..end` of the mapping (`start` on a page).
    pub(super) fn advise(&self, start: u64, end: u64, advice: libc::c_int) {
        if start < end {
            // SAFETY: a range inside the mapping (end <= len); the advice given here only
            // drops or makes page table entries of a read-only file mapping.
            unsafe {
                libc::madvise(
                    self.ptr.add(start as usize) as *mut libc::c_void,
                    (end - start) as usize,
                    advice,
                )
            };
        }
    }
}

pub(super) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64
}

/// How far ahead of the first frame still to be read the mapping is populated.
pub(super) const POPULATE_AHEAD: u64 = 2 << 20;

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: mapped in `of` with this length.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}
