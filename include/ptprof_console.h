/*
 * ptprof_console.h - task instrumentation and a tokio-console compatible
 * server. DRAFT CONTRACT (owned by the console work).
 */
#ifndef PTPROF_CONSOLE_H
#define PTPROF_CONSOLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
