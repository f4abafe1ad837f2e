//! Rewrites a log with every frame as rows or every frame as columns (format version 5),
//! the same records in the same frames: for comparing the reader on both kinds of frame
//! side by side (a log the shim writes at full speed mixes them).
//!
//!     cargo run --release -p recorder --example repack -- rows|columns IN OUT
use recorder::buffer::Buf;
use recorder::writer::{create_log, write_header, LogWriter};
use recorder::LogReader;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 3 || !matches!(a[0].as_str(), "rows" | "columns") {
        eprintln!("usage: repack rows|columns IN OUT");
        std::process::exit(2);
    }
    let r = LogReader::open(&a[1]).unwrap_or_else(|e| panic!("{e}"));
    let (fd, _) = create_log(&a[2]).expect("create the output log");
    let mut h = r.header.clone();
    h.format_version = recorder::format::VERSION;
    let reserved = write_header(&fd, &h).expect("write the header");
    let mut w = if a[0] == "rows" { LogWriter::rows(fd, 1) } else { LogWriter::new(fd, 1) }.expect("zstd");
    w.note_header(reserved);
    let mut buf = Buf::new_boxed(0);
    let mut bad = 0;
    r.for_each_frame(|fi, data| {
        let Ok(data) = data else {
            bad += 1;
            return;
        };
        buf.reset(fi.h.stream);
        buf.data[..data.len()].copy_from_slice(data);
        buf.len = data.len() as u32;
        buf.n = fi.h.n_records;
        buf.first_ticks = fi.h.first_ticks;
        buf.last_ticks = fi.h.last_ticks;
        w.write_buf(&buf).expect("write a frame");
    });
    println!(
        "{} frames ({} columnar), {} records, {} unreadable frames left out",
        w.frames,
        w.columnar_frames(),
        w.records,
        bad
    );
}
