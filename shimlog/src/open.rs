//! Opening logs for the subcommands, with the one-line errors users see.
use recorder::LogReader;

/// Opens a log or returns a one-line message naming what is wrong.
pub fn open(path: &str) -> Result<LogReader, String> {
    LogReader::open(path).map_err(|e| e.to_string())
}
