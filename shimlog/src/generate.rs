//! `shimlog generate man DIR` and `shimlog generate completions SHELL DIR` (a hidden verb):
//! the man pages (one per verb: shimlog.1, shimlog-record.1, ...) and the shell completion
//! scripts, made from the clap definitions themselves so that they never drift from the
//! program. `make install` and `make dist` call it to fill share/.
//!
//! `shimlog generate configuration docs/configuration.md`: that page's table and details of
//! the settings, made from the settings table (`shim_config::SETTINGS`); a test fails when
//! the page differs. `shimlog generate backends`: the backends' names, one a line (for
//! bench/).
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
    /// Rewrite the parts of FILE (docs/configuration.md) made from the settings table.
    Configuration { file: PathBuf },
    /// Print the backends' names, one a line.
    Backends,
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
        What::Configuration { file } => {
            let old = std::fs::read_to_string(&file)
                .map_err(|e| format!("generate configuration: {}: {e}", file.display()))?;
            let new = configuration(&old)
                .map_err(|e| format!("generate configuration: {}: {e}", file.display()))?;
            if new != old {
                std::fs::write(&file, new)
                    .map_err(|e| format!("generate configuration: {}: {e}", file.display()))?;
            }
        }
        What::Backends => {
            for b in shim_config::BACKENDS {
                println!("{b}");
            }
        }
    }
    Ok(0)
}

/// The page `doc` (docs/configuration.md) with its parts between the marker lines made anew
/// from the settings table: the table (one line a setting) and the details (one paragraph
/// each). The rest of the page is written by hand.
pub fn configuration(doc: &str) -> Result<String, String> {
    let cell = |s: &str| if s.is_empty() { " ".to_string() } else { format!(" {s} ") };
    let mut table = String::from("| variable | values | default | what it does |\n|---|---|---|---|\n");
    let mut details = String::new();
    for st in shim_config::SETTINGS {
        let row = [format!("`{}`", st.var).as_str(), st.values, st.default, st.line].map(cell).join("|");
        table += &format!("|{row}|\n");
        details += &format!("### `{}`\n\n{}\n\n", st.var, st.details);
    }
    let doc = between(doc, "the table of the settings", &table)?;
    between(&doc, "the details of the settings", &details)
}

/// `doc` with what lies between the line `<!-- WHAT: ... -->` and the line
/// `<!-- end of WHAT -->` replaced by `with`.
fn between(doc: &str, what: &str, with: &str) -> Result<String, String> {
    let begin = format!("<!-- {what}: ");
    let end = format!("<!-- end of {what} -->\n");
    let b = doc.find(&begin).ok_or(format!("no line {begin}... -->"))?;
    let b = b + doc[b..].find('\n').ok_or("no end of line")? + 1;
    let e = doc[b..].find(&end).ok_or(format!("no line {}", end.trim()))? + b;
    Ok(format!("{}{with}{}", &doc[..b], &doc[e..]))
}

fn made(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("generate: cannot create {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    /// docs/configuration.md is the settings table's: run
    /// `shimlog generate configuration docs/configuration.md` after changing the table.
    #[test]
    fn configuration_page_is_made_from_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/configuration.md");
        let doc = std::fs::read_to_string(path).unwrap();
        let made = super::configuration(&doc).unwrap();
        if made != doc {
            let line = doc.lines().zip(made.lines()).position(|(a, b)| a != b).unwrap_or(0) + 1;
            panic!(
                "docs/configuration.md differs from the settings table (config/src/lib.rs) from line {line}: \
                 run `shimlog generate configuration docs/configuration.md`"
            );
        }
        // The markers are where the page says they are.
        assert!(super::configuration("no markers").is_err());
    }
}
