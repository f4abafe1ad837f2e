/* demo.c: the workload `make demo` runs under the shim.
 *
 * Several threads, each with its own deterministic random stream, allocate blocks of mixed
 * sizes (malloc, calloc, posix_memalign, aligned_alloc, memalign), keep some, free some
 * themselves and hand others to the next thread through a mutex-protected queue for it to
 * free; each also grows a buffer with realloc. It prints one summary line that is the same
 * on every run with the same arguments.
 *
 * Usage: demo [THREADS] [ITERATIONS_PER_THREAD]   (default 4 threads, 250000 iterations) */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 256
#define MAX_THREADS 64

enum { OP_MALLOC, OP_CALLOC, OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC, OP_MEMALIGN, OP_REALLOC, NOPS };
static const char *op_names[NOPS] = {"malloc", "calloc", "posix_memalign", "aligned_alloc",
                                     "memalign", "realloc"};

/* A block handed to another thread starts with this header. */
struct node {
    struct node *next;
    uint32_t tag;
};

struct queue {
    pthread_mutex_t mu;
    struct node *head;
} queues[MAX_THREADS];

struct thread_stats {
    unsigned long ops[NOPS];
    unsigned long bytes, passed, freed_local, freed_passed, bad;
} stats[MAX_THREADS];

static int nthreads = 4;
static long iterations = 250000;

static uint64_t next_rand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Mostly small requests, some medium, a few large ones. */
static size_t pick_size(uint64_t *s) {
    uint64_t r = next_rand(s);
    unsigned k = r % 100;
    if (k < 70) return 16 + (r >> 8) % 241;
    if (k < 95) return 257 + (r >> 8) % 3840;
    return 4097 + (r >> 8) % 61440;
}

static void push(int to, struct node *n) {
    pthread_mutex_lock(&queues[to].mu);
    n->next = queues[to].head;
    queues[to].head = n;
    pthread_mutex_unlock(&queues[to].mu);
}

static struct node *take_all(int me) {
    pthread_mutex_lock(&queues[me].mu);
    struct node *n = queues[me].head;
    queues[me].head = NULL;
    pthread_mutex_unlock(&queues[me].mu);
    return n;
}

static unsigned long drain(int me) {
    unsigned long n = 0;
    for (struct node *q = take_all(me); q;) {
        struct node *next = q->next;
        if (q->tag != 0xfeedu) stats[me].bad++;
        free(q);
        q = next;
        n++;
    }
    return n;
}

static void *worker(void *arg) {
    int me = (int)(intptr_t)arg;
    struct thread_stats *st = &stats[me];
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1);
    void *slot[SLOTS] = {0};
    char *buf = NULL;
    size_t buf_len = 0;

    for (long i = 0; i < iterations; i++) {
        uint64_t r = next_rand(&seed);
        unsigned what = r % 32;
        size_t n = pick_size(&seed);
        void *p = NULL;
        int op;
        if (what < 18) {
            op = OP_MALLOC;
            p = malloc(n);
        } else if (what < 22) {
            op = OP_CALLOC;
            p = calloc(1 + n / 16, 16);
            n = (1 + n / 16) * 16;
        } else if (what < 24) {
            op = OP_POSIX_MEMALIGN;
            if (posix_memalign(&p, (size_t)64 << (r >> 40) % 7, n)) p = NULL;
        } else if (what < 26) {
            op = OP_ALIGNED_ALLOC;
            size_t a = (size_t)32 << (r >> 40) % 5;
            n = (n + a - 1) / a * a;
            p = aligned_alloc(a, n);
        } else if (what < 27) {
            op = OP_MEMALIGN;
            p = memalign((size_t)16 << (r >> 40) % 9, n);
        } else if (what < 30) {
            /* Grow a buffer by half each time up to 1 MiB, then start over. */
            op = OP_REALLOC;
            size_t want = buf_len ? buf_len + buf_len / 2 : 64;
            if (want > (1 << 20)) {
                free(buf);
                st->freed_local++;
                buf = NULL;
                want = 64;
            }
            char *nb = realloc(buf, want);
            if (!nb) { st->bad++; continue; }
            if (buf_len && buf_len < want && nb[buf_len - 1] != (char)buf_len) st->bad++;
            buf = nb;
            buf_len = want;
            buf[buf_len - 1] = (char)buf_len;
            st->ops[op]++;
            st->bytes += want;
            continue;
        } else {
            st->freed_passed += drain(me);
            continue;
        }
        if (!p) { st->bad++; continue; }
        st->ops[op]++;
        st->bytes += n;
        memset(p, 0x5a, n < 64 ? n : 64);
        struct node *node = p;
        node->tag = 0xfeedu;

        /* Keep it in a slot; the block it displaces is freed here or passed on. */
        unsigned k = (r >> 20) % SLOTS;
        void *old = slot[k];
        slot[k] = p;
        if (!old) continue;
        if (((struct node *)old)->tag != 0xfeedu) st->bad++;
        if ((r >> 32) & 1 && nthreads > 1) {
            push((me + 1) % nthreads, old);
            st->passed++;
        } else {
            free(old);
            st->freed_local++;
        }
    }
    for (int k = 0; k < SLOTS; k++)
        if (slot[k]) {
            free(slot[k]);
            st->freed_local++;
        }
    if (buf) {
        free(buf);
        st->freed_local++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) nthreads = atoi(argv[1]);
    if (argc > 2) iterations = atol(argv[2]);
    if (nthreads < 1 || nthreads > MAX_THREADS || iterations < 0) {
        fprintf(stderr, "usage: demo [THREADS 1-%d] [ITERATIONS >= 0]\n", MAX_THREADS);
        return 2;
    }
    pthread_t th[MAX_THREADS];
    for (int t = 0; t < nthreads; t++) {
        pthread_mutex_init(&queues[t].mu, NULL);
        queues[t].head = NULL;
    }
    for (int t = 0; t < nthreads; t++)
        pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < nthreads; t++)
        pthread_join(th[t], NULL);

    unsigned long ops[NOPS] = {0}, bytes = 0, passed = 0, bad = 0, total = 0, frees = 0;
    for (int t = 0; t < nthreads; t++) {
        stats[t].freed_passed += drain(t); /* blocks passed on after their receiver stopped */
        for (int o = 0; o < NOPS; o++) {
            ops[o] += stats[t].ops[o];
            total += stats[t].ops[o];
        }
        bytes += stats[t].bytes;
        passed += stats[t].passed;
        frees += stats[t].freed_local + stats[t].freed_passed;
        bad += stats[t].bad;
    }
    printf("demo: threads=%d iterations=%ld allocations=%lu", nthreads, iterations, total);
    for (int o = 0; o < NOPS; o++)
        printf(" %s=%lu", op_names[o], ops[o]);
    printf(" frees=%lu bytes=%lu passed_to_other_threads=%lu errors=%lu\n", frees, bytes, passed, bad);
    return bad ? 1 : 0;
}
