#include <stdio.h>
#include "common/pt_version.h"
int main(void) { printf("polytokend %s\n", pt_version()); return 0; }
