//! Where a log's bytes go in the columnar frames (format version 5), and what each
//! prediction gains: every frame of each log is turned back into its records and split into
//! columns with the predictions on or off, each column compressed as the writer does.
//!
//!     cargo run --release -p recorder --example colbytes -- [--level N] LOG...
//!
//! Prints, per log, bytes per event of the log as it is, of the columnar frames with each
//! set of predictions, and per column (the format's choice), before and after zstd.
use recorder::columns::{self, Columns, Encoder, Tuning, COLUMN_NAMES, N_COLS};
use recorder::format::FRAME_HEADER_LEN;
use recorder::LogReader;

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut level = 1;
    if args.first().map(String::as_str) == Some("--level") {
        level = args[1].parse().expect("--level N");
        args.drain(..2);
    }
    let variants: [(&str, Tuning); 5] = [
        ("no predictions", Tuning { dod: false, free_index: false, class_alloc: false }),
        ("+ freed as index", Tuning { dod: false, free_index: true, class_alloc: false }),
        ("+ new vs size class", Tuning { dod: false, free_index: true, class_alloc: true }),
        ("+ time delta of delta", Tuning { dod: true, free_index: true, class_alloc: true }),
        ("format (default)", Tuning::default()),
    ];
    let mut comp = zstd::bulk::Compressor::new(level).unwrap();
    comp.include_checksum(false).unwrap();
    comp.include_contentsize(false).unwrap();
    for path in &args {
        let r = LogReader::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let events = r.record_count().max(1) as f64;
        println!(
            "{path}: {} events, {} frames, log {:.3} B/event (frames {:.3})",
            r.record_count(),
            r.frames.len(),
            r.file_len as f64 / events,
            r.compressed_bytes() as f64 / events
        );
        let mut frames: Vec<(Vec<u8>, u64)> = Vec::new();
        r.for_each_frame(|fi, data| {
            if let Ok(d) = data {
                frames.push((d.to_vec(), fi.h.first_ticks));
            }
        });
        let rows: usize = frames.iter().map(|f| f.0.len()).sum();
        println!("  rows before zstd {:.3} B/event", rows as f64 / events);
        for (name, tuning) in variants {
            let mut e = Encoder::new();
            e.tuning = tuning;
            let (mut raw, mut zipped) = ([0usize; N_COLS], [0usize; N_COLS]);
            let (mut body, mut scratch, mut total, mut one) = (Vec::new(), Vec::new(), 0usize, 0usize);
            let mut cat = Vec::new();
            for (data, first) in &frames {
                e.encode(data, *first).expect("records decode");
                body.clear();
                columns::pack(&e.cols, &mut comp, &mut scratch, &mut body).unwrap();
                total += body.len() + FRAME_HEADER_LEN;
                cat.clear();
                for (i, c) in e.cols.0.iter().enumerate() {
                    raw[i] += c.len();
                    let mut one_col = Columns::default();
                    one_col.0[i] = c.clone();
                    let mut b = Vec::new();
                    columns::pack(&one_col, &mut comp, &mut scratch, &mut b).unwrap();
                    zipped[i] += b.len() - 5 - 2 * (N_COLS - 1);
                    cat.extend_from_slice(c);
                }
                one += comp.compress(&cat).unwrap().len() + FRAME_HEADER_LEN;
            }
            println!(
                "  {name:24} {:.3} B/event (all columns in one zstd frame instead: {:.3})",
                total as f64 / events,
                one as f64 / events
            );
            if name == "format (default)" {
                for i in 0..N_COLS {
                    println!(
                        "    {:14} {:7.3} raw {:7.3} zstd",
                        COLUMN_NAMES[i],
                        raw[i] as f64 / events,
                        zipped[i] as f64 / events
                    );
                }
            }
        }
    }
}
