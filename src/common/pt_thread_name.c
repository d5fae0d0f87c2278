/* pt_thread_name.c - naming pool threads once (see pt_thread_name.h). */
#include "common/pt_thread_name.h"

#include <pthread.h>
#include <string.h>

/* One flag per thread for the whole program (a static in the header would
 * be one per translation unit). */
static __thread int named;

void pt_thread_name_once(const char *name) {
  if (named) return;
  named = 1;
  char n[16];
  size_t len = strlen(name);
  if (len > 15) len = 15;
  memcpy(n, name, len);
  n[len] = 0;
  (void)pthread_setname_np(pthread_self(), n);
}
