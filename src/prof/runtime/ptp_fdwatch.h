/*
 * ptp_fdwatch.h - the close-family interposers (ptp_fdwatch.c): they
 * define close, close_range, closefrom, dup2 and dup3 for the whole
 * process; nothing else is declared here.
 *
 * ptp_fdwatch_link: does nothing; ptprof.c calls it so that a static link
 * of libptprof.a always pulls ptp_fdwatch.o in.
 */
#ifndef PTP_FDWATCH_H
#define PTP_FDWATCH_H

void ptp_fdwatch_link(void);

#endif
