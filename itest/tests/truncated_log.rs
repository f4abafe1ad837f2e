//! A real log (the demo workload, two threads) cut off at many offsets still opens and
//! decodes up to its last whole frame: exactly the frames that end before the cut, each
//! stream's events a prefix of what the whole log holds, the cut reported as truncation at
//! the partial frame's offset. Cut inside the preamble or header, it fails to open with a
//! one-line error rather than a panic.
use itest::*;
use recorder::{Event, LogReader, ReadIssue};
use std::collections::HashMap;

fn by_stream(r: &LogReader) -> (HashMap<u32, Vec<Event>>, Vec<String>) {
    let mut m: HashMap<u32, Vec<Event>> = HashMap::new();
    let mut ev = r.events();
    for e in &mut ev {
        m.entry(e.stream).or_default().push(e);
    }
    (m, ev.issues.iter().map(|i| i.to_string()).collect())
}

#[test]
fn truncated_log_decodes_up_to_its_last_whole_frame() {
    let t = run_traced("glibc", || {
        let mut c = command(cprog("demo"));
        c.args(["2", "20000"]);
        c
    });
    t.out.assert_success("demo 2 20000");
    let log = t.only_log();
    let bytes = std::fs::read(&log).unwrap();
    let full = LogReader::open(log.to_str().unwrap()).unwrap();
    assert!(full.issues.is_empty(), "{:?}", full.issues);
    assert!(full.frames.len() >= 6, "want a log of several frames, got {}", full.frames.len());
    let (full_events, full_issues) = by_stream(&full);
    assert!(full_issues.is_empty(), "{full_issues:?}");
    let hlen = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    let data_start = recorder::format::PREAMBLE_LEN + hlen;
    let frame_end = |i: usize| {
        let f = &full.frames[i];
        (f.offset + recorder::format::FRAME_HEADER_LEN as u64 + f.h.comp_len as u64) as usize
    };

    // Cuts: every frame boundary and its neighbours, the header region, and a spread of
    // pseudo-random offsets.
    let mut cuts = vec![0, 1, 8, 15, 16, data_start - 1, data_start, data_start + 1, bytes.len() - 1];
    for i in 0..full.frames.len() {
        let (s, e) = (full.frames[i].offset as usize, frame_end(i));
        cuts.extend([s + 1, s + 20, s + 40, s + 41, e - 1, e]);
    }
    let mut x: u64 = 0x2545f4914f6cdd1d;
    for _ in 0..120 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cuts.push((x % bytes.len() as u64) as usize);
    }
    cuts.sort();
    cuts.dedup();

    let dir = tempfile::tempdir().unwrap();
    let cut_path = dir.path().join("cut.shimlog");
    let cut_str = cut_path.to_str().unwrap();
    for &cut in &cuts {
        std::fs::write(&cut_path, &bytes[..cut]).unwrap();
        if cut < data_start {
            match LogReader::open(cut_str) {
                Err(e) => {
                    let msg = e.to_string();
                    assert!(
                        !msg.is_empty() && !msg.contains('\n'),
                        "cut at {cut}: error is not one line: {msg:?}"
                    );
                }
                Ok(_) => panic!("cut at {cut} (inside the header, which ends at {data_start}) opened"),
            }
            continue;
        }
        let r = LogReader::open(cut_str).unwrap_or_else(|e| panic!("cut at {cut}: does not open: {e}"));
        let whole = (0..full.frames.len()).take_while(|&i| frame_end(i) <= cut).count();
        assert_eq!(r.frames.len(), whole, "cut at {cut}: frames indexed");
        let at_boundary = cut == data_start || (whole > 0 && frame_end(whole - 1) == cut);
        if at_boundary {
            assert!(r.issues.is_empty(), "cut at a frame boundary ({cut}): {:?}", r.issues);
        } else {
            assert_eq!(
                r.issues,
                vec![ReadIssue::Truncated { offset: full.frames[whole].offset }],
                "cut at {cut}: want truncation reported at the partial frame"
            );
        }
        let (events, issues) = by_stream(&r);
        assert!(issues.is_empty(), "cut at {cut}: decode issues {issues:?}");
        let mut want_count: HashMap<u32, usize> = HashMap::new();
        for f in &full.frames[..whole] {
            *want_count.entry(f.h.stream).or_default() += f.h.n_records as usize;
        }
        for (s, n) in &want_count {
            let got = events.get(s).map(Vec::as_slice).unwrap_or(&[]);
            assert_eq!(got.len(), *n, "cut at {cut}: stream {s} events");
            assert!(
                got == &full_events[s][..*n],
                "cut at {cut}: stream {s} is not a prefix of the whole log's"
            );
        }
        assert!(
            events.keys().all(|s| want_count.contains_key(s)),
            "cut at {cut}: events of a stream with no whole frame"
        );
    }
}
