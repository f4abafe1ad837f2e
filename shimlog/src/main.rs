//! `shimlog`: reads the logs libshim.so writes.
//!
//! - `shimlog dump LOG [--format text|jsonl|logalloc]`: one event per line.
//! - `shimlog stats LOG... [--json]`: what the workload did (see stats/).
//! - `shimlog replay LOG [--backend ..] [--json]`: the workload against each backend (see replay/).
//! - `shimlog recover LOG...`: a dead process's in-flight buffers into its log (recover.rs).
//! - `shimlog pprof LOG -o FILE [--at peak|end]`, `shimlog flamegraph LOG --by .. -o FILE`:
//!   the log's stacks as a pprof heap profile, as a flame graph (see analysis/sites/).
//! - `shimlog ctl PID start [DURATION] | stop | status`: a running process's windows (ctl.rs).
//! - `shimlog report LOG... [--replay] -o FILE`: one self-contained HTML page (see report/).
//! - `shimlog export LOG... -o DIR`: Parquet tables (see export/, docs/export.md).
//! - `shimlog record [OPTIONS] -- PROG [ARGS...]`, `shimlog run --backend NAME -- PROG`: a
//!   program under libshim.so, its logs in one new directory (record/).
//! - `shimlog generate man DIR | completions SHELL DIR` (hidden): for `make install` (generate.rs).
//! - `shimlog compare BASE... --vs CANDIDATE...`: two captures side by side, with intervals
//!   (see compare/, docs/compare.md).
use clap::{CommandFactory, Parser, Subcommand};

mod analysis;
mod attach;
mod compare;
mod ctl;
mod dump;
mod export;
mod flamegraph;
mod generate;
mod name;
mod open;
mod pprof;
mod record;
mod recover;
mod replay;
mod report;
mod stats;

#[derive(Parser)]
#[command(name = "shimlog", version, about = "Analyse and replay logs written by libshim.so")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print every event, one per line, in time order.
    Dump(dump::Args),
    /// Report what the captured workload did.
    Stats(stats::Args),
    /// Replay a captured workload against each backend and compare them.
    Replay(replay::Args),
    /// Put what a process that died left in its in-flight buffers into its log.
    Recover(recover::Args),
    /// Write the log's stacks as a pprof heap profile (gzipped profile.proto).
    Pprof(pprof::Args),
    /// Draw the log's stacks as a flame graph (SVG).
    Flamegraph(flamegraph::Args),
    /// Start or stop a capture window in a running process (SHIM_CONTROL=1), or ask its state.
    Ctl(ctl::Args),
    /// Load the shim into a running process (ptrace) and start recording it.
    Attach(attach::Args),
    /// Write one self-contained HTML page of what stats (and --replay) found.
    Report(report::Args),
    /// Write the logs as Parquet tables (docs/export.md).
    Export(export::Args),
    /// Run a program under libshim.so, its logs (every process of its tree) in one new directory.
    Record(record::Args),
    /// Run a program on another allocator (SHIM_BACKEND), nothing recorded.
    Run(record::RunArgs),
    /// Write the man pages or a shell's completions (for make install).
    #[command(hide = true)]
    Generate(generate::Args),
    /// Compare two captures (or groups of them): each metric's change with an interval.
    Compare(compare::Args),
}

fn main() {
    // A closed pipe (shimlog dump | head) ends the program quietly.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Dump(a) => dump::run(a),
        Cmd::Stats(a) => stats::run(a),
        Cmd::Replay(a) => replay::run(a),
        Cmd::Ctl(a) => ctl::run(a),
        Cmd::Attach(a) => attach::run(a),
        Cmd::Recover(a) => recover::run(a),
        Cmd::Report(a) => report::run(a),
        Cmd::Export(a) => export::run(a),
        Cmd::Compare(a) => compare::run(a),
        Cmd::Pprof(a) => pprof::run(a),
        Cmd::Flamegraph(a) => flamegraph::run(a),
        Cmd::Record(a) => record::record(a),
        Cmd::Run(a) => record::run(a),
        Cmd::Generate(a) => generate::run(a, Cli::command()),
    };
    match r {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("shimlog: {e}");
            std::process::exit(1);
        }
    }
}
