/* libtcmalloc_minimal.a is built for executables (-fPIE): its one `throw std::bad_alloc()`
 * (in operator new, which the shim never calls) reaches libstdc++'s typeinfo and vtable of
 * std::bad_alloc PC-relatively, which a shared object cannot do to another's data. build.rs
 * redirects those two references here: local copies whose contents point to libstdc++'s own
 * (type_info compares by name pointer, so a catch of std::bad_alloc still matches). */
extern const void *const _ZTVN10__cxxabiv120__si_class_type_infoE[];
extern const char _ZTSSt9bad_alloc[];
extern const char _ZTISt9exception[];
extern const char _ZTISt9bad_alloc[];
extern void _ZNSt9bad_allocD1Ev(void);
extern void _ZNSt9bad_allocD0Ev(void);
extern void _ZNKSt9bad_alloc4whatEv(void);

__attribute__((visibility("hidden"))) const void *const shimtc_ti_bad_alloc[3] = {
    &_ZTVN10__cxxabiv120__si_class_type_infoE[2], _ZTSSt9bad_alloc, _ZTISt9exception};

__attribute__((visibility("hidden"))) const void *const shimtc_vt_bad_alloc[5] = {
    0, _ZTISt9bad_alloc, (const void *)_ZNSt9bad_allocD1Ev, (const void *)_ZNSt9bad_allocD0Ev,
    (const void *)_ZNKSt9bad_alloc4whatEv};
