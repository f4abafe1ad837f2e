//! How the process behind a log ended, from the last records of its process stream: the
//! exit status of a clean close, or what recovery found after it died.
use crate::buffer::RawRecord;
use crate::event::{exit_how, exit_how_name, recovered_end_name, Op};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum Ending {
    /// Closed cleanly by exit() (or a return from main), _exit() or an exec, with the status.
    Exit { call: &'static str, status: u64 },
    /// Closed cleanly, the status unknown (a log of format version 3 or older).
    Closed,
    /// The process died without closing its log and recovery put its in-flight buffers in:
    /// `end` says what is known of why (killed by a signal, SIGKILL, the OOM killer; or
    /// abort()).
    Recovered { end: &'static str, records: u64 },
    /// No end record and nothing recovered: the process is still running, or it died and
    /// its in-flight file is gone (or it had none).
    NoEnd,
}

impl Ending {
    /// From the process stream's last records, in order.
    pub fn from_records<'a>(recs: impl IntoIterator<Item = &'a RawRecord>) -> Ending {
        let mut e = Ending::NoEnd;
        let mut exit = None;
        for r in recs {
            match r.op {
                Op::Exit => exit = Some((r.args.size, r.args.value)),
                Op::End => {
                    e = match exit {
                        Some((how, status)) => Ending::Exit { call: exit_how_name(how), status },
                        None => Ending::Closed,
                    }
                }
                Op::Recovered => {
                    e = Ending::Recovered { end: recovered_end_name(r.args.size), records: r.args.value }
                }
                _ => {}
            }
        }
        e
    }

    /// True when the log was closed by the process itself.
    pub fn clean(&self) -> bool {
        matches!(self, Ending::Exit { .. } | Ending::Closed)
    }
}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Ending::Exit { call, .. } if call == exit_how_name(exit_how::EXEC) => {
                write!(f, "exec (the new program writes its own log)")
            }
            Ending::Exit { call, status } => write!(f, "{call}({status}): exit status {status}"),
            Ending::Closed => write!(f, "closed cleanly (exit status not recorded)"),
            Ending::Recovered { end, records } => {
                write!(f, "{end}; {records} records recovered from its in-flight buffers")
            }
            Ending::NoEnd => write!(f, "no end record: still running, or killed with nothing to recover"),
        }
    }
}
