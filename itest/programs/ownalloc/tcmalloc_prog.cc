// tcmalloc_prog.cc: a C++ program statically linked with gperftools' libtcmalloc_minimal.a,
// which defines (and exports) the malloc family, tc_*, and operator new/delete in the
// executable, as MongoDB links tcmalloc.
//
// Built by itest/programs/ownalloc/build.sh as cxx_static_tcmalloc (and, linked with libctorblock.so,
// cxx_static_tcmalloc_ctor: main then checks the two blocks libctorblock's constructor
// allocated with this executable's malloc before main, grows one with realloc and frees
// both).
//
// Usage: PROG [ITERATIONS] (default 1000). Each iteration uses new/delete (sized delete, as
// g++ emits with -fsized-deallocation), new[]/delete[] (with and without an array cookie),
// aligned new (alignas(64) and alignas(4096) objects), nothrow new, explicit calls of
// ::operator new/delete (sized and unsized), std::vector and std::string growth through a
// counting std allocator, and malloc/calloc/realloc/posix_memalign/free. Prints
//   checksum ITERATIONS HEX
//   {"allocs":N,"frees":N,"reallocs":N,"free_sized":N,"calls":{...}}
// allocs = calls that return a new block (every operator new, malloc, calloc,
// posix_memalign); frees = every operator delete and free (never free(NULL), which it also
// calls); reallocs = realloc; free_sized = the sized operator deletes among the frees.
// The calls made before main (the C++ runtime's, libctorblock's) are not counted: compare a
// run with 0 iterations.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>
#include <malloc.h>

#ifdef CTORBLOCK
extern "C" void *ctorblock_get(int which);
extern "C" size_t ctorblock_size(int which);
#endif

namespace {

enum Call {
    NEW, NEW_ARRAY, NEW_ALIGNED, NEW_NOTHROW, OP_NEW, ALLOC_NEW, MALLOC, CALLOC,
    POSIX_MEMALIGN, DELETE_SIZED, DELETE_ARRAY, DELETE_ARRAY_SIZED, DELETE_ALIGNED_SIZED,
    DELETE_NOTHROW, OP_DELETE, OP_DELETE_SIZED, ALLOC_DELETE_SIZED, FREE, FREE_NULL, REALLOC,
    USABLE, CTOR_REALLOC, CTOR_FREE, NCALLS
};
const char *const call_names[NCALLS] = {
    "new T", "new T[] (cookie)", "new T (aligned)", "new (nothrow) T", "::operator new",
    "allocator new", "malloc", "calloc", "posix_memalign", "delete T (sized)",
    "delete[] (no cookie, unsized)", "delete[] (cookie, sized)", "delete T (aligned, sized)",
    "delete nothrow-new'd T (sized)", "::operator delete", "::operator delete (sized)",
    "allocator delete (sized)", "free", "free(NULL)", "realloc", "malloc_usable_size",
    "realloc(ctor block)", "free(ctor block)",
};
enum Class { ALLOC, FREE_, FREE_SIZED, REALLOC_, NONE };
const Class call_class[NCALLS] = {
    ALLOC, ALLOC, ALLOC, ALLOC, ALLOC, ALLOC, ALLOC, ALLOC, ALLOC,
    FREE_SIZED, FREE_, FREE_SIZED, FREE_SIZED, FREE_SIZED, FREE_, FREE_SIZED, FREE_SIZED,
    FREE_, NONE, REALLOC_, NONE, REALLOC_, FREE_,
};
unsigned long calls[NCALLS];

uint64_t sum = 0xcbf29ce484222325ull;
void mix(uint64_t x) {
    for (int i = 0; i < 8; i++) {
        sum ^= (x >> (8 * i)) & 0xff;
        sum *= 0x100000001b3ull;
    }
}

[[noreturn]] void fail(const char *what, unsigned long i) {
    std::fprintf(stderr, "tcmalloc_prog: %s failed (iteration %lu)\n", what, i);
    std::exit(1);
}

// A std allocator that counts: one ::operator new per allocate, one sized ::operator delete
// per deallocate (as std::allocator does).
template <class T> struct Counting {
    using value_type = T;
    Counting() = default;
    template <class U> Counting(const Counting<U> &) {}
    T *allocate(size_t n) {
        calls[ALLOC_NEW]++;
        return static_cast<T *>(::operator new(n * sizeof(T)));
    }
    void deallocate(T *p, size_t n) {
        calls[ALLOC_DELETE_SIZED]++;
        ::operator delete(p, n * sizeof(T));
    }
    template <class U> bool operator==(const Counting<U> &) const { return true; }
    template <class U> bool operator!=(const Counting<U> &) const { return false; }
};
using CString = std::basic_string<char, std::char_traits<char>, Counting<char>>;

struct Node {
    uint64_t v[6];
};
// A destructor makes new[] store an array cookie and delete[] pass the size.
struct Cookie {
    uint64_t v = 7;
    ~Cookie() { mix(v); }
};
struct alignas(64) Line {
    uint64_t w[8];
};
struct alignas(4096) Page {
    unsigned char b[4096];
};

// Called through volatile pointers so that the compiler cannot pair and drop new/delete
// (C++14 allows it to elide allocations).
void *(*volatile op_new)(size_t) = ::operator new;
void (*volatile op_delete)(void *) = ::operator delete;
void (*volatile op_delete_sized)(void *, size_t) = ::operator delete;
void *(*volatile c_malloc)(size_t) = std::malloc;
void (*volatile c_free)(void *) = std::free;

template <class T> T *keep(T *p) {
    asm volatile("" : : "r"(p) : "memory");
    return p;
}

void iteration(unsigned long i) {
    uint64_t s = i * 0x9e3779b97f4a7c15ull;

    Node *n = keep(new Node{{s, s + 1, s + 2, s + 3, s + 4, s + 5}});
    calls[NEW]++;
    mix(n->v[i % 6]);

    size_t an = 1 + i % 40;
    uint32_t *arr = keep(new uint32_t[an]);
    calls[NEW_ARRAY]++;
    for (size_t k = 0; k < an; k++) arr[k] = uint32_t(k * i);
    mix(arr[an - 1]);

    Cookie *ck = keep(new Cookie[1 + i % 5]);
    calls[NEW_ARRAY]++;
    ck[0].v = s;

    Line *line = keep(new Line{});
    calls[NEW_ALIGNED]++;
    if (reinterpret_cast<uintptr_t>(line) % 64) fail("aligned new (64)", i);
    line->w[i % 8] = s;
    mix(line->w[i % 8]);

    Page *page = nullptr;
    if (i % 8 == 0) {
        page = keep(new Page);
        calls[NEW_ALIGNED]++;
        if (reinterpret_cast<uintptr_t>(page) % 4096) fail("aligned new (4096)", i);
        page->b[i % 4096] = uint8_t(i);
        mix(page->b[i % 4096]);
    }

    Node *nt = keep(new (std::nothrow) Node{});
    calls[NEW_NOTHROW]++;
    if (!nt) fail("new (nothrow)", i);
    nt->v[0] = s;

    void *raw = op_new(24 + i % 100);
    calls[OP_NEW]++;
    std::memset(raw, int(i), 24 + i % 100);
    void *raw2 = op_new(40);
    calls[OP_NEW]++;

    {
        std::vector<uint64_t, Counting<uint64_t>> v;
        for (unsigned k = 0; k < 20 + i % 200; k++) v.push_back(k ^ s);
        mix(v.back() + v.size());
        CString str;
        for (unsigned k = 0; k < 5 + i % 20; k++) str += "segment-";
        str += std::to_string(i).c_str();
        mix(str.size());
        mix(uint8_t(str[str.size() / 2]));
    }

    char *m = static_cast<char *>(c_malloc(100 + i % 3000));
    calls[MALLOC]++;
    if (!m) fail("malloc", i);
    std::memset(m, 'm', 100 + i % 3000);
    if (malloc_usable_size(m) < 100 + i % 3000) fail("malloc_usable_size", i);
    calls[USABLE]++;
    size_t big = (i % 16 == 0) ? (1u << 20) + i : 5000 + i % 1000;
    m = static_cast<char *>(std::realloc(m, big));
    calls[REALLOC]++;
    if (!m || m[0] != 'm') fail("realloc", i);
    m[big - 1] = 'e';
    mix(uint8_t(m[big - 1]) + big);

    int *z = static_cast<int *>(std::calloc(10 + i % 10, sizeof(int)));
    calls[CALLOC]++;
    if (!z) fail("calloc", i);
    for (size_t k = 0; k < 10 + i % 10; k++)
        if (z[k]) fail("calloc zeroing", i);

    void *pm = nullptr;
    if (posix_memalign(&pm, 256, 1000) != 0 || !pm) fail("posix_memalign", i);
    calls[POSIX_MEMALIGN]++;
    if (reinterpret_cast<uintptr_t>(pm) % 256) fail("posix_memalign alignment", i);

    c_free(pm);
    calls[FREE]++;
    c_free(z);
    calls[FREE]++;
    c_free(m);
    calls[FREE]++;
    c_free(nullptr);
    calls[FREE_NULL]++;
    op_delete_sized(raw2, 40);
    calls[OP_DELETE_SIZED]++;
    op_delete(raw);
    calls[OP_DELETE]++;
    delete nt;
    calls[DELETE_NOTHROW]++;
    if (page) {
        delete page;
        calls[DELETE_ALIGNED_SIZED]++;
    }
    delete line;
    calls[DELETE_ALIGNED_SIZED]++;
    delete[] ck;
    calls[DELETE_ARRAY_SIZED]++;
    delete[] arr;
    calls[DELETE_ARRAY]++;
    delete n;
    calls[DELETE_SIZED]++;
}

}  // namespace

int main(int argc, char **argv) {
    unsigned long iters = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1000;

#ifdef CTORBLOCK
    for (int w = 0; w < 2; w++) {
        unsigned char *b = static_cast<unsigned char *>(ctorblock_get(w));
        size_t bn = ctorblock_size(w);
        if (!b) fail("ctorblock_get", 0);
        for (size_t k = 0; k < bn; k++)
            if (b[k] != uint8_t(0xc0 + w)) fail("the constructor's block", 0);
        if (malloc_usable_size(b) < bn) fail("malloc_usable_size(the constructor's block)", 0);
        calls[USABLE]++;
        if (w == 1) {
            b = static_cast<unsigned char *>(std::realloc(b, 3 * bn));
            calls[CTOR_REALLOC]++;
            if (!b) fail("realloc(the constructor's block)", 0);
            for (size_t k = 0; k < bn; k++)
                if (b[k] != 0xc1) fail("realloc(the constructor's block) kept the contents", 0);
        }
        mix(b[0]);
        c_free(b);
        calls[CTOR_FREE]++;
    }
#endif

    for (unsigned long i = 0; i < iters; i++) iteration(i);

    unsigned long cls[5] = {0};
    for (int c = 0; c < NCALLS; c++) cls[call_class[c]] += calls[c];
    std::printf("checksum %lu %016llx\n", iters, static_cast<unsigned long long>(sum));
    std::printf("{\"allocs\":%lu,\"frees\":%lu,\"reallocs\":%lu,\"free_sized\":%lu,\"calls\":{",
                cls[ALLOC], cls[FREE_] + cls[FREE_SIZED], cls[REALLOC_], cls[FREE_SIZED]);
    for (int c = 0; c < NCALLS; c++)
        std::printf("%s\"%s\":%lu", c ? "," : "", call_names[c], calls[c]);
    std::printf("}}\n");
    return 0;
}
