/*
 * ptp_interpose.c - pthread_create interposition: every thread created
 * through pthread_create (by the program or any library, e.g. libuv's thread
 * pool) starts in ptp_thread_trampoline, which registers the thread (stack
 * bounds; a timer when a sampler runs) before the real start routine runs.
 *
 * How it binds: the symbol is exported with default visibility. Linked
 * statically into an executable, it takes precedence over libc's for the
 * executable and every shared library (the executable comes first in the
 * global lookup scope). In libptprof.so used with LD_PRELOAD it precedes
 * libc the same way. The real function is found with dlsym(RTLD_NEXT).
 *
 * Cost while no sampler runs: one malloc/free of 16 bytes and the
 * registration (pthread_getattr_np, a mutex) per thread creation.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "ptprof.h"
#include "prof/ptp_interpose.h"
#include "prof/ptp_threads.h"

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static _Atomic(create_fn) real_create;

static create_fn get_real(void) {
  create_fn f = atomic_load_explicit(&real_create, memory_order_acquire);
  if (!f) {
    f = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (f) atomic_store_explicit(&real_create, f, memory_order_release);
  }
  return f;
}

typedef struct tramp {
  void *(*fn)(void *);
  void *arg;
} tramp;

/* noinline: it is a real frame in every thread's stack, between libc's
 * start_thread and the start routine. */
__attribute__((noinline)) static void *ptp_thread_trampoline(void *p) {
  tramp t = *(tramp *)p;
  free(p);
  ptp_threads_on_thread_start((void *)t.fn);
  void *ret = t.fn(t.arg);
  __asm__ volatile("" ::: "memory");   /* keep the call a call, not a tail jump */
  return ret;
}

PTPROF_API int pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                              void *(*start)(void *), void *arg) {
  create_fn real = get_real();
  if (!real) return EAGAIN;
  tramp *t = malloc(sizeof *t);
  if (!t) return real(thread, attr, start, arg);   /* unregistered, still correct */
  t->fn = start;
  t->arg = arg;
  int rc = real(thread, attr, ptp_thread_trampoline, t);
  if (rc != 0) free(t);
  return rc;
}

int ptp_real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                            void *(*start)(void *), void *arg) {
  create_fn real = get_real();
  return real ? real(thread, attr, start, arg) : EAGAIN;
}

void ptp_interpose_link(void) {}
