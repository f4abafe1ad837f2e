//! A whole log file through LogReader: open (preamble, header, frame index with resync)
//! and the merged, decompressing iterator. Inputs are written to a file because the
//! reader reads frames where they lie. Starting from a real log in the corpus (see
//! fuzz/README.md) reaches the frame and record paths quickly.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("shimlog-fuzz-{}.shimlog", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(data).unwrap();
    }
    if let Ok(r) = recorder::LogReader::open(path.to_str().unwrap()) {
        let raw: u64 = r.frames.iter().map(|f| f.h.raw_len as u64).sum();
        let mut n = 0u64;
        let mut ev = r.events();
        for _ in &mut ev {
            n += 1;
            assert!(
                n <= raw / 2 + 1,
                "more records than the frames' bytes can hold"
            );
        }
        for i in r.issues.iter().chain(ev.issues.iter()) {
            let _ = i.to_string();
        }
    }
});
