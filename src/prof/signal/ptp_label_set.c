/*
 * ptp_label_set.c - the per-thread label block the handler copies into
 * each sample (see ptp_label_set.h). Its writers are the thread's own poll
 * seam and runtime/ptp_labels.c (ptprof_labels_push/_pop).
 *
 * ASYNC-SIGNAL-SAFE FILE: data only.
 */
#include "prof/signal/ptp_label_set.h"

__thread ptp_label_set ptp_t_labels __attribute__((tls_model("initial-exec")));
