/*
 * ptp_interpose.h - the pthread_create interposer (ptp_interpose.c).
 *
 * ptp_interpose_link: does nothing; ptprof.c calls it so that a static link
 * of libptprof.a always pulls in ptp_interpose.o (and with it the
 * pthread_create override).
 * ptp_real_pthread_create: libc's pthread_create, bypassing registration.
 * Threads: both any thread; neither for signal handlers.
 */
#ifndef PTP_INTERPOSE_H
#define PTP_INTERPOSE_H

#include <pthread.h>

void ptp_interpose_link(void);
int ptp_real_pthread_create(pthread_t *thread, const pthread_attr_t *attr,
                            void *(*start)(void *), void *arg);

#endif
