/* pd_transcript_parse.c - see pd_transcript_parse.h. */
#include "daemon/pd_transcript_parse.h"
#include "common/pt_jsonl.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

static int valid_role(const char *r) {
  return strcmp(r, "user") == 0 || strcmp(r, "assistant") == 0 || strcmp(r, "error") == 0;
}

int pd_transcript_parse(const char *data, size_t len, json_t **out, int *max_turn, char *err,
                        size_t errlen) {
  if (out) *out = NULL;
  if (max_turn) *max_turn = 0;
  if (len > 0 && data[len - 1] != '\n') {
    snprintf(err, errlen, "last line is incomplete (no newline)");
    return -EBADMSG;
  }
  json_t *arr = NULL;
  if (out && !(arr = json_array())) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  int maxt = 0, lineno = 0, r = 0;
  for (const char *p = data; p < data + len;) {
    /* found: the last byte is a '\n' */
    const char *nl = memchr(p, '\n', (size_t)(data + len - p));
    lineno++;
    json_t *e = NULL;
    char perr[160];
    json_int_t tid = 0;
    const char *role = NULL, *text = NULL, *ts = NULL;
    if (pt_jsonl_parse(p, (size_t)(nl - p), &e, perr, sizeof perr) != 0) {
      snprintf(err, errlen, "line %d: %s", lineno, perr);
      r = -EBADMSG;
      break;
    }
    if (json_unpack(e, "{s:I, s:s, s:s, s:s}", "turn_id", &tid, "role", &role, "text", &text,
                    "ts", &ts) != 0 ||
        tid <= 0 || tid > INT_MAX || !valid_role(role)) {
      snprintf(err, errlen, "line %d: bad entry (needs turn_id>0, role, text, ts)", lineno);
      json_decref(e);
      r = -EBADMSG;
      break;
    }
    if (tid > maxt) maxt = (int)tid;
    if (arr && json_array_append_new(arr, e) != 0) {
      snprintf(err, errlen, "out of memory");
      r = -ENOMEM;
      break;
    }
    if (!arr) json_decref(e);
    p = nl + 1;
  }
  if (r < 0) {
    json_decref(arr);
    return r;
  }
  if (out) *out = arr;
  if (max_turn) *max_turn = maxt;
  return 0;
}
