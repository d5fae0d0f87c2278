/*
 * fuzz_catalog_load.c - libFuzzer target for the artifact catalog's loader
 * of its persisted state (catalog.json in the state root, read back by
 * pd_catalog_new in src/daemon/pd_catalog.c), called as the daemon calls it:
 * the input is written as <home>/catalog.json, then pd_catalog_new loads it
 * and the next artifacts.list answer is built from what it loaded.
 *
 * Checked besides sanitizers: a file that holds a valid generation (an
 * integer >= 0) and a fingerprint string is taken as is; anything else is
 * damage, after which the generation restarts at the wall clock in
 * milliseconds (so clients never see it go back) and never at 0; the list
 * result always carries that generation. Built and run by
 * tests/daemon/catalog_load_fuzz_test.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>

#include "daemon/pd_catalog.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char home[512], file[600];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *tmp = getenv("TMPDIR");
  snprintf(home, sizeof home, "%s/fuzz-catalog-home.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(home)) { perror("mkdtemp"); abort(); }
  snprintf(file, sizeof file, "%s/catalog.json", home);
  return 0;
}

/* What the loader must have concluded, decided here with jansson directly:
 * 1 and *gen for a usable file, 0 for damage. */
static int expected(const uint8_t *data, size_t size, uint64_t *gen) {
  json_error_t e;
  json_t *o = json_loadb((const char *)data, size, 0, &e);
  json_t *g = o ? json_object_get(o, "generation") : NULL;
  json_t *f = o ? json_object_get(o, "fingerprint") : NULL;
  int ok = json_is_integer(g) && json_integer_value(g) >= 0 && json_is_string(f);
  if (ok) *gen = (uint64_t)json_integer_value(g);
  json_decref(o);
  return ok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0 || (size && write(fd, data, size) != (ssize_t)size)) abort();
  close(fd);
  struct timespec t0;
  clock_gettime(CLOCK_REALTIME, &t0);
  uint64_t before_ms = (uint64_t)t0.tv_sec * 1000u + (uint64_t)t0.tv_nsec / 1000000u;

  pd_catalog *c = NULL;
  if (pd_catalog_new(&c, home) != 0 || !c) abort();
  uint64_t want = 0;
  uint64_t got = pd_catalog_generation(c);
  if (expected(data, size, &want)) {
    if (got != want) {
      fprintf(stderr, "loaded generation %llu, the file says %llu\n", (unsigned long long)got,
              (unsigned long long)want);
      abort();
    }
  } else if (got < before_ms) {
    fprintf(stderr, "damaged catalog.json gave generation %llu (< now %llu ms)\n",
            (unsigned long long)got, (unsigned long long)before_ms);
    abort();
  }
  json_t *res = NULL;
  const char *code = NULL;
  char msg[256];
  if (pd_catalog_list_result(c, 0, 0, &res, &code, msg, sizeof msg) == 0) {
    json_t *g = json_object_get(res, "generation");
    if (!json_is_integer(g) || (uint64_t)json_integer_value(g) != got) abort();
    json_decref(res);
  }
  pd_catalog_del(c);
  return 0;
}
