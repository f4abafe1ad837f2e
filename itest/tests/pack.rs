//! SHIM_PACK=columns under the real shim, every backend: tests/c/counts.c recorded with
//! columnar frames reads back as the same calls as with rows (the default), in a smaller
//! log, and consistent (every free of a block made, no reuse conflict).
use itest::*;

const OPS: [&str; 8] = ["malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign", "valloc"];

fn recorded(backend: &str, pack: &str) -> (Analysis, u64, usize) {
    let t = run_traced(backend, || {
        let mut c = command(cprog("counts"));
        c.arg("400").env("SHIM_PACK", pack);
        c
    });
    t.out.assert_success(&format!("counts under SHIM_PACK={pack}, {backend}"));
    assert!(!t.out.stderr.contains("shim:"), "{}", t.out.stderr);
    let log = t.only_log();
    let r = recorder::LogReader::open(log.to_str().unwrap()).expect("open the log");
    let columnar = r.frames.iter().filter(|f| f.h.columnar).count();
    (analyze(&log, |_| true), std::fs::metadata(&log).unwrap().len(), columnar)
}

#[test]
fn columns_read_back_as_rows_do() {
    for backend in BACKENDS {
        let (rows, rows_bytes, rows_columnar) = recorded(backend, "rows");
        let (cols, cols_bytes, cols_columnar) = recorded(backend, "columns");
        assert_eq!(rows_columnar, 0, "{backend}: SHIM_PACK=rows wrote columnar frames");
        assert!(cols_columnar > 0, "{backend}: SHIM_PACK=columns wrote no columnar frame");
        for op in OPS {
            assert_eq!(cols.count(op), rows.count(op), "{backend}: {op} calls, columns against rows");
        }
        cols.assert_consistent(true);
        assert!(cols_bytes < rows_bytes, "{backend}: columns {cols_bytes} bytes, rows {rows_bytes}");
    }
}
