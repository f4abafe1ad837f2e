//! `shimlog recover LOG...`: puts what a dead process left in its in-flight file
//! (the in-flight file its header names) into its log. `stats`, `replay` and `dump` do the same on their own.
//! `shimlog recover --all`: every dead process's in-flight file in the user's in-flight
//! directory (`$SHIM_INFLIGHT_DIR`, else /dev/shm, `/shim-UID`), as each shim process does
//! for a few at its start (recorder::reclaim): recovered into its log, or removed when its
//! log is gone or cannot be written.
use recorder::reclaim::{self, Outcome};
use recorder::recover::{recover, NotRecovered};

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["logs", "all"])))]
pub struct Args {
    /// Logs whose process may have died without closing them.
    logs: Vec<String>,
    /// Every dead process's in-flight file in the user's in-flight directory (for a host where
    /// no process under the shim starts again to do it).
    #[arg(long, conflicts_with = "logs")]
    all: bool,
}

pub fn run(a: Args) -> Result<i32, String> {
    if a.all {
        return all();
    }
    let mut failed = 0;
    for log in &a.logs {
        if !std::path::Path::new(log).is_file() {
            eprintln!("shimlog: {log}: no such log");
            failed += 1;
            continue;
        }
        match recover(log) {
            Ok(done) if done.is_empty() => {
                println!("{log}: nothing to recover (its in-flight buffers were all written)")
            }
            Ok(done) => {
                done.iter().for_each(|r| println!("{}", crate::open::said(r).trim_start_matches("shimlog: ")))
            }
            Err(NotRecovered::Nothing) => println!(
                "{log}: nothing to recover (no in-flight file: closed cleanly, or recovered already)"
            ),
            Err(NotRecovered::Running) => println!("{log}: its process is still running; nothing recovered"),
            Err(NotRecovered::Failed(m) | NotRecovered::Untouched(m)) => {
                eprintln!("shimlog: {m}");
                failed += 1;
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

/// `--all`: one line per dead file (recovered, removed, or left and why), then the total.
fn all() -> Result<i32, String> {
    let dir = recorder::inflight::user_dir(&recorder::inflight::base_from_env());
    let (dead, _) = reclaim::plan(&dir, 0, usize::MAX, usize::MAX).map_err(|e| format!("{dir}: {e}"))?;
    let (mut recovered, mut removed, mut left, mut freed) = (0, 0, 0, 0u64);
    for e in &dead {
        let o = reclaim::reclaim(&e.path);
        match &o {
            Outcome::Recovered(_) => (recovered, freed) = (recovered + 1, freed + e.bytes),
            Outcome::Removed { .. } => (removed, freed) = (removed + 1, freed + e.bytes),
            Outcome::Left(_) => left += 1,
        }
        println!("{}", reclaim::said("shimlog", &e.path, &o).trim_start_matches("shimlog: "));
    }
    let live = reclaim::list(&dir).map(|v| v.len()).unwrap_or(0);
    println!(
        "{dir}: {recovered} recovered, {removed} removed, {left} left; {:.1} MiB freed; {live} in-flight files remain (processes still running{})",
        freed as f64 / (1 << 20) as f64,
        if left > 0 { ", or left as said" } else { "" }
    );
    Ok(0)
}
