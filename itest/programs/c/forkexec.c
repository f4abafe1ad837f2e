/* forkexec.c: a parent that allocates and forks twice.
 *   child 1 allocates and frees, then exits normally (its own log, flushed at exit);
 *   child 2 allocates, then execs this program again with the argument "exec";
 *   the exec'd image allocates, runs `/bin/sh -c true` (fork + exec) and exits.
 * Each process prints one JSON line on stdout (write(2), unbuffered) saying its role, pid,
 * parent pid and what it allocated. Sizes are ones no C runtime uses:
 *   parent 7001 (x3), child1 7002 (x5), child2 7004 (x2), exec'd image 7003 (x4). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void say(const char *role, int n, size_t size, const char *extra) {
    char line[512];
    int len = snprintf(line, sizeof line,
                       "{\"role\":\"%s\",\"pid\":%d,\"ppid\":%d,\"mallocs\":%d,\"size\":%zu%s}\n",
                       role, (int)getpid(), (int)getppid(), n, size, extra);
    if (write(1, line, len) != len) exit(3);
}

static void alloc_n(void **v, int n, size_t size) {
    for (int i = 0; i < n; i++) {
        v[i] = malloc(size);
        if (!v[i]) exit(4);
        memset(v[i], 0x5a, size);
    }
}

static void free_n(void **v, int n) {
    for (int i = 0; i < n; i++)
        free(v[i]);
}

static int wait_ok(pid_t pid) {
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv) {
    void *v[8];
    if (argc > 1 && strcmp(argv[1], "exec") == 0) {
        alloc_n(v, 4, 7003);
        pid_t sh = fork();
        if (sh == 0) {
            execl("/bin/sh", "sh", "-c", "true", (char *)NULL);
            _exit(127);
        }
        int ok = sh > 0 && wait_ok(sh);
        char extra[64];
        snprintf(extra, sizeof extra, ",\"sh_pid\":%d,\"sh_ok\":%s", (int)sh, ok ? "true" : "false");
        free_n(v, 4);
        say("exec", 4, 7003, extra);
        return ok ? 0 : 1;
    }

    alloc_n(v, 3, 7001);
    pid_t c1 = fork();
    if (c1 < 0) return 5;
    if (c1 == 0) {
        void *w[8];
        alloc_n(w, 5, 7002);
        free_n(w, 5);
        say("child", 5, 7002, "");
        exit(0);
    }
    int ok1 = wait_ok(c1);

    pid_t c2 = fork();
    if (c2 < 0) return 5;
    if (c2 == 0) {
        void *w[8];
        alloc_n(w, 2, 7004);
        say("child_exec", 2, 7004, "");
        execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
        _exit(127);
    }
    int ok2 = wait_ok(c2);
    free_n(v, 3);
    char extra[128];
    snprintf(extra, sizeof extra, ",\"child\":%d,\"child_exec\":%d,\"children_ok\":%s", (int)c1, (int)c2,
             ok1 && ok2 ? "true" : "false");
    say("parent", 3, 7001, extra);
    return ok1 && ok2 ? 0 : 1;
}
