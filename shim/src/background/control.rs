//! The control socket (SHIM_CONTROL=1): `shimlog ctl PID start [DURATION] | stop | status`.
//!
//! A unix stream socket `ctl.PID` in a directory of the process's own, `$TMPDIR` (or /tmp)
//! `/shim-UID`, mode 0700, checked to be the owner's and not a symlink; the socket itself
//! mode 0600. Each connection's peer is checked with SO_PEERCRED: only the process's own
//! user (or root) may drive it. Polled by the recorder thread on its ticks, never blocking:
//! one request line, one reply line, then the connection is closed.
use crate::shared::say;
use recorder::ownfd::OwnFd;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::io::{AsRawFd, FromRawFd, IntoRawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

/// What a client asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Request {
    /// Open a window now, for this many ns (u64::MAX: until stopped).
    Start(u64),
    Stop,
    Status,
}

pub struct Control {
    /// The listening socket, one of the shim's own descriptors: never an accept on a number
    /// the program closed and reused (a socket cannot be reopened by path: then no more
    /// connections are served).
    listener: OwnFd,
    path: String,
}

/// The socket's directory for user `uid`.
pub fn dir(uid: u32) -> String {
    let base = std::env::var("TMPDIR").ok().filter(|t| t.starts_with('/')).unwrap_or_else(|| "/tmp".into());
    format!("{}/shim-{uid}", base.trim_end_matches('/'))
}

impl Control {
    /// Opens the socket; None, with one line on stderr, when it cannot be made safely.
    pub fn open() -> Option<Control> {
        let uid = unsafe { libc::geteuid() };
        let d = dir(uid);
        let _ = std::fs::DirBuilder::new().mode(0o700).create(&d);
        match std::fs::symlink_metadata(&d) {
            Ok(m) if m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0 => {}
            _ => {
                say(&format!("shim: {d} is not a private directory of this user; no control socket"));
                return None;
            }
        }
        let path = format!("{d}/ctl.{}", unsafe { libc::getpid() });
        let _ = std::fs::remove_file(&path);
        let listener = match UnixListener::bind(&path) {
            Ok(l) => l,
            Err(e) => {
                say(&format!("shim: cannot open the control socket {path}: {e}"));
                return None;
            }
        };
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
        if listener.set_nonblocking(true).is_err() {
            return None;
        }
        let listener = OwnFd::adopt(listener.into_raw_fd(), &path, libc::O_RDONLY).ok()?;
        Some(Control { listener, path })
    }

    /// Serves the connections waiting now; `answer` turns a request into the reply line.
    pub fn poll(&self, mut answer: impl FnMut(Request) -> String) {
        // SAFETY: accept4 on the listening socket, checked ours; the new descriptor is
        // owned by the UnixStream.
        let accept = || {
            self.listener.with(|fd| {
                match unsafe {
                    libc::accept4(fd, core::ptr::null_mut(), core::ptr::null_mut(), libc::SOCK_CLOEXEC)
                } {
                    c if c >= 0 => Ok(unsafe { UnixStream::from_raw_fd(c) }),
                    _ => Err(std::io::Error::last_os_error()),
                }
            })
        };
        while let Ok(mut s) = accept() {
            let reply = match peer_allowed(&s) {
                false => "error: not allowed (another user)".to_string(),
                true => match read_line(&mut s) {
                    Some(line) => match parse(&line) {
                        Some(r) => answer(r),
                        None => format!("error: unknown request {line:?} (start [DURATION], stop, status)"),
                    },
                    None => "error: no request".to_string(),
                },
            };
            let _ = s.write_all(format!("{reply}\n").as_bytes());
        }
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The peer is this process's user, or root.
fn peer_allowed(s: &UnixStream) -> bool {
    let mut cred = libc::ucred { pid: 0, uid: u32::MAX, gid: 0 };
    let mut len = core::mem::size_of::<libc::ucred>() as libc::socklen_t;
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            &mut cred as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    rc == 0 && (cred.uid == unsafe { libc::geteuid() } || cred.uid == 0)
}

fn read_line(s: &mut UnixStream) -> Option<String> {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let mut buf = [0u8; 128];
    let mut n = 0;
    while n < buf.len() {
        match s.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => {
                n += k;
                if buf[..n].contains(&b'\n') {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    let line = String::from_utf8_lossy(&buf[..n]);
    let line = line.lines().next()?.trim().to_string();
    (!line.is_empty()).then_some(line)
}

/// `start [DURATION]`, `stop`, `status`.
pub fn parse(line: &str) -> Option<Request> {
    let mut w = line.split_whitespace();
    let r = match w.next()? {
        "start" => match w.next() {
            None => Request::Start(u64::MAX),
            Some(d) => Request::Start(crate::config::parse_duration(d.as_bytes()).filter(|&d| d > 0)?),
        },
        "stop" => Request::Stop,
        "status" => Request::Status,
        _ => return None,
    };
    w.next().is_none().then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn requests() {
        assert_eq!(parse("start"), Some(Request::Start(u64::MAX)));
        assert_eq!(parse("start 120s"), Some(Request::Start(120_000_000_000)));
        assert_eq!(parse("stop"), Some(Request::Stop));
        assert_eq!(parse(" status "), Some(Request::Status));
        assert_eq!(parse("start soon"), None);
        assert_eq!(parse("stop now"), None);
        assert_eq!(parse("reboot"), None);
    }
}
