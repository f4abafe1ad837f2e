/* tcmalloc needs a little of libstdc++ (std::string, _Rb_tree, set_new_handler, the
 * exception machinery of its operator new), linked statically into the shim so that a C
 * program under the shim does not load libstdc++.so. Linked whole, libstdc++ would bring
 * eh_alloc.o, whose constructor mallocs its 72 KiB emergency exception pool before main in
 * every program. The shim never calls what throws in tcmalloc (operator new, its string
 * helpers): only tc_malloc and the C family, which return NULL. So the four entry points of
 * eh_alloc.o are defined here, and a throw that should never happen aborts with one line
 * instead of allocating its exception. */
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

static void no_exceptions(void) {
    static const char m[] = "shim: tcmalloc backend threw a C++ exception (never expected): aborting\n";
    (void)!write(2, m, sizeof m - 1);
    abort();
}

__attribute__((visibility("hidden"))) void *__cxa_allocate_exception(size_t n) {
    (void)n;
    no_exceptions();
    return NULL;
}
__attribute__((visibility("hidden"))) void __cxa_free_exception(void *p) {
    (void)p;
    no_exceptions();
}
__attribute__((visibility("hidden"))) void *__cxa_allocate_dependent_exception(void) {
    no_exceptions();
    return NULL;
}
__attribute__((visibility("hidden"))) void __cxa_free_dependent_exception(void *p) {
    (void)p;
    no_exceptions();
}
