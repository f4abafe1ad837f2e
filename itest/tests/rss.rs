//! The RSS a log records is the program's, not the shim's: itest/programs/c/rss_own.c fills
//! the shim's per-thread buffers many times over from 48 threads (the buffers live in the
//! in-flight file on tmpfs, counted in the process's resident set as shared memory), then
//! reads /proc/self/status. The log's last RSS sample must leave the buffers out: near the
//! program's resident set less the shared memory it holds, and well below the whole of it.
use itest::*;

const MIB: i64 = 1 << 20;

#[test]
fn rss_samples_leave_the_shims_buffers_out() {
    let dir = TempDir::new().expect("tempdir");
    let log = dir.path().join("rss.shimlog");
    let mut c = command(cprog("rss_own"));
    c.env("LD_PRELOAD", shim_lib()).env("SHIM_LOG", &log).env("SHIM_INFLIGHT_DIR", inflight_base());
    let out = run(c);
    out.assert_success("rss_own under the shim");
    let p = out.json();
    let v = |k: &str| p[k].as_i64().unwrap_or_else(|| panic!("{k} in {p}"));
    let (vm_rss, shmem) = (v("vm_rss"), v("rss_shmem"));
    // Without this much in the in-flight file the test shows nothing.
    assert!(shmem >= 2 * MIB, "the shim's buffers held only {shmem} bytes of shared memory: {p}");

    let mut s = command(shimlog_bin());
    s.args(["stats", "--json"]).arg(&log);
    let st = run(s);
    st.assert_success("shimlog stats");
    let doc = st.json();
    let logged = doc["memory"]["rss_at_end"]["rss_bytes"]
        .as_i64()
        .unwrap_or_else(|| panic!("no RSS at the end: {:#}", doc["memory"]));
    let program = vm_rss - shmem;
    assert!(
        logged < vm_rss - shmem / 2,
        "the log's RSS {logged} holds the shim's buffers (process {vm_rss}, shared {shmem}): {p}"
    );
    assert!(
        (logged - program).abs() < 4 * MIB,
        "the log's RSS {logged} is not the program's {program} (process {vm_rss}, shared {shmem})"
    );
}
