/* pd_json_alloc.c - jansson's allocator in the daemon. See pd_json_alloc.h. */
#include "pt_config.h"
#include "daemon/pd_json_alloc.h"

#include <jansson.h>
#include <stdlib.h>

static _Thread_local unsigned long t_failures;

#if PT_FAULT_INJECTION
/* Test builds only. Written before the test's jansson use, on its thread. */
static void *(*g_malloc)(size_t) = malloc;
static void (*g_free)(void *) = free;

void pd_json_alloc_set_backend(void *(*malloc_fn)(size_t), void (*free_fn)(void *)) {
  g_malloc = malloc_fn ? malloc_fn : malloc;
  g_free = free_fn ? free_fn : free;
}
#define BACKEND_MALLOC(n) g_malloc(n)
#define BACKEND_FREE(p) g_free(p)
#else
void pd_json_alloc_set_backend(void *(*malloc_fn)(size_t), void (*free_fn)(void *)) {
  (void)malloc_fn;
  (void)free_fn;
}
#define BACKEND_MALLOC(n) malloc(n)
#define BACKEND_FREE(p) free(p)
#endif

static void *json_malloc(size_t n) {
  void *p = BACKEND_MALLOC(n);
  if (!p) t_failures++;
  return p;
}

static void json_free(void *p) { BACKEND_FREE(p); }

void pd_json_alloc_install(void) { json_set_alloc_funcs(json_malloc, json_free); }

unsigned long pd_json_alloc_failures(void) { return t_failures; }
