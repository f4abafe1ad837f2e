//! A program's name as the user gave it: the name it was started with (argv[0]'s file name,
//! from the log header's command line), not the file the kernel resolved it to. Debian's
//! `redis-server` is a symlink to `redis-check-rdb`, `python3` to `python3.11`, `sh` to
//! `dash`: every verb names the program `redis-server`, with the resolved executable beside
//! it where the two differ. A header without a command line (none read) falls back to the
//! executable's file name.

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

/// The name the program was started with.
pub fn started(exe: &str, cmdline: &[String]) -> String {
    match cmdline.first().map(|a| file_name(a)).filter(|a| !a.is_empty()) {
        Some(a) => a.to_string(),
        None => file_name(exe).to_string(),
    }
}

/// The resolved executable, when its file name is not the name the program was started with.
pub fn resolved(exe: &str, cmdline: &[String]) -> Option<String> {
    (!exe.is_empty() && file_name(exe) != started(exe, cmdline)).then(|| exe.to_string())
}

/// The name as started, with the resolved executable beside it where they differ:
/// `redis-server (/usr/bin/redis-check-rdb)`.
pub fn shown(exe: &str, cmdline: &[String]) -> String {
    match resolved(exe, cmdline) {
        Some(e) => format!("{} ({e})", started(exe, cmdline)),
        None => started(exe, cmdline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn started_name_first() {
        let c = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let exe = "/usr/bin/redis-check-rdb";
        assert_eq!(started(exe, &c(&["redis-server", "--port", "0"])), "redis-server");
        assert_eq!(shown(exe, &c(&["/usr/bin/redis-server"])), "redis-server (/usr/bin/redis-check-rdb)");
        assert_eq!(shown(exe, &c(&["./redis-check-rdb"])), "redis-check-rdb");
        // An older header, or one whose command line could not be read.
        assert_eq!(shown(exe, &[]), "redis-check-rdb");
        assert_eq!(resolved("", &c(&["x"])), None);
    }
}
