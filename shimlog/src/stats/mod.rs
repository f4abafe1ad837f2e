//! `shimlog stats`.
#[derive(clap::Args)]
pub struct Args {
    /// Logs to analyse (a parent and its children: one section each, then the total).
    #[arg(required = true)]
    pub logs: Vec<String>,
    /// One JSON document instead of the human report.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_a: Args) -> Result<i32, String> {
    Err("stats: not built yet".into())
}
