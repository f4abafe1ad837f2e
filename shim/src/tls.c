/* Per-thread state of the hooks, in initial-exec TLS (one %fs-relative access, never a
 * call into the dynamic linker, so never a recursive malloc). */
struct shim_tls {
    void *state;       /* this thread's ThreadState, NULL until it registers, 1 after exit */
    unsigned busy;     /* non-zero while inside the shim: nested calls pass straight through */
};

static __thread struct shim_tls tls __attribute__((tls_model("initial-exec")));

struct shim_tls *shim_tls(void) { return &tls; }
