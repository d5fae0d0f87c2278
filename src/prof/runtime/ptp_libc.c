/*
 * ptp_libc.c - libc's pthread_create (see ptp_libc.h).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>

#include "prof/runtime/ptp_libc.h"

static _Atomic(void *) next_create;

ptp_create_fn ptp_libc_pthread_create(void) {
  void *f = atomic_load_explicit(&next_create, memory_order_acquire);
  if (!f) {
    f = dlsym(RTLD_NEXT, "pthread_create");
    if (f) atomic_store_explicit(&next_create, f, memory_order_release);
  }
  return (ptp_create_fn)f;
}

int ptp_real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                            void *(*start)(void *), void *arg) {
  ptp_create_fn real = ptp_libc_pthread_create();
  return real ? real(thread, attr, start, arg) : EAGAIN;
}
