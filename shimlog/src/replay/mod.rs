//! `shimlog replay`.
#[derive(clap::Args)]
pub struct Args {
    /// The log to replay.
    pub log: String,
}

pub fn run(_a: Args) -> Result<i32, String> {
    Err("replay: not built yet".into())
}
