/* Per-thread state of the call-stack sampler and unwinder, in initial-exec TLS (as
 * ../tls.c, for the same reason: never a call into the dynamic linker from a hook). */
struct shim_stk_tls {
    long long remaining;            /* bytes to go before the next sampled allocation */
    unsigned long long rng;         /* xorshift state, 0 until seeded */
    unsigned long long stack_lo;    /* this thread's stack mapping, 0 until looked up */
    unsigned long long stack_hi;
};

__attribute__((visibility("hidden"), tls_model("initial-exec")))
__thread struct shim_stk_tls shim_stk_block;

__attribute__((visibility("hidden")))
struct shim_stk_tls *shim_stk_tls(void) { return &shim_stk_block; }
