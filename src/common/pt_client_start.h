/*
 * pt_client_start.h - connecting to the daemon's socket, starting the
 * daemon when it is not running (internal to the IPC client: pt_client.c
 * calls it; the public discovery helpers pt_client_home,
 * pt_client_find_daemon and pt_client_pid_gone are declared in pt_client.h
 * and defined in pt_client_start.c).
 */
#ifndef PT_CLIENT_START_H
#define PT_CLIENT_START_H

#include "common/pt_client.h"

/* Checks the state root (pt_home_prepare; created when autostart_daemon
 * is set), then connects to <home>/daemon.sock, a socket file of ours
 * whose listener runs as our user (SO_PEERCRED), checked before the fd is
 * handed back, i.e. before anything is sent. When it is missing or
 * refuses and autostart_daemon is set, spawns polytokend (--home home) and
 * waits for its socket (POLYTOKEN_START_TIMEOUT_MS, default 10000).
 * Returns a connected O_NONBLOCK|O_CLOEXEC fd (caller owns it) or a
 * negative errno with err filled: "not_running" (-ENOENT/-ECONNREFUSED, no
 * autostart), "unsafe_state_root" / "unsafe_socket" (-EPERM),
 * "connect_failed", "daemon_start_failed". Blocking; any thread. */
int pt_client_start_connect(const char *home, int autostart_daemon, pt_client_error *err);

#endif
