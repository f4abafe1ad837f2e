#include <stdlib.h>
#include <stdio.h>
int main(void){char *volatile p = malloc(10); puts(p ? "ok" : "no"); free(p); return 0;}
