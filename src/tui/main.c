#include <stdio.h>
#include "common/pt_version.h"
int main(void) { printf("polytoken %s\n", pt_version()); return 0; }
