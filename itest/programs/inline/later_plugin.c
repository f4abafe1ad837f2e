#include <stddef.h>
#include <stdlib.h>
void *mi_malloc(size_t n) { return malloc(n); }
void mi_free(void *p) { free(p); }
size_t plugin_work(void) {
    size_t n = 0;
    for (int i = 0; i < 1000; i++) { void *p = mi_malloc(64); n += p != 0; mi_free(p); }
    return n;
}
