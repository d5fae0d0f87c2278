#ifndef PT_VERSION_H
#define PT_VERSION_H
/* Version string of this build, e.g. "0.1.0". */
const char *pt_version(void);
/* 1 in the profiling build, 0 in normal and release builds. */
int pt_is_profiling_build(void);
#endif
