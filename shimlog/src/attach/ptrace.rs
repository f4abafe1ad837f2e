//! Stopping every thread of a process with ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT, through
//! the `nix` crate), calling a function in one of them, and letting them all go.
//!
//! A call: the thread's registers are saved; the arguments go in rdi/rsi, the return address
//! on a stack 1 KiB below the thread's own (past the red zone) is 0, so that the function's
//! `ret` faults at address 0 and the thread stops with SIGSEGV there; rax is the result; the
//! saved registers are put back. `orig_rax` is set to -1 for the call, so that a thread
//! stopped inside a system call (sleeping in `futex`, `epoll_wait`) does not restart it
//! into the call; the saved registers, put back, restart it as the kernel would have.
use libc::user_regs_struct;
use nix::errno::Errno;
use nix::sys::ptrace;
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// A thread held in a ptrace stop.
pub struct Held {
    pub tid: Pid,
    pub regs: user_regs_struct,
    /// A signal that arrived for it while it was being stopped: given back at the end.
    pub pending: Option<Signal>,
}

/// Every thread of a process, stopped.
pub struct Stopped {
    pub threads: Vec<Held>,
    /// When the first thread was stopped.
    pub since: Instant,
}

/// Why the threads could not be stopped.
pub enum StopError {
    /// PTRACE_SEIZE refused with this errno (on the first thread: nothing was touched).
    Refused(Errno),
    Other(String),
}

fn tasks(pid: u32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| d.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Waits for `tid`'s next stop; Ok(None): the thread is gone.
fn wait_stop(tid: Pid) -> Result<Option<Option<Signal>>, String> {
    loop {
        match waitpid(tid, Some(WaitPidFlag::__WALL)) {
            Ok(WaitStatus::PtraceEvent(_, _, _)) => return Ok(Some(None)),
            Ok(WaitStatus::Stopped(_, sig)) => return Ok(Some(Some(sig))),
            Ok(WaitStatus::Exited(..)) | Ok(WaitStatus::Signaled(..)) => return Ok(None),
            Ok(_) => continue,
            Err(Errno::EINTR) => continue,
            Err(Errno::ECHILD) => return Ok(None),
            Err(e) => return Err(format!("waiting for thread {tid}: {e}")),
        }
    }
}

/// Seizes and stops every thread of `pid` (threads started meanwhile too).
pub fn stop_all(pid: u32) -> Result<Stopped, StopError> {
    let since = Instant::now();
    let mut st = Stopped { threads: Vec::new(), since };
    loop {
        let mut new = 0;
        for t in tasks(pid) {
            let tid = Pid::from_raw(t);
            if st.threads.iter().any(|h| h.tid == tid) {
                continue;
            }
            match ptrace::seize(tid, ptrace::Options::empty()) {
                Ok(()) => {}
                Err(Errno::ESRCH) => continue, // it ended
                Err(e) if st.threads.is_empty() => return Err(StopError::Refused(e)),
                Err(e) => {
                    st.resume();
                    return Err(StopError::Other(format!("PTRACE_SEIZE of thread {tid}: {e}")));
                }
            }
            new += 1;
            if let Err(e) = ptrace::interrupt(tid) {
                let _ = ptrace::detach(tid, None);
                if e == Errno::ESRCH {
                    continue;
                }
                st.resume();
                return Err(StopError::Other(format!("PTRACE_INTERRUPT of thread {tid}: {e}")));
            }
            match wait_stop(tid) {
                Ok(Some(pending)) => match ptrace::getregs(tid) {
                    Ok(regs) => st.threads.push(Held { tid, regs, pending }),
                    Err(e) => {
                        let _ = ptrace::detach(tid, pending);
                        st.resume();
                        return Err(StopError::Other(format!("reading thread {tid}'s registers: {e}")));
                    }
                },
                Ok(None) => {}
                Err(e) => {
                    st.resume();
                    return Err(StopError::Other(e));
                }
            }
        }
        if new == 0 {
            break;
        }
    }
    if st.threads.is_empty() {
        return Err(StopError::Other(format!("process {pid} has no thread left")));
    }
    Ok(st)
}

impl Stopped {
    /// Lets every thread go (detached, each with the signal it had pending).
    pub fn resume(&mut self) {
        for h in self.threads.drain(..) {
            let _ = ptrace::detach(h.tid, h.pending);
        }
    }

    /// Calls `func(args...)` in thread `i` and returns rax. The others stay stopped for
    /// `alone` at most; after that they are let go (one of them may hold a lock the call
    /// waits for) and the call has `limit` in all.
    pub fn call(
        &mut self,
        tid: Pid,
        func: u64,
        args: &[u64],
        alone: Duration,
        limit: Duration,
    ) -> Result<u64, String> {
        let i = self.threads.iter().position(|h| h.tid == tid).ok_or("no such thread held")?;
        let saved = self.threads[i].regs;
        let mut r = saved;
        let top = (saved.rsp - 1024) & !0xf;
        let ret_at = top - 8;
        ptrace::write(tid, ret_at as ptrace::AddressType, 0)
            .map_err(|e| format!("writing to thread {tid}'s stack: {e}"))?;
        r.rsp = ret_at;
        r.rip = func;
        r.rax = 0;
        r.orig_rax = u64::MAX;
        let regs = [&mut r.rdi, &mut r.rsi, &mut r.rdx, &mut r.rcx];
        for (reg, &a) in regs.into_iter().zip(args) {
            *reg = a;
        }
        ptrace::setregs(tid, r).map_err(|e| format!("setting thread {tid}'s registers: {e}"))?;
        ptrace::cont(tid, None).map_err(|e| format!("running thread {tid}: {e}"))?;
        let start = Instant::now();
        let mut others_running = false;
        let result = loop {
            match waitpid(tid, Some(WaitPidFlag::__WALL | WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::StillAlive) => {
                    let t = start.elapsed();
                    if !others_running && t > alone {
                        // Stopped threads may hold a lock the call waits for: let them go.
                        others_running = true;
                        let me = self.threads.remove(i);
                        self.resume();
                        self.threads.push(me);
                    } else if t > limit {
                        return Err(format!(
                            "the call in thread {tid} did not return within {} s; the process is left running",
                            limit.as_secs()
                        ));
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                Ok(WaitStatus::Stopped(_, Signal::SIGSEGV)) => {
                    let now = ptrace::getregs(tid).map_err(|e| format!("thread {tid}'s registers: {e}"))?;
                    if now.rip == 0 {
                        break now.rax;
                    }
                    // A fault of the program's own: the call crashed it. Deliver it as it would be.
                    let _ = ptrace::detach(tid, Signal::SIGSEGV);
                    return Err(format!("the call faulted at {:#x} in thread {tid}", now.rip));
                }
                Ok(WaitStatus::Stopped(_, sig)) => {
                    // A signal for the program: its handler runs on top of the call.
                    ptrace::cont(tid, sig).map_err(|e| format!("running thread {tid}: {e}"))?;
                }
                Ok(WaitStatus::PtraceEvent(..)) => {
                    ptrace::cont(tid, None).map_err(|e| format!("running thread {tid}: {e}"))?;
                }
                Ok(WaitStatus::Exited(..)) | Ok(WaitStatus::Signaled(..)) => {
                    self.threads.clear();
                    return Err("the process ended during the call".into());
                }
                Ok(_) | Err(Errno::EINTR) => {}
                Err(e) => return Err(format!("waiting for thread {tid}: {e}")),
            }
        };
        ptrace::setregs(tid, saved).map_err(|e| format!("restoring thread {tid}'s registers: {e}"))?;
        Ok(result)
    }

    /// The thread to call in: the main thread unless it had a signal pending.
    pub fn caller(&self, pid: u32) -> Pid {
        let ok = |h: &&Held| h.pending.is_none();
        self.threads
            .iter()
            .find(|h| h.tid.as_raw() as u32 == pid && ok(h))
            .or_else(|| self.threads.iter().find(ok))
            .unwrap_or(&self.threads[0])
            .tid
    }

    /// Writes `bytes` at `addr` in the process (as thread `tid` sees it).
    pub fn write(&self, tid: Pid, addr: u64, bytes: &[u8]) -> Result<(), String> {
        for (k, chunk) in bytes.chunks(8).enumerate() {
            let at = addr + 8 * k as u64;
            let mut word = [0u8; 8];
            if chunk.len() < 8 {
                let old = ptrace::read(tid, at as ptrace::AddressType)
                    .map_err(|e| format!("reading {at:#x}: {e}"))?;
                word = old.to_le_bytes();
            }
            word[..chunk.len()].copy_from_slice(chunk);
            ptrace::write(tid, at as ptrace::AddressType, i64::from_le_bytes(word))
                .map_err(|e| format!("writing {at:#x}: {e}"))?;
        }
        Ok(())
    }

    /// The C string at `addr` (at most `max` bytes).
    pub fn read_str(&self, tid: Pid, addr: u64, max: usize) -> String {
        let mut out = Vec::new();
        'words: for k in 0..max.div_ceil(8) {
            let Ok(w) = ptrace::read(tid, (addr + 8 * k as u64) as ptrace::AddressType) else { break };
            for b in w.to_le_bytes() {
                if b == 0 {
                    break 'words;
                }
                out.push(b);
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        self.resume();
    }
}
