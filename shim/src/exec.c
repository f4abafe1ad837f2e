/* The variadic exec functions, rebuilt on the hooked execv/execvp/execve (exports.rs) so
 * that the log is flushed before any exec. Same argument handling as glibc's. Exported
 * under their real names by the naked trampolines in exports.rs (a cdylib exports only
 * Rust symbols). */
#include <stdarg.h>
#include <stddef.h>
#include <unistd.h>

#define COLLECT(first, argv, envp_out)                                        \
    size_t n = 1;                                                             \
    va_list ap;                                                               \
    va_start(ap, first);                                                      \
    while (va_arg(ap, const char *) != NULL) n++;                             \
    va_end(ap);                                                               \
    const char *argv[n + 1];                                                  \
    argv[0] = first;                                                          \
    va_start(ap, first);                                                      \
    for (size_t i = 1; i <= n; i++) argv[i] = va_arg(ap, const char *);       \
    envp_out;                                                                 \
    va_end(ap);

__attribute__((visibility("hidden"))) int shim_execl(const char *path, const char *arg, ...) {
    COLLECT(arg, argv, (void)0)
    return execv(path, (char *const *)argv);
}

__attribute__((visibility("hidden"))) int shim_execlp(const char *file, const char *arg, ...) {
    COLLECT(arg, argv, (void)0)
    return execvp(file, (char *const *)argv);
}

__attribute__((visibility("hidden"))) int shim_execle(const char *path, const char *arg, ...) {
    char *const *envp;
    COLLECT(arg, argv, envp = va_arg(ap, char *const *))
    return execve(path, (char *const *)argv, envp);
}
