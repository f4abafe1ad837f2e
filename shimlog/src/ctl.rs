//! `shimlog ctl PID start [DURATION] | stop | status`: drives the capture windows of a
//! running process whose shim opened its control socket (SHIM_CONTROL=1), in the
//! directory `$TMPDIR` (or /tmp) `/shim-UID` of the process's user.
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The process.
    pub pid: u32,
    /// `start [DURATION]` (a window now: 120s, 5m; until `stop` without one), `stop`, `status`.
    #[arg(num_args = 1..=2, required = true)]
    pub request: Vec<String>,
}

pub fn run(a: Args) -> Result<i32, String> {
    let uid = std::fs::metadata(format!("/proc/{}", a.pid))
        .map_err(|_| format!("ctl: no process {}", a.pid))?
        .uid();
    let base = std::env::var("TMPDIR").ok().filter(|t| t.starts_with('/')).unwrap_or_else(|| "/tmp".into());
    let path = format!("{}/shim-{uid}/ctl.{}", base.trim_end_matches('/'), a.pid);
    let mut s = UnixStream::connect(&path).map_err(|e| {
        format!(
            "ctl: cannot reach process {} at {path}: {e} (was it started with SHIM_CONTROL=1, by your user?)",
            a.pid
        )
    })?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    s.write_all(format!("{}\n", a.request.join(" ")).as_bytes()).map_err(|e| format!("ctl: {e}"))?;
    let mut reply = String::new();
    s.read_to_string(&mut reply).map_err(|e| format!("ctl: no reply: {e}"))?;
    let reply = reply.trim_end();
    if let Some(e) = reply.strip_prefix("error: ") {
        return Err(format!("ctl: {e}"));
    }
    println!("{reply}");
    Ok(0)
}
