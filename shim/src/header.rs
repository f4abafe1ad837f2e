//! The log header: what process this is, with which backend and clock.
use crate::shared::{self, Globals};
use recorder::format::TICK_SHIFT;
use recorder::{clock, Header};

/// The header for `g`'s log; `tps` is 0 until the recorder has calibrated the clock.
pub fn build(g: &Globals, tps: f64) -> Header {
    build_window(g, tps, g.windows.map(|_| 0))
}

/// The header of window `window`'s log (0: the watch log; None: no windows).
pub fn build_window(g: &Globals, tps: f64, window: Option<u32>) -> Header {
    let cmdline = std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let mut h = Header {
        format_version: recorder::format::VERSION,
        pid: unsafe { libc::getpid() } as u32,
        ppid: g.ppid,
        forked: g.forked,
        exe: std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default(),
        cmdline,
        backend: g.backend.name().to_string(),
        backend_version: g.backend.version(),
        backend_settings: shim_backend::settings::applied().map(|s| String::from_utf8_lossy(s).into_owned()),
        page_size: shared::page_size() as u64,
        start_unix_ns: g.start_unix_ns,
        start_mono_ns: g.p0.mono_ns,
        clock: clock::source().to_string(),
        // The log counts in units of 2^TICK_SHIFT clock ticks.
        ticks_per_sec: tps / (1u64 << TICK_SHIFT) as f64,
        ref_ticks: g.p0.ticks >> TICK_SHIFT,
        timing: g.timing.describe(),
        on_full: match g.on_full {
            crate::config::OnFull::Block => "block".into(),
            crate::config::OnFull::Drop => "drop".into(),
        },
        shim_version: env!("CARGO_PKG_VERSION").to_string(),
        own_allocators: crate::patch::report(),
        window,
        parent_log: g.parent_log.clone(),
        fork_ticks: g.fork_ticks,
        inflight: g.pool.inflight().map(|f| f.path.clone()),
        record: g.sample_only.then(|| "sample".to_string()),
        ..Header::default()
    };
    crate::stacks::describe(&mut h);
    h
}
