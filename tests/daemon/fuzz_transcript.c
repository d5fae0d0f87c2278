/*
 * fuzz_transcript.c - libFuzzer harness of the transcript checks
 * (pd_transcript_parse in src/daemon/pd_transcript_parse.c, the core of
 * pd_transcript_read without its I/O); built and run by
 * tests/daemon/transcript_fuzz_test.sh. A transcript is read from disk at
 * every daemon start: a damaged one must be refused with a reason, never
 * crash the daemon or load half.
 *
 * Input: the file's bytes. Checked for every input:
 *   - the result is 0, -EBADMSG or -ENOMEM, with a reason in err on
 *     failure and nothing in *out;
 *   - the same bytes without *out give the same result and highest turn;
 *   - accepted: one entry per line, each with an integer turn_id in
 *     [1, INT_MAX], a known role, string text and ts; the highest turn
 *     is the largest turn_id;
 *   - the accepted entries written back as the daemon writes them
 *     (pt_jsonl_dump, one line each) are accepted again, equal.
 * Any mismatch aborts (a crash for libFuzzer); ASan/UBSan catch the rest.
 */
#include "daemon/pd_transcript_parse.h"
#include "common/pt_jsonl.h"
#include "tests/fuzz_check.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* an exact-size copy: ASan sees any read past it */
  char *b = malloc(size ? size : 1);
  CHECK(b);
  if (size) memcpy(b, data, size);
  json_t *arr = (json_t *)1;
  int maxt = -1, maxt2 = -1;
  char err[256] = "", err2[256] = "";
  int r = pd_transcript_parse(b, size, &arr, &maxt, err, sizeof err);
  CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
  int r2 = pd_transcript_parse(b, size, NULL, &maxt2, err2, sizeof err2);
  CHECK(r2 == r || r == -ENOMEM || r2 == -ENOMEM);
  if (r < 0) {
    CHECK(arr == NULL && err[0] != 0);
  } else {
    CHECK(arr && json_is_array(arr) && maxt2 == maxt);
    size_t lines = 0;
    for (size_t i = 0; i < size; i++) lines += b[i] == '\n';
    CHECK(json_array_size(arr) == lines);
    int want = 0;
    size_t i;
    json_t *e;
    char *all = NULL;
    size_t alllen = 0;
    json_array_foreach(arr, i, e) {
      json_t *tid = json_object_get(e, "turn_id");
      CHECK(json_is_integer(tid) && json_integer_value(tid) >= 1 && json_integer_value(tid) <= INT_MAX);
      const char *role = json_string_value(json_object_get(e, "role"));
      CHECK(role && (!strcmp(role, "user") || !strcmp(role, "assistant") || !strcmp(role, "error")));
      CHECK(json_is_string(json_object_get(e, "text")) && json_is_string(json_object_get(e, "ts")));
      if (json_integer_value(tid) > want) want = (int)json_integer_value(tid);
      char *line;
      size_t len;
      int d = pt_jsonl_dump(e, 1u << 26, &line, &len);
      CHECK(d == 0 || d == -ENOMEM);
      if (d) { free(all); all = NULL; break; }
      char *grown = realloc(all, alllen + len + 1);
      CHECK(grown);
      all = grown;
      memcpy(all + alllen, line, len);
      alllen += len;
      free(line);
    }
    CHECK(maxt == want);
    if (all || json_array_size(arr) == 0) {
      json_t *again = NULL;
      int r3 = pd_transcript_parse(all ? all : "", alllen, &again, NULL, err, sizeof err);
      CHECK(r3 == 0 || r3 == -ENOMEM);
      if (r3 == 0) CHECK(json_equal(again, arr));
      json_decref(again);
    }
    free(all);
    json_decref(arr);
  }
  free(b);
  return 0;
}
