/* idle.c: a program that mostly sleeps, for the recorder's pace (shim/src/pace.rs).
 *
 * First it sleeps a second without a call into the allocator and counts how often the
 * other threads of the process (the shim's recorder) woke meanwhile and how much CPU they
 * used (/proc/self/task/TID/status and schedstat). Then, ROUNDS times, it sleeps 150 ms and
 * makes one slow call right away: a realloc of a touched 128 MiB block to 384 MiB, with a
 * block after it so that it cannot grow in place (a backend that does not remap copies
 * it). A recorder that dozes through the sleep must still see that call as a stall.
 * Prints {"tid":TID,"idle_wakes":N,"idle_cpu_ns":N,"rounds":N}.
 *
 * `idle PERIOD_US SECONDS [THREADS]` (bench/idle.py): a malloc and a free every PERIOD_US
 * (0: none) for SECONDS instead, beside THREADS threads (default 0) that made one call each
 * and sleep, and prints {"wakes":N,"cpu_ns":N,"calls":N} of the threads that used CPU
 * meanwhile (the recorder; the sleepers use none) over that time. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#define ROUNDS 5

/* Wake-ups (voluntary context switches) and CPU ns of every thread but this one. */
static void others(long self, unsigned long long *wakes, unsigned long long *cpu) {
    *wakes = 0;
    *cpu = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    struct dirent *e;
    char path[128], line[256];
    while ((e = readdir(d))) {
        long tid = atol(e->d_name);
        if (tid <= 0 || tid == self) continue;
        snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
        FILE *f = fopen(path, "r");
        if (f) {
            while (fgets(line, sizeof line, f)) {
                unsigned long long n;
                if (sscanf(line, "voluntary_ctxt_switches: %llu", &n) == 1) *wakes += n;
            }
            fclose(f);
        }
        snprintf(path, sizeof path, "/proc/self/task/%ld/schedstat", tid);
        f = fopen(path, "r");
        if (f) {
            unsigned long long run;
            if (fscanf(f, "%llu", &run) == 1) *cpu += run;
            fclose(f);
        }
    }
    closedir(d);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, 0);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A call every `period_us` for `secs`: the other threads' wakes and CPU meanwhile. */
static int hold[2];

/* One call, then blocked until the pipe closes (no wake-ups meanwhile). */
static void *sleeper(void *arg) {
    (void)arg;
    void *volatile p = malloc(16);
    free(p);
    char c;
    while (read(hold[0], &c, 1) > 0) {}
    return 0;
}

static int trickle(long self, long period_us, double secs, int threads) {
    pthread_t *t = calloc(threads ? threads : 1, sizeof *t);
    if (!t || pipe(hold)) return 1;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], &attr, sleeper, 0)) return 1;
    sleep_ms(200);
    unsigned long long w0, c0, w1, c1, calls = 0;
    others(self, &w0, &c0);
    double end = now_s() + secs;
    while (now_s() < end) {
        if (period_us > 0) {
            void *volatile p = malloc(64);
            free(p);
            calls++;
            struct timespec ts = {period_us / 1000000, (period_us % 1000000) * 1000};
            nanosleep(&ts, 0);
        } else {
            sleep_ms(10);
        }
    }
    others(self, &w1, &c1);
    close(hold[1]);
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
    free(t);
    printf("{\"wakes\":%llu,\"cpu_ns\":%llu,\"calls\":%llu}\n", w1 - w0, c1 - c0, calls);
    return 0;
}

int main(int argc, char **argv) {
    long self = syscall(SYS_gettid);
    if (argc >= 3) return trickle(self, atol(argv[1]), atof(argv[2]), argc > 3 ? atoi(argv[3]) : 0);
    /* Let start-up settle (the recorder measures its clock for 20 ms). */
    sleep_ms(200);
    unsigned long long w0, c0, w1, c1;
    others(self, &w0, &c0);
    sleep_ms(1000);
    others(self, &w1, &c1);
    size_t big = (size_t)128 << 20;
    for (int i = 0; i < ROUNDS; i++) {
        char *p = malloc(big);
        if (!p) return 1;
        memset(p, 1, big);
        void *volatile q = malloc(4096);
        sleep_ms(150);
        char *volatile r = realloc(p, 3 * big);
        if (!r) return 1;
        r[3 * big - 1] = 2;
        free(r);
        free(q);
    }
    sleep_ms(50);
    printf("{\"tid\":%ld,\"idle_wakes\":%llu,\"idle_cpu_ns\":%llu,\"rounds\":%d}\n", self, w1 - w0, c1 - c0, ROUNDS);
    return 0;
}
