/* The throwing C++ operator new of a program's own allocator, patched (see wrappers.rs).
 *
 * operator new throws std::bad_alloc: an exception can only unwind through frames that
 * have unwind tables and no Rust frame (panic=abort), so these entry points are C, built
 * with -fexceptions. Recorded: the call is recorded in two halves around the original
 * (hot.rs), and a cleanup leaves the shim if the original throws. Switched: the backend
 * serves it; on failure, the new-handler loop and the throw happen here, as the C++
 * runtime does them. */
#include <stddef.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

struct shim_open_call { void *st; unsigned long long t0; unsigned open; };

void shim_call_begin(struct shim_open_call *c);
void shim_call_end(struct shim_open_call *c, void *p, size_t size, size_t align);
void shim_call_abandon(struct shim_open_call *c);
void *shim_cxx_new_switched(size_t n, size_t align);
int shim_cxx_switched(void);
size_t shim_cxx_original(int aligned, int slot);

static void leave_on_unwind(struct shim_open_call *c) {
    if (c->open) shim_call_abandon(c);
}

typedef void (*handler_fn)(void);

/* The C++ runtime's new-handler loop, then std::bad_alloc (found at run time: the shim does
 * not link the C++ runtime; a program that calls operator new has it). */
__attribute__((noinline)) static void *out_of_memory(size_t n, size_t align) {
    handler_fn (*get)(void) = (handler_fn (*)(void))dlsym(RTLD_DEFAULT, "_ZSt15get_new_handlerv");
    for (;;) {
        handler_fn h = get ? get() : NULL;
        if (!h) {
            void (*thr)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "_ZSt17__throw_bad_allocv");
            if (thr) thr();
            static const char msg[] = "shim: operator new: out of memory\n";
            (void)!write(2, msg, sizeof msg - 1);
            abort();
        }
        h();
        void *p = shim_cxx_new_switched(n, align);
        if (p) return p;
    }
}

#define NEW_GLUE(S)                                                                          \
    static void *shim_cxx_new_##S(size_t n) {                                            \
        if (shim_cxx_switched()) {                                                           \
            void *p = shim_cxx_new_switched(n, 0);                                           \
            return p ? p : out_of_memory(n, 0);                                              \
        }                                                                                    \
        void *(*orig)(size_t) = (void *(*)(size_t))shim_cxx_original(0, S);                  \
        struct shim_open_call c __attribute__((cleanup(leave_on_unwind))) = {0, 0, 0};       \
        shim_call_begin(&c);                                                                 \
        void *p = orig(n);                                                                   \
        shim_call_end(&c, p, n, 0);                                                          \
        return p;                                                                            \
    }                                                                                        \
    static void *shim_cxx_new_aligned_##S(size_t n, size_t al) {               \
        if (shim_cxx_switched()) {                                                           \
            void *p = shim_cxx_new_switched(n, al);                                          \
            return p ? p : out_of_memory(n, al);                                             \
        }                                                                                    \
        void *(*orig)(size_t, size_t) = (void *(*)(size_t, size_t))shim_cxx_original(1, S); \
        struct shim_open_call c __attribute__((cleanup(leave_on_unwind))) = {0, 0, 0};       \
        shim_call_begin(&c);                                                                 \
        void *p = orig(n, al);                                                               \
        shim_call_end(&c, p, n, al);                                                         \
        return p;                                                                            \
    }

NEW_GLUE(0)
NEW_GLUE(1)
NEW_GLUE(2)
NEW_GLUE(3)
NEW_GLUE(4)
NEW_GLUE(5)
NEW_GLUE(6)
NEW_GLUE(7)

#define GLUE_TABLE(name) {name##0, name##1, name##2, name##3, name##4, name##5, name##6, name##7}
__attribute__((visibility("hidden"))) void *const shim_cxx_new_glue[8] = GLUE_TABLE(shim_cxx_new_);
__attribute__((visibility("hidden"))) void *const shim_cxx_new_aligned_glue[8] = GLUE_TABLE(shim_cxx_new_aligned_);
