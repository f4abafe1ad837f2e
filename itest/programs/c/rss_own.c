/* RSS under the shim is the program's: THREADS threads (default 48), all alive at once (a
 * barrier before the work and one after it), each make and free ITERS blocks of 32 bytes
 * (default 60000), filling the shim's per-thread buffers many times over (they live in its
 * in-flight file on tmpfs, counted in the process's RSS as shared memory; with every thread
 * holding its buffer at once, at least THREADS buffers are touched, which threads run one
 * after another would share); once all are joined, prints the process's own view of its
 * resident set as one JSON line: {"vm_rss": B, "rss_anon": B, "rss_file": B, "rss_shmem": B}.
 *
 *   rss_own [THREADS] [ITERS] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long iters = 60000;
static pthread_barrier_t start, end;

static void *work(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < iters; i++) {
        void *p = malloc(32);
        if (!p)
            abort();
        memset(p, 1, 32);
        free(p);
    }
    pthread_barrier_wait(&end);
    return NULL;
}

static long kib(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':')
            v = atol(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 48;
    if (argc > 2)
        iters = atol(argv[2]);
    pthread_t t[256];
    if (threads > 256)
        threads = 256;
    if (threads < 1)
        threads = 1;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    pthread_barrier_init(&end, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, work, NULL))
            return 1;
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    printf("{\"vm_rss\": %ld, \"rss_anon\": %ld, \"rss_file\": %ld, \"rss_shmem\": %ld}\n", kib("VmRSS") * 1024,
           kib("RssAnon") * 1024, kib("RssFile") * 1024, kib("RssShmem") * 1024);
    return 0;
}
