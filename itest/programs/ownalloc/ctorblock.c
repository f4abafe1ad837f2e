/* ctorblock.c: libctorblock.so. Its constructor allocates two blocks with malloc before main.
 * Loaded as a dependency of the executable, its constructor runs before a preloaded
 * library's (ld.so initialises the executable's dependencies first), and `malloc` resolves
 * to the executable's own when the executable defines and exports one
 * (c_static_jemalloc_ctor, cxx_static_tcmalloc_ctor): the blocks are made by the program's
 * allocator before anything could patch it. The program checks them, grows block 1 with
 * realloc and frees both, whatever allocator then serves its calls. */
#include <stdlib.h>
#include <string.h>

static void *blocks[2];
static const size_t sizes[2] = {100, 3000};

__attribute__((constructor)) static void ctorblock_init(void) {
    for (int w = 0; w < 2; w++) {
        blocks[w] = malloc(sizes[w]);
        if (blocks[w]) memset(blocks[w], 0xc0 + w, sizes[w]);
    }
}

void *ctorblock_get(int which) { return which >= 0 && which < 2 ? blocks[which] : NULL; }
size_t ctorblock_size(int which) { return which >= 0 && which < 2 ? sizes[which] : 0; }
