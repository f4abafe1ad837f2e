/* short_threads.c: starts N short-lived threads one after another (each makes 20
 * malloc/free pairs), then prints {"threads":N,"pairs_per_thread":20,"vmhwm_kb":K}: the
 * shim must reclaim each thread's state at its exit, so memory stays flat. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *work(void *arg) {
    (void)arg;
    for (int i = 0; i < 20; i++) {
        void *volatile p = malloc(32 + i);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 3000;
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, work, NULL) != 0) return 1;
        pthread_join(t, NULL);
    }
    long hwm = 0;
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) hwm = atol(line + 6);
    if (f) fclose(f);
    printf("{\"threads\":%d,\"pairs_per_thread\":20,\"vmhwm_kb\":%ld}\n", n, hwm);
    return 0;
}
