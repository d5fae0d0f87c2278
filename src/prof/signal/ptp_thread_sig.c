/*
 * ptp_thread_sig.c - the handler's thread tables (see ptp_thread_sig.h for
 * the publication rule). Only their pointers live here; the registry
 * (runtime/ptp_threads.c) maps and publishes the tables.
 *
 * ASYNC-SIGNAL-SAFE FILE: data only.
 */
#include "prof/signal/ptp_thread_sig.h"

_Atomic(ptp_thread_sig *) ptp_g_thread_sigs;
_Atomic(_Atomic uint32_t *) ptp_g_tidmap;
