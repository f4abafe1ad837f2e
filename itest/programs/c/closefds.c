// A program that closes every descriptor it did not open and fills the numbers with its own
// pipe, as Firefox's content processes, daemons and shells before exec do, while it
// allocates (so that the shim has frames to write all along). Then it forks a child that
// does the same and execs itself as a third process that allocates.
//
//   closefds MODE        MODE: libc (close() over /proc/self/fd, then dup2 over 3..LAST),
//                        closefrom (closefrom(3), then dup3), raw (the close_range and dup3
//                        system calls themselves, past the C library)
//
// Every number from 3 to LAST becomes a copy of one pipe's write end; the program writes one
// line through it, closes every copy and reads the pipe to its end: exactly that line must
// come out (a byte of the shim's log written to a reused number would come out too). It
// prints one JSON line per process: {"role":..., "pid":..., "pipe_ok":..., "got":N}.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

// Below the soft limit of 1024, with room left above for the shim to move out of a dup2's way.
#define LAST 1000

static volatile unsigned long sink;

static void churn(int rounds) {
    for (int r = 0; r < rounds; r++) {
        void *p[256];
        for (int i = 0; i < 256; i++) {
            p[i] = malloc(16 + (i * 37) % 4000);
            memset(p[i], i, 16);
        }
        for (int i = 0; i < 256; i++) {
            sink += ((unsigned char *)p[i])[3];
            free(p[i]);
        }
    }
}

static void close_all(const char *mode) {
    if (!strcmp(mode, "libc")) {
        int fds[4096], n = 0;
        DIR *d = opendir("/proc/self/fd");
        struct dirent *e;
        while (d && (e = readdir(d)) && n < 4096) {
            int fd = atoi(e->d_name);
            if (fd > 2 && fd != dirfd(d)) fds[n++] = fd;
        }
        if (d) closedir(d);
        for (int i = 0; i < n; i++) close(fds[i]);
    } else if (!strcmp(mode, "closefrom")) {
        closefrom(3);
    } else {
        syscall(SYS_close_range, 3, ~0U, 0);
    }
}

static void fill(const char *mode, int w) {
    for (int fd = 3; fd <= LAST; fd++) {
        if (fd == w) continue;
        if (!strcmp(mode, "libc")) dup2(w, fd);
        else if (!strcmp(mode, "closefrom")) dup3(w, fd, 0);
        else syscall(SYS_dup3, w, fd, 0);
    }
}

// Closes all, fills every number with the pipe while allocating, writes one line, reads the
// pipe back. Returns 1 when exactly the line came out.
static int run(const char *mode, const char *role, int *got) {
    churn(200);
    close_all(mode);
    int p[2];
    if (pipe(p) != 0) return 0;
    // The ends at the top of the range, where the fill does not reach them.
    int r = fcntl(p[0], F_DUPFD, LAST + 1), w = fcntl(p[1], F_DUPFD, LAST + 2);
    close(p[0]);
    close(p[1]);
    if (r < 0 || w < 0) return 0;
    fill(mode, w);
    // Allocate with the numbers taken: the shim writes frames now (and at the exit flush).
    churn(2000);
    usleep(300 * 1000);
    churn(2000);
    char line[64];
    int len = snprintf(line, sizeof line, "%s %d\n", role, (int)getpid());
    if (write(w, line, len) != len) return 0;
    syscall(SYS_close_range, 3, LAST, 0);
    close(w);
    char buf[1 << 16];
    int n = 0, k;
    while ((k = read(r, buf + n, sizeof buf - n)) > 0) n += k;
    close(r);
    *got = n;
    return n == len && !memcmp(buf, line, len);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: closefds libc|closefrom|raw [exec]\n");
        return 2;
    }
    const char *mode = argv[1];
    int got = 0, ok;
    if (argc > 2) {
        ok = run(mode, "exec", &got);
        printf("{\"role\":\"exec\",\"pid\":%d,\"pipe_ok\":%s,\"got\":%d}\n", (int)getpid(), ok ? "true" : "false", got);
        return ok ? 0 : 1;
    }
    fflush(stdout);
    pid_t c = fork();
    if (c == 0) {
        ok = run(mode, "child", &got);
        printf("{\"role\":\"child\",\"pid\":%d,\"pipe_ok\":%s,\"got\":%d}\n", (int)getpid(), ok ? "true" : "false", got);
        fflush(stdout);
        execl("/proc/self/exe", "closefds", mode, "exec", (char *)0);
        _exit(3);
    }
    ok = run(mode, "parent", &got);
    int st = 0;
    waitpid(c, &st, 0);
    printf("{\"role\":\"parent\",\"pid\":%d,\"pipe_ok\":%s,\"got\":%d,\"child_status\":%d}\n", (int)getpid(),
           ok ? "true" : "false", got, st);
    return ok && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
