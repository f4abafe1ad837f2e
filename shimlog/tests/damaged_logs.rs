//! `shimlog stats` on damaged input: a log cut off inside a frame, a corrupt frame, a file
//! that is no log at all; each reported where it is, the rest of the log still read.
mod synth;

use synth::{dir, header, shimlog, stats_json, u, Log};

/// One thread's 100,000 mallocs: several full frames of its stream before the last ones.
fn many_frames(path: &str) -> String {
    let mut l = Log::create(path, &header(9, 0));
    for i in 0..100_000u64 {
        l.malloc(1, 1000 + i * 10, 64, 0x10_0000 + i * 64);
    }
    let p = l.finish(true);
    assert!(recorder::LogReader::open(&p).unwrap().frames.len() >= 4, "the log needs several frames");
    p
}

#[test]
fn a_cut_log_reports_where_it_was_cut() {
    let d = dir("cut");
    let full = many_frames(&format!("{d}/full.shimlog"));
    let bytes = std::fs::read(&full).unwrap();
    let r = recorder::LogReader::open(&full).unwrap();
    // Cut in the middle of the second frame (both first frames are the thread's).
    let f = r.frames[1];
    assert_eq!((r.frames[0].h.stream, f.h.stream), (1, 1));
    let second = f.offset;
    let cut = format!("{d}/cut.shimlog");
    std::fs::write(&cut, &bytes[..(second + 40 + f.h.comp_len as u64 / 2) as usize]).unwrap();
    let j = stats_json(&[&cut]);
    let issues = j["read"]["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0]["kind"], "truncated");
    assert_eq!(u(&issues[0]["offset"]), second);
    assert_eq!(j["read"]["clean_end"], false);
    assert_eq!(
        u(&j["ops"]["malloc"]),
        r.frames[0].h.n_records as u64 - 1,
        "the first frame, less its ThreadStart"
    );
    let o = shimlog(&["stats", &cut]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains(&format!("warning: log is cut off inside the frame at byte {second}")), "{out}");
}

#[test]
fn a_corrupt_frame_is_reported_and_skipped() {
    let d = dir("corrupt");
    let full = many_frames(&format!("{d}/full.shimlog"));
    let mut bytes = std::fs::read(&full).unwrap();
    let r = recorder::LogReader::open(&full).unwrap();
    let f = r.frames[1];
    // Garble the middle of the second frame's compressed body (its header stays valid).
    let mid = (f.offset + 40 + f.h.comp_len as u64 / 2) as usize;
    for b in &mut bytes[mid..mid + 16] {
        *b ^= 0x5a;
    }
    let bad = format!("{d}/bad.shimlog");
    std::fs::write(&bad, &bytes).unwrap();
    let j = stats_json(&[&bad]);
    let issues = j["read"]["issues"].as_array().unwrap();
    assert_eq!(issues.len(), 1, "{issues:?}");
    assert_eq!(issues[0]["kind"], "corrupt_frame");
    assert_eq!(u(&issues[0]["offset"]), f.offset);
    let total: u64 = r.frames.iter().map(|f| f.h.n_records as u64).sum();
    assert_eq!(u(&j["events"]), total - f.h.n_records as u64, "every other frame was read");
    let out = String::from_utf8(shimlog(&["stats", &bad]).stdout).unwrap();
    assert!(out.contains(&format!("warning: corrupt frame at byte {}", f.offset)), "{out}");
}

#[test]
fn a_file_that_is_not_a_log_is_one_line_and_a_failure() {
    let d = dir("notalog");
    let p = format!("{d}/notes.txt");
    std::fs::write(&p, "just some text, long enough to have a preamble\n").unwrap();
    for args in [vec!["stats", p.as_str()], vec!["stats", "--json", p.as_str()]] {
        let o = shimlog(&args);
        assert!(!o.status.success());
        assert!(o.stdout.is_empty());
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("not a shim log") && err.contains(&p), "{err}");
    }
    let o = shimlog(&["stats", &format!("{d}/missing.shimlog")]);
    assert!(!o.status.success());
    assert!(String::from_utf8(o.stderr).unwrap().contains("No such file"));
}
