/* A program for the crash-loop tests (itest/tests/crash_loop.rs): a canary that keeps
 * dying, and processes that live beside it.
 *
 *   crashloop abort ROUNDS   ROUNDS rounds of 100 malloc/free calls, 1 ms apart, then
 *                            "calls N" (every call made) and abort()
 *   crashloop segv ROUNDS    the same, then a store through a null pointer (SIGSEGV)
 *   crashloop kill ROUNDS    the same, then SIGKILL to itself
 *   crashloop live MS        rounds of 100 calls, 1 ms apart, for MS milliseconds, then
 *                            "calls N" and exit(0)
 *   crashloop fork MS        as live, forking once after 20 ms (while the shim's start-up
 *                            work may run): the child goes on as live, then prints
 *                            "child PID calls N" and exits 0; the parent waits for it and
 *                            prints "calls N" (its own) only when the child exited 0
 *
 * Calls are counted as the log records them: every malloc, and every free of a block
 * (free(NULL) is not recorded).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static unsigned long calls;
static void *keep[100];

static void round_of_calls(int round) {
    for (int i = 0; i < 100; i++) {
        if (keep[i]) {
            free(keep[i]);
            calls++;
        }
        keep[i] = malloc(16 + (size_t)(round * 13 + i * 7) % 3000);
        calls++;
    }
}

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: crashloop abort|segv|kill ROUNDS | live MS | fork MS\n");
        return 2;
    }
    long n = atol(argv[2]);
    int aborting = strcmp(argv[1], "abort") == 0, segv = strcmp(argv[1], "segv") == 0;
    if (aborting || segv || strcmp(argv[1], "kill") == 0) {
        for (int r = 0; r < n; r++) {
            round_of_calls(r);
            usleep(1000);
        }
        printf("calls %lu\n", calls);
        fflush(stdout);
        if (aborting) abort();
        if (segv) *(volatile int *)(argc == 42 ? argv[0] : NULL) = 1;
        kill(getpid(), SIGKILL);
        return 7;
    }
    int forking = strcmp(argv[1], "fork") == 0;
    if (strcmp(argv[1], "live") == 0 || forking) {
        double start = now_ms(), end = start + (double)n;
        pid_t child = 0;
        for (int r = 0; now_ms() < end; r++) {
            if (forking && child == 0 && now_ms() - start >= 20) {
                fflush(stdout);
                child = fork();
                if (child < 0) return 5;
                if (child == 0) {
                    /* The child's log holds its own calls only: count afresh. */
                    forking = 0;
                    calls = 0;
                    child = -1;
                }
            }
            round_of_calls(r);
            usleep(1000);
        }
        if (child == -1) {
            printf("child %d calls %lu\n", (int)getpid(), calls);
            fflush(stdout);
            return 0;
        }
        if (child > 0) {
            int st = 0;
            if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 6;
        }
        printf("calls %lu\n", calls);
        fflush(stdout);
        return 0;
    }
    fprintf(stderr, "crashloop: unknown mode %s\n", argv[1]);
    return 2;
}
