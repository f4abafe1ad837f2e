//! Opening logs for the subcommands, with the one-line errors users see. A log whose
//! process died without closing it is recovered first (its in-flight buffers put in).
use recorder::recover::{recover, NotRecovered};
use recorder::LogReader;

/// Opens a log or returns a one-line message naming what is wrong.
pub fn open(path: &str) -> Result<LogReader, String> {
    match recover(path) {
        Ok(done) => {
            for r in done {
                eprintln!("{}", said(&r));
            }
        }
        Err(NotRecovered::Failed(m) | NotRecovered::Untouched(m)) => {
            eprintln!("shimlog: recovery failed: {m}; reading the log as it is")
        }
        Err(NotRecovered::Nothing | NotRecovered::Running) => {}
    }
    LogReader::open(path).map_err(|e| e.to_string())
}

/// The line that says what recovery did to one log.
pub fn said(r: &recorder::recover::Recovered) -> String {
    format!(
        "shimlog: {}: its process died without closing it; {} records in {} frames recovered from its in-flight buffers{}",
        r.log,
        r.records,
        r.frames,
        if r.rate_estimated { " (clock rate taken from the in-flight file's notes)" } else { "" }
    )
}
