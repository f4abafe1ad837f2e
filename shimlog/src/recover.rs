//! `shimlog recover LOG...`: puts what a dead process left in its in-flight file
//! (the in-flight file its header names) into its log. `stats`, `replay` and `dump` do the same on their own.
use recorder::recover::{recover, NotRecovered};

#[derive(clap::Args)]
pub struct Args {
    /// Logs whose process may have died without closing them.
    #[arg(required = true)]
    logs: Vec<String>,
}

pub fn run(a: Args) -> Result<i32, String> {
    let mut failed = 0;
    for log in &a.logs {
        if !std::path::Path::new(log).is_file() {
            eprintln!("shimlog: {log}: no such log");
            failed += 1;
            continue;
        }
        match recover(log) {
            Ok(done) if done.is_empty() => println!("{log}: nothing to recover (its in-flight buffers were all written)"),
            Ok(done) => done.iter().for_each(|r| println!("{}", crate::open::said(r).trim_start_matches("shimlog: "))),
            Err(NotRecovered::Nothing) => println!("{log}: nothing to recover (no in-flight file: closed cleanly, or recovered already)"),
            Err(NotRecovered::Running) => println!("{log}: its process is still running; nothing recovered"),
            Err(NotRecovered::Failed(m)) => {
                eprintln!("shimlog: {m}");
                failed += 1;
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
