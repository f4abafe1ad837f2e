/* A known request mix for `shimlog stats --classes`' test (itest/tests/classes.rs): blocks of
 * five sizes, all live at once, then freed. It allocates nothing else (no stdio), so its log
 * holds exactly these 185 allocations:
 *
 *   100 x 100 B, 50 x 600 B, 20 x 2100 B, 10 x 5000 B, 5 x 10000 B */
#include <stdlib.h>
#include <string.h>

static const size_t SIZES[] = {100, 600, 2100, 5000, 10000};
static const int COUNTS[] = {100, 50, 20, 10, 5};

int main(void) {
    void *blocks[185];
    int n = 0;
    for (int k = 0; k < 5; k++) {
        for (int i = 0; i < COUNTS[k]; i++) {
            blocks[n] = malloc(SIZES[k]);
            if (!blocks[n])
                return 1;
            memset(blocks[n], 1, SIZES[k]);
            n++;
        }
    }
    for (int i = 0; i < n; i++)
        free(blocks[i]);
    return 0;
}
