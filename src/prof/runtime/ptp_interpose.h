/*
 * ptp_interpose.h - the pthread_create interposer (ptp_interpose.c).
 *
 * ptp_interpose_link: does nothing; ptprof.c calls it so that a static link
 * of libptprof.a always pulls in ptp_interpose.o (and with it the
 * pthread_create override).
 * (libc's pthread_create, bypassing registration: ptp_libc.h.)
 * Threads: any thread; not for signal handlers.
 */
#ifndef PTP_INTERPOSE_H
#define PTP_INTERPOSE_H

#include <pthread.h>

void ptp_interpose_link(void);

#endif
