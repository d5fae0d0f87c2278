/*
 * ptp_errors.c - the public names of errors and drop causes
 * (ptprof_strerror, ptprof_drop_name), and the checks that the public
 * constants are the sampler's own. Calls nothing of the runtime.
 */
#include <errno.h>

#include "ptprof.h"
#include "prof/output/ptp_window.h"
#include "prof/runtime/ptp_siginterpose.h"

_Static_assert(PTP_DROP_RING_FULL == PTPROF_DROP_RING_FULL && PTP_DROP_DUMPING == PTPROF_DROP_DUMPING &&
               PTP_DROP_NO_STACK == PTPROF_DROP_NO_STACK && PTP_DROP_REENTRANT == PTPROF_DROP_REENTRANT &&
               PTP_DROP_THREAD_EXIT == PTPROF_DROP_THREAD_EXIT && PTP_DROP_KERNEL == PTPROF_DROP_KERNEL &&
               PTP_DROP_UNDELIVERED == PTPROF_DROP_UNDELIVERED &&
               PTP_DROP_NO_MEMORY == PTPROF_DROP_NO_MEMORY && PTP_DROP_OWN_WORK == PTPROF_DROP_OWN_WORK &&
               PTP_DROP_BLOCKED == PTPROF_DROP_BLOCKED && PTP_DROP_FD_CLOSED == PTPROF_DROP_FD_CLOSED &&
               PTP_DROP__COUNT == PTPROF_DROP_CAUSES,
               "the public drop causes are the sampler's");
_Static_assert(PTPROF_DROP_CAUSES <= PTPROF_DROPS_MAX, "ptprof_stats.drops holds every cause");
_Static_assert(PTP_SIG_STOP_REPLACED == PTPROF_STOPPED_HANDLER_REPLACED &&
               PTP_SIG_STOP_SIGNALFD == PTPROF_STOPPED_SIGNALFD,
               "the public stop reasons are the interposers'");

const char *ptprof_drop_name(int cause) { return ptp_drop_name(cause); }

const char *ptprof_strerror(int err) {
  switch (err) {
  case 0: return "success";
  case PTPROF_E_FORKED: return "this sampler belongs to the parent process (called in a forked child)";
  case PTPROF_E_LABELS_FULL: return "this thread already has the most labels pushed (PTPROF_LABELS_MAX)";
  case PTPROF_E_LABELS_EMPTY: return "no label pushed on this thread";
  case PTPROF_E_LABEL_TOO_LONG: return "label key or value longer than PTPROF_LABEL_LEN_MAX";
  case PTPROF_E_LABEL_TABLE: return "too many distinct label strings (PTPROF_LABEL_STRINGS_MAX)";
  case -EINVAL: return "invalid argument";
  case -ENOMEM: return "out of memory";
  case -EBUSY: return "another sampler is running in this process, or sampling was stopped for good "
                      "in it (SIGPROF's handler replaced, or read through a signalfd)";
  case -EALREADY: return "sampler already started";
  case -ENOTCONN: return "sampler not started";
  case -EDESTADDRREQ: return "no snapshot directory set";
  case -ENOSPC: return "no space left on the device";
  case -EDQUOT: return "disk quota exceeded";
  case -EROFS: return "snapshot directory is on a read-only file system";
  case -ENOENT: return "snapshot directory does not exist (removed?)";
  case -ENOTDIR: return "snapshot directory path is not a directory";
  case -EACCES: return "permission denied on the snapshot directory";
  case -EPERM: return "operation not permitted";
  case -EIO: return "I/O error";
  case -E2BIG: return "profile too large";
  case -EMFILE: return "too many open files";
  case -EAGAIN: return "resource temporarily unavailable";
  case -ENAMETOOLONG: return "path too long";
  default: return err < 0 ? "system error" : "unknown error";
  }
}
