#include "pt_config.h"
#include "common/pt_version.h"

const char *pt_version(void) { return PT_VERSION; }
int pt_is_profiling_build(void) { return PT_PROFILING; }
