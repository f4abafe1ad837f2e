/* known.c: a deterministic workload whose statistics are known exactly, for the tests of
 * `shimlog stats`. It keeps its own account of every block it makes (in static memory, so
 * the account adds no malloc call) and prints, as one JSON object, the numbers a log of it
 * must show for the program's own calls:
 *   ops / bytes       calls per operation and bytes requested (count*size for calloc)
 *   peak_live_bytes   the most bytes live at once, in call order (reached in phase 1,
 *                     before any thread exists)
 *   live_at_end       blocks never freed
 *   cross_thread_frees blocks freed by a thread other than the one that made them
 *   free_bursts       runs of >= 64 frees with no allocation in between on one thread
 *   lifetimes         blocks held >= 2 ms, blocks freed right after their malloc,
 *                     blocks with exactly 10 allocations between malloc and free
 * The C runtime adds a few calls of its own (pthread_create's thread descriptors); the
 * "program_" numbers exclude them. Output is written with write(2), not stdio. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXLIVE 4096
static struct blk { uintptr_t p; size_t size; int thread; } live[MAXLIVE];
static int nlive;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static long n_malloc, n_calloc, n_realloc, n_free;
static unsigned long b_malloc, b_calloc, b_realloc;
static unsigned long live_bytes, peak_bytes;
static long cross_frees, bursts, longest_burst, errors;
static __thread int thread_index; /* 0 main, 1 thread A, 2 thread B */
static __thread long free_run;

static void end_run(void) {
    if (free_run >= 64) {
        bursts++;
        if (free_run > longest_burst) longest_burst = free_run;
    }
    free_run = 0;
}

static void add(void *p, size_t size) {
    if (!p || nlive >= MAXLIVE) { errors++; return; }
    live[nlive++] = (struct blk){(uintptr_t)p, size, thread_index};
    live_bytes += size;
    if (live_bytes > peak_bytes) peak_bytes = live_bytes;
}

static void drop(uintptr_t p) {
    for (int i = 0; i < nlive; i++)
        if (live[i].p == p) {
            live_bytes -= live[i].size;
            if (live[i].thread != thread_index) cross_frees++;
            live[i] = live[--nlive];
            return;
        }
    errors++;
}

static void *k_malloc(size_t n) {
    void *p = malloc(n);
    if (p) memset(p, 0x3c, n);
    pthread_mutex_lock(&mu);
    end_run();
    n_malloc++;
    b_malloc += n;
    add(p, n);
    pthread_mutex_unlock(&mu);
    return p;
}

static void *k_calloc(size_t c, size_t n) {
    void *p = calloc(c, n);
    pthread_mutex_lock(&mu);
    end_run();
    n_calloc++;
    b_calloc += c * n;
    add(p, c * n);
    pthread_mutex_unlock(&mu);
    return p;
}

static void *k_realloc(void *old, size_t n) {
    uintptr_t was = (uintptr_t)old;
    void *p = realloc(old, n);
    pthread_mutex_lock(&mu);
    end_run();
    n_realloc++;
    b_realloc += n;
    if (p) {
        drop(was);
        add(p, n);
    } else {
        errors++;
    }
    pthread_mutex_unlock(&mu);
    return p;
}

static void k_free(void *p) {
    pthread_mutex_lock(&mu);
    free_run++;
    n_free++;
    drop((uintptr_t)p);
    pthread_mutex_unlock(&mu);
    free(p);
}

static void sleep_ms(int ms) {
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* Phase 4: thread A makes 50 blocks, thread B (started after A ended) frees them. */
#define CROSS 50
static void *cross[CROSS];
static long tid_a, tid_b;

static void *thread_a(void *arg) {
    (void)arg;
    thread_index = 1;
    tid_a = syscall(SYS_gettid);
    for (int i = 0; i < CROSS; i++)
        cross[i] = k_malloc(2048);
    sleep_ms(2); /* so each of these blocks lives >= 2 ms */
    return NULL;
}

static void *thread_b(void *arg) {
    (void)arg;
    thread_index = 2;
    tid_b = syscall(SYS_gettid);
    for (int i = 0; i < CROSS; i++)
        k_free(cross[i]);
    end_run();
    return NULL;
}

int main(void) {
    void *v[128];

    /* Phase 1: the peak, 1,000,000 bytes, before any thread exists. */
    char *r = k_malloc(1000);
    r = k_realloc(r, 10000);
    r = k_realloc(r, 80000);               /* live 80,000 */
    void *c = k_calloc(100, 1000);         /* live 180,000 */
    for (int i = 1; i <= 40; i++)          /* + 1000 * (1 + ... + 40) = 820,000 */
        v[i - 1] = k_malloc(1000 * (size_t)i);
    k_free(r);
    k_free(c);
    for (int i = 39; i >= 0; i--)
        k_free(v[i]);                      /* a run of 42 frees: not a burst */

    /* Phase 2: free bursts of 100 and 64 frees, and a run of 63 that is not one. Each run is
     * ended by the allocation of a small "breaker" block. */
    static const int runs[3] = {100, 64, 63};
    static const size_t run_size[3] = {1000, 512, 256};
    void *breaker[3];
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < runs[k]; i++)
            v[i] = k_malloc(run_size[k]);
        for (int i = 0; i < runs[k]; i++)
            k_free(v[i]);
        breaker[k] = k_malloc(16);
    }

    /* Phase 3: lifetimes. 1000 blocks freed right after their malloc; 100 blocks of 72 bytes
     * each with exactly 10 allocations between its malloc and its free; 20 blocks of 4100
     * bytes held 3 ms. */
    for (int i = 0; i < 1000; i++) {
        void *p = k_malloc(48);
        k_free(p);
        if (i < 3) k_free(breaker[i]);
    }
    for (int i = 0; i < 100; i++) {
        void *a = k_malloc(72);
        for (int j = 0; j < 10; j++)
            v[j] = k_malloc(24);
        k_free(a);
        for (int j = 0; j < 10; j++)
            k_free(v[j]);
    }
    for (int i = 0; i < 20; i++) {
        void *p = k_malloc(4100); /* a size no other phase uses */
        sleep_ms(3);
        k_free(p);
    }
    long main_mallocs_before_threads = n_malloc;

    /* Phase 4: cross-thread frees. */
    pthread_t th;
    pthread_create(&th, NULL, thread_a, NULL);
    pthread_join(th, NULL);
    pthread_create(&th, NULL, thread_b, NULL);
    pthread_join(th, NULL);

    /* Phase 5: 7 blocks never freed. */
    for (int i = 0; i < 7; i++)
        k_malloc(333);
    end_run();

    static char out[4096];
    int len = snprintf(out, sizeof out,
        "{\"pid\":%d,\"main_tid\":%ld,\"thread_a_tid\":%ld,\"thread_b_tid\":%ld,\"threads\":3,"
        "\"errors\":%ld,"
        "\"program_ops\":{\"malloc\":%ld,\"calloc\":%ld,\"realloc\":%ld,\"free\":%ld},"
        "\"program_bytes\":{\"malloc\":%lu,\"calloc\":%lu,\"realloc\":%lu},"
        "\"peak_live_bytes\":%lu,"
        "\"program_live_at_end\":{\"blocks\":%d,\"bytes\":%lu,\"size\":333},"
        "\"program_cross_thread_frees\":%ld,"
        "\"cross_thread_pair\":{\"from_tid\":%ld,\"to_tid\":%ld,\"count\":%d,\"size\":2048},"
        "\"free_bursts\":{\"min_run\":64,\"count\":%ld,\"longest\":%ld,\"runs\":[100,64],"
        "\"not_a_burst_run\":63},"
        "\"lifetimes\":{\"held_at_least_2ms\":%d,\"held_sizes\":[4100,2048],\"immediate_pairs\":{\"count\":1000,\"size\":48},"
        "\"ten_allocs_between\":{\"count\":100,\"size\":72},\"never_freed\":7},"
        "\"main_mallocs_before_threads\":%ld}\n",
        (int)getpid(), (long)syscall(SYS_gettid), tid_a, tid_b, errors, n_malloc, n_calloc,
        n_realloc, n_free, b_malloc, b_calloc, b_realloc, peak_bytes, nlive,
        live_bytes, cross_frees, tid_a, tid_b, CROSS,
        bursts, longest_burst, 20 + CROSS, main_mallocs_before_threads);
    if (len <= 0 || (size_t)len >= sizeof out || write(1, out, len) != len) return 3;
    return errors ? 1 : 0;
}
