/* Per-thread state of the hooks, in initial-exec TLS (one %fs-relative access, never a
 * call into the dynamic linker, so never a recursive malloc). tls.rs reads it with inline
 * assembly on x86-64 and through shim_tls() elsewhere. */
struct shim_tls {
    void *state;       /* this thread's ThreadState, NULL until it registers, 1 after exit */
    unsigned busy;     /* non-zero while inside the shim: nested calls pass straight through */
};

__attribute__((visibility("hidden"), tls_model("initial-exec")))
__thread struct shim_tls shim_tls_block;

__attribute__((visibility("hidden")))
struct shim_tls *shim_tls(void) { return &shim_tls_block; }
