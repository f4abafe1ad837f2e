/* Loads the library named by argv[1] with dlopen after start-up and calls its plugin_work()
 * thirty times over three seconds, mallocing beside it; prints the work done. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: dlopen_plugin LIBRARY\n");
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    size_t (*work)(void) = (size_t (*)(void))dlsym(h, "plugin_work");
    if (!work) {
        printf("no plugin_work\n");
        return 1;
    }
    size_t n = 0;
    for (int i = 0; i < 30; i++) {
        n += work();
        free(malloc(10 + i));
        usleep(100000);
    }
    printf("work %zu\n", n);
    return 0;
}
