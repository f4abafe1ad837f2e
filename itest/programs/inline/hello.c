#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
    unsigned long sum = 0;
    for (int i = 0; i < 1000; i++) {
        char *p = malloc(64 + i);
        memset(p, i & 0xff, 64 + i);
        sum += (unsigned char)p[i / 2];
        free(p);
    }
    printf("hello from a compiled program: %lu\n", sum);
    return 0;
}
