/*
 * ptp_graveyard.c - names of exited threads (see ptp_graveyard.h).
 *
 * Process-wide state (runtime/ptp_process.h): `grave`, a ring of the
 * GRAVE_N newest exits, guarded by grave.mu. Never freed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "prof/runtime/ptp_graveyard.h"

#define GRAVE_N 256

static struct {
  pthread_mutex_t mu;
  pthread_once_t once;
  struct { uint32_t tid; char name[16]; } ring[GRAVE_N];
  unsigned next;                 /* total puts; ring[next % GRAVE_N] is the oldest */
} grave = { .mu = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

static void fork_prepare(void) { pthread_mutex_lock(&grave.mu); }
static void fork_release(void) { pthread_mutex_unlock(&grave.mu); }
static void init_once(void) { (void)pthread_atfork(fork_prepare, fork_release, fork_release); }

void ptp_graveyard_put(uint32_t tid, const char *name) {
  pthread_once(&grave.once, init_once);
  pthread_mutex_lock(&grave.mu);
  unsigned i = grave.next++ % GRAVE_N;
  grave.ring[i].tid = tid;
  snprintf(grave.ring[i].name, sizeof grave.ring[i].name, "%s", name);
  pthread_mutex_unlock(&grave.mu);
}

int ptp_graveyard_get(uint32_t tid, char name[16]) {
  name[0] = 0;
  int rc = -ENOENT;
  pthread_once(&grave.once, init_once);
  pthread_mutex_lock(&grave.mu);
  for (unsigned i = 0; i < GRAVE_N; i++) {
    unsigned k = (grave.next - 1 - i) % GRAVE_N;   /* newest first */
    if (grave.ring[k].tid == tid) {
      memcpy(name, grave.ring[k].name, 16);
      rc = 0;
      break;
    }
  }
  pthread_mutex_unlock(&grave.mu);
  return rc;
}
