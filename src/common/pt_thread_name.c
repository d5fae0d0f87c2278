/* pt_thread_name.c - naming pool threads after their job (see
 * pt_thread_name.h). */
#include "common/pt_thread_name.h"

#include <pthread.h>
#include <string.h>

/* The name this thread was last given here (one per thread for the whole
 * program; a static in the header would be one per translation unit).
 * Compared by pointer first: callers pass the header's constants. */
static __thread const char *current;

void pt_thread_name_job(const char *name) {
  if (current == name || (current && strcmp(current, name) == 0)) return;
  current = name;
  char n[16];
  size_t len = strlen(name);
  if (len > 15) len = 15;
  memcpy(n, name, len);
  n[len] = 0;
  (void)pthread_setname_np(pthread_self(), n);
}
