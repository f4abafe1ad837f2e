//! `shimlog pprof LOG -o FILE`: the log's stacks as a heap profile in pprof's format
//! (profile.proto, gzipped), which go tool pprof, Pyroscope, Grafana and speedscope read.
//! Sample types alloc_objects, alloc_space, inuse_objects, inuse_space (the default); "in
//! use" is at the heap's peak unless `--at end` (what was never freed). In sample mode the
//! values are the estimates `shimlog stats` shows (each sample weighted by 1 / its chance).
mod proto;

use crate::analysis::{profile, Profile};
use prost::Message;
use rustc_hash::FxHashMap;
use std::io::Write;

#[derive(clap::Args)]
pub struct Args {
    /// The log (written with SHIM_STACKS=sample or all).
    pub log: String,
    /// The profile to write (gzipped profile.proto).
    #[arg(short, long)]
    pub output: std::path::PathBuf,
    /// "In use" at the heap's peak, or at the end of the log (blocks never freed).
    #[arg(long, value_enum, default_value = "peak")]
    pub at: At,
    /// Where to find the program's binaries for symbols (see `shimlog stats --binaries`).
    #[arg(long, value_name = "DIR")]
    pub binaries: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub alloc: crate::analysis::AllocFnArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, PartialEq, Eq)]
pub enum At {
    Peak,
    End,
}

struct Strings {
    v: Vec<String>,
    ix: FxHashMap<String, i64>,
}

impl Strings {
    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.ix.get(s) {
            return i;
        }
        let i = self.v.len() as i64;
        self.v.push(s.to_string());
        self.ix.insert(s.to_string(), i);
        i
    }
}

/// Builds the profile message.
pub fn build(p: &Profile, at: At, duration_ns: u64, start_unix_ns: u64) -> proto::Profile {
    let mut s = Strings { v: Vec::new(), ix: FxHashMap::default() };
    s.get("");
    let vt = |s: &mut Strings, t: &str, u: &str| proto::ValueType { r#type: s.get(t), unit: s.get(u) };
    let sample_type = vec![
        vt(&mut s, "alloc_objects", "count"),
        vt(&mut s, "alloc_space", "bytes"),
        vt(&mut s, "inuse_objects", "count"),
        vt(&mut s, "inuse_space", "bytes"),
    ];
    let mut mapping = Vec::new();
    for (i, m) in p.c.mappings.iter().enumerate() {
        mapping.push(proto::Mapping {
            id: i as u64 + 1,
            memory_start: m.start,
            memory_limit: m.end,
            file_offset: m.start.wrapping_sub(m.bias),
            filename: s.get(&m.path),
            build_id: s.get(&m.build_id),
            has_functions: true,
            has_filenames: true,
            has_line_numbers: true,
            has_inline_frames: true,
        });
    }
    let mut functions: FxHashMap<(String, String), u64> = FxHashMap::default();
    let mut function = Vec::new();
    let mut locations: FxHashMap<(u64, usize), u64> = FxHashMap::default();
    let mut location = Vec::new();
    let mut sample = Vec::new();
    let mut ids: Vec<&u32> = p.c.sites.keys().collect();
    ids.sort();
    for id in ids {
        let t = &p.c.sites[id];
        if t.samples == 0 {
            continue;
        }
        let (objs, bytes) = match at {
            At::Peak => (t.peak_objects, t.peak_bytes),
            At::End => (t.live_objects, t.live_bytes),
        };
        let mut loc_ids = Vec::new();
        // Past the program's allocation wrappers: a return address whose inner (inlined)
        // frames are the wrappers' is a location of its own without them.
        let (pcs, skip) = p.kept_pcs(*id);
        for (k, &pc) in pcs.iter().enumerate() {
            let skip = if k == 0 { skip } else { 0 };
            let next_id = location.len() as u64 + 1;
            let lid = *locations.entry((pc, skip)).or_insert(next_id);
            if lid == next_id {
                let mut line = Vec::new();
                for f in p.by_pc.get(&pc).map(|v| v.as_slice()).unwrap_or(&[]).iter().skip(skip) {
                    let key = (f.function.clone(), f.file.clone().unwrap_or_default());
                    let next_f = function.len() as u64 + 1;
                    let fid = *functions.entry(key.clone()).or_insert(next_f);
                    if fid == next_f {
                        let name = s.get(&key.0);
                        function.push(proto::Function {
                            id: fid,
                            name,
                            system_name: name,
                            filename: s.get(&key.1),
                            start_line: 0,
                        });
                    }
                    line.push(proto::Line { function_id: fid, line: f.line.unwrap_or(0) as i64 });
                }
                let mapping_id =
                    p.c.mappings.iter().position(|m| m.start <= pc && pc < m.end).map_or(0, |i| i as u64 + 1);
                location.push(proto::Location { id: lid, mapping_id, address: pc.saturating_sub(1), line });
            }
            loc_ids.push(lid);
        }
        sample.push(proto::Sample {
            location_id: loc_ids,
            value: vec![
                t.alloc_calls.round() as i64,
                t.alloc_bytes.round() as i64,
                objs.round() as i64,
                bytes.round() as i64,
            ],
        });
    }
    let comment = vec![s.get(&match p.c.mean {
        Some(m) => format!("shimlog: sampled every {m} bytes on average; values are estimates"),
        None => "shimlog: every allocation".to_string(),
    })];
    let period_type = Some(vt(&mut s, "space", "bytes"));
    // In use at the peak or at the end: the same sample type either way.
    let default_sample_type = s.get("inuse_space");
    // The wrappers the stacks were folded past, for pprof to fold what it merges in too.
    let drop_frames = s.get(&p.drop_frames);
    proto::Profile {
        sample_type,
        drop_frames,
        sample,
        mapping,
        location,
        function,
        time_nanos: start_unix_ns as i64,
        duration_nanos: duration_ns as i64,
        period_type,
        period: p.c.mean.unwrap_or(1) as i64,
        comment,
        default_sample_type,
        string_table: s.v,
    }
}

pub fn run(a: Args) -> Result<i32, String> {
    let r = crate::open::open(&a.log)?;
    if !matches!(r.header.stacks.as_deref(), Some("sample" | "all")) {
        return Err(format!(
            "pprof: {} has no sampled allocations (SHIM_STACKS={}); record with SHIM_STACKS=sample or all",
            a.log,
            r.header.stacks.as_deref().unwrap_or("off, a log older than format 4")
        ));
    }
    let wrappers = match crate::analysis::AllocFns::parse(&a.alloc.alloc_fn) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("shimlog pprof: {e}");
            return Ok(2);
        }
    };
    let p = profile(&r, a.binaries.as_deref(), &wrappers);
    for i in &p.issues {
        eprintln!("shimlog: note: {i}");
    }
    let prof = build(&p, a.at, 0, r.header.start_unix_ns);
    let f = std::fs::File::create(&a.output)
        .map_err(|e| format!("pprof: cannot create {}: {e}", a.output.display()))?;
    let mut gz = flate2::write::GzEncoder::new(std::io::BufWriter::new(f), flate2::Compression::default());
    gz.write_all(&prof.encode_to_vec())
        .and_then(|_| gz.finish()?.flush())
        .map_err(|e| format!("pprof: writing {}: {e}", a.output.display()))?;
    Ok(0)
}
