/*
 * pt_snapshot_names.h - the file names of CPU profile snapshots, defined
 * once for the daemon (writes and lists them), the TUI (writes its own) and
 * the tests.
 *
 * A snapshot is "<prefix>yyyymmddThhmmssZ-<seq>.pb.gz" in a profiling/
 * directory (docs/profiling.md). The profiling library keeps its own
 * default prefix ("profile-", ptprof.h): src/prof never includes app code.
 */
#ifndef PT_SNAPSHOT_NAMES_H
#define PT_SNAPSHOT_NAMES_H

#define PT_SNAPSHOT_DAEMON_PREFIX "daemon-profile-" /* polytokend */
#define PT_SNAPSHOT_TUI_PREFIX "tui-profile-"       /* polytoken (TUI) */
#define PT_SNAPSHOT_SUFFIX ".pb.gz"

#endif
