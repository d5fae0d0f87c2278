/*
 * ptp_libc.h - libc's pthread_create, as the library's own threads (the
 * consumer, the ptprof-io helper) start: past the pthread_create
 * interposer (ptp_interpose.c), so the registry never registers them.
 * A unit of its own that calls nothing of the library, so that both the
 * interposer and the units that start threads can use it without a loop.
 *
 * Threads: any thread; not for signal handlers (dlsym on first use).
 * Process-wide state (runtime/ptp_process.h): the resolved pointer.
 */
#ifndef PTP_LIBC_H
#define PTP_LIBC_H

#include <pthread.h>

typedef int (*ptp_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

/* The next pthread_create after ours (a sanitizer's interceptor, else
 * libc's), looked up once; NULL if none. */
ptp_create_fn ptp_libc_pthread_create(void);

/* Starts a thread through it: pthread_create's result (EAGAIN when there
 * is no next definition). */
int ptp_real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                            void *(*start)(void *), void *arg);

#endif
