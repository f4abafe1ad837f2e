//! The recorder thread's work per event for a log's frames: compressing the records as they
//! are (row frames, version 4) against splitting them into columns and packing those
//! (version 5), each timed over every frame of the log, several passes, best pass.
//!
//!     cargo run --release -p recorder --example colspeed -- LOG [PASSES]
use recorder::columns::{self, Encoder};
use recorder::LogReader;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = LogReader::open(&args[0]).expect("open log");
    let passes: usize = args.get(1).map_or(5, |s| s.parse().expect("passes"));
    let mut frames: Vec<(Vec<u8>, u64)> = Vec::new();
    r.for_each_frame(|fi, d| {
        if let Ok(d) = d {
            frames.push((d.to_vec(), fi.h.first_ticks))
        }
    });
    let events = r.record_count() as f64;
    let mut rows = zstd::bulk::Compressor::new(1).unwrap();
    rows.include_checksum(true).unwrap();
    let mut comp = zstd::bulk::Compressor::new(1).unwrap();
    comp.include_checksum(false).unwrap();
    comp.include_contentsize(false).unwrap();
    let mut e = Encoder::new();
    let (mut scratch, mut body, mut out) = (Vec::new(), Vec::new(), Vec::with_capacity(1 << 17));
    let best = |f: &mut dyn FnMut()| {
        (0..passes)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
            * 1e9
            / events
    };
    let zrow = best(&mut || {
        for (d, _) in &frames {
            out.clear();
            rows.compress_to_buffer(&d[..], &mut out).unwrap();
        }
    });
    let dec = best(&mut || {
        for (d, t) in &frames {
            let mut st = recorder::buffer::DecodeState::new(*t);
            let mut n = 0u64;
            loop {
                match st.next_common::<false>(d) {
                    Some(r) => n = n.wrapping_add(r.args.ptr),
                    None => match st.next_record(d) {
                        Ok(Some(r)) => n = n.wrapping_add(r.args.ptr),
                        _ => break,
                    },
                }
            }
            std::hint::black_box(n);
        }
    });
    let enc = best(&mut || {
        for (d, t) in &frames {
            e.encode(d, *t).unwrap();
        }
    });
    let all = best(&mut || {
        for (d, t) in &frames {
            e.encode(d, *t).unwrap();
            body.clear();
            columns::pack(&e.cols, &mut comp, &mut scratch, &mut body).unwrap();
        }
    });
    println!("{}: rows zstd {zrow:.1} ns/event; decoding the rows {dec:.1}; columns: encode {enc:.1}, encode and pack {all:.1} ns/event ({:.2}x)", args[0], all / zrow);
}
