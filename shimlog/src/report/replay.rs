//! `--replay`: each log replayed against every backend by `shimlog replay LOG --json` in a
//! child process of its own (the replay runs its backends in fresh processes anyway), its
//! JSON document kept as it is for the page.
use serde_json::Value;
use std::process::{Command, Stdio};

pub fn run(log: &str) -> Result<Value, String> {
    let exe = std::env::current_exe().map_err(|e| format!("report: cannot find shimlog itself: {e}"))?;
    let out = Command::new(exe)
        .args(["replay", log, "--json"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("report: cannot start the replay of {log}: {e}"))?;
    let doc: Value = serde_json::from_slice(&out.stdout).map_err(|_| {
        format!("report: the replay of {log} failed (exit status {})", out.status.code().unwrap_or(-1))
    })?;
    Ok(doc)
}
