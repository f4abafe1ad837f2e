/* A program that dies while it allocates, for the crash-safety tests (itest/tests/crash.rs).
 *
 *   crash MODE
 *
 * It makes malloc/free calls in rounds of 1000 on the main thread (a second thread
 * allocates too, so that more than one thread's buffers are in flight) and prints, after
 * each round, "calls N": the main thread's calls so far. Then, by MODE:
 *   loop   go on until killed (SIGKILL, SIGTERM from the test; SIGPIPE when stdout closes)
 *   segv   after 20 rounds, a write through a null pointer (SIGSEGV)
 *   abort  after 20 rounds, abort()
 *   exit7  after 20 rounds, exit(7)
 *   oom    blocks of 1 MiB kept and touched, "calls N" after each, until the OOM killer comes
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *worker(void *arg) {
    (void)arg;
    void *keep[64] = {0};
    for (unsigned long i = 0;; i++) {
        free(keep[i % 64]);
        keep[i % 64] = malloc(32 + i % 512);
        if (i % 256 == 0) usleep(100);
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "loop";
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    unsigned long calls = 0;
    if (strcmp(mode, "oom") == 0) {
        for (;;) {
            char *p = malloc(1 << 20);
            calls++;
            if (p) memset(p, 1, 1 << 20);
            printf("calls %lu\n", calls);
            fflush(stdout);
        }
    }
    void *keep[500] = {0};
    for (int round = 1;; round++) {
        for (int i = 0; i < 500; i++) {
            free(keep[i]);
            keep[i] = malloc(16 + (size_t)(round * 7 + i) % 2000);
            calls += keep[i] ? 2 : 1;
        }
        /* free(NULL) is not recorded: count the first round's frees only when they were real. */
        if (round == 1) calls -= 500;
        if (printf("calls %lu\n", calls) < 0 || fflush(stdout) != 0) {
            /* stdout gone without SIGPIPE (ignored by the parent): keep on as a server would. */
        }
        usleep(2000);
        if (round == 20) {
            if (strcmp(mode, "segv") == 0) *(volatile int *)(size_t)argc = 0, *(volatile int *)0 = 1;
            if (strcmp(mode, "abort") == 0) abort();
            if (strcmp(mode, "exit7") == 0) exit(7);
        }
    }
}
