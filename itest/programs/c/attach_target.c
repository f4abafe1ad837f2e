/* A long-running program for `shimlog attach`: THREADS threads call malloc and free in a
 * loop and count their own calls; on SIGUSR1 the main thread prints the counts ("calls
 * MALLOCS FREES"), on SIGTERM it prints them and exits. With HOLD > 0 it allocates HOLD
 * blocks of 1000 bytes first and frees them on SIGUSR2 ("freed HOLD"). */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <unistd.h>

static atomic_ulong mallocs, frees;
static volatile sig_atomic_t print_now, stop_now, free_held;

static void on_usr1(int s) { (void)s; print_now = 1; }
static void on_usr2(int s) { (void)s; free_held = 1; }
static void on_term(int s) { (void)s; stop_now = 1; }

static void *work(void *arg) {
    unsigned long seed = (unsigned long)arg * 2654435761u + 1;
    for (;;) {
        for (int i = 0; i < 200; i++) {
            seed = seed * 6364136223846793005ul + 1442695040888963407ul;
            size_t n = 16 + (seed >> 33) % 4096;
            char *p = malloc(n);
            atomic_fetch_add(&mallocs, 1);
            if (!p) abort();
            p[0] = 1;
            free(p);
            atomic_fetch_add(&frees, 1);
        }
        usleep(1000);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    int hold = argc > 2 ? atoi(argv[2]) : 0;
    signal(SIGUSR1, on_usr1);
    signal(SIGUSR2, on_usr2);
    signal(SIGTERM, on_term);
    void **held = calloc(hold > 0 ? hold : 1, sizeof *held);
    for (int i = 0; i < hold; i++) held[i] = malloc(1000);
    for (long t = 0; t < threads; t++) {
        pthread_t th;
        pthread_create(&th, NULL, work, (void *)(t + 1));
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;) {
        usleep(2000);
        if (free_held) {
            free_held = 0;
            for (int i = 0; i < hold; i++) free(held[i]);
            printf("freed %d\n", hold);
            fflush(stdout);
        }
        if (print_now || stop_now) {
            print_now = 0;
            printf("calls %lu %lu\n", atomic_load(&mallocs), atomic_load(&frees));
            fflush(stdout);
            if (stop_now) _exit(0);
        }
    }
}
