//! `shimlog generate man DIR` and `shimlog generate completions SHELL DIR` (a hidden verb):
//! the man pages (one per verb: shimlog.1, shimlog-record.1, ...) and the shell completion
//! scripts, made from the clap definitions themselves so that they never drift from the
//! program. `make install` and `make dist` call it to fill share/.
use clap_complete::Shell;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(clap::Subcommand)]
enum What {
    /// Write one man page per verb into DIR (shimlog.1, shimlog-record.1, ...).
    Man { dir: PathBuf },
    /// Write SHELL's completion script into DIR, under the name SHELL looks for
    /// (bash: shimlog, zsh: _shimlog, fish: shimlog.fish).
    Completions { shell: Shell, dir: PathBuf },
}

pub fn run(a: Args, cmd: clap::Command) -> Result<i32, String> {
    match a.what {
        What::Man { dir } => {
            made(&dir)?;
            clap_mangen::generate_to(cmd, &dir)
                .map_err(|e| format!("generate man: {}: {e}", dir.display()))?;
        }
        What::Completions { shell, dir } => {
            made(&dir)?;
            let name = match shell {
                Shell::Bash => "shimlog".to_string(),
                Shell::Zsh => "_shimlog".to_string(),
                Shell::Fish => "shimlog.fish".to_string(),
                s => clap_complete::Generator::file_name(&s, "shimlog"),
            };
            let path = dir.join(name);
            let mut f = std::fs::File::create(&path)
                .map_err(|e| format!("generate completions: {}: {e}", path.display()))?;
            clap_complete::generate(shell, &mut cmd.clone(), "shimlog", &mut f);
        }
    }
    Ok(0)
}

fn made(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("generate: cannot create {}: {e}", dir.display()))
}
