/* pt_feedback.c - the feedback bundle in memory (see pt_feedback.h). */
#include "common/pt_feedback.h"

#include "common/pt_err.h"
#include "common/pt_sha256.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct attachment {
  json_t *entry; /* deep copy of the catalog entry (own reference) */
  uint8_t *data;
  size_t len;
} attachment;

struct pt_feedback {
  char *message;
  attachment att[PT_FEEDBACK_MAX_ATTACHMENTS];
  size_t n;
};

int pt_feedback_new(pt_feedback **out, const char *message) {
  *out = NULL;
  if (!message) message = "";
  if (strlen(message) > PT_FEEDBACK_MAX_MESSAGE) return -EINVAL;
  pt_feedback *fb = calloc(1, sizeof *fb);
  if (!fb) return -ENOMEM;
  fb->message = strdup(message);
  if (!fb->message) {
    free(fb);
    return -ENOMEM;
  }
  *out = fb;
  return 0;
}

void pt_feedback_del(pt_feedback *fb) {
  if (!fb) return;
  for (size_t i = 0; i < fb->n; i++) {
    json_decref(fb->att[i].entry);
    free(fb->att[i].data);
  }
  free(fb->message);
  free(fb);
}

const char *pt_feedback_message(const pt_feedback *fb) { return fb->message; }

size_t pt_feedback_count(const pt_feedback *fb) { return fb->n; }

const uint8_t *pt_feedback_data(const pt_feedback *fb, size_t i, size_t *len) {
  if (i >= fb->n) return NULL;
  if (len) *len = fb->att[i].len;
  return fb->att[i].data;
}

json_t *pt_feedback_entry(const pt_feedback *fb, size_t i) {
  return i < fb->n ? fb->att[i].entry : NULL;
}

int pt_feedback_add(pt_feedback *fb, json_t *entry, const uint8_t *data, size_t len, char *err,
                    size_t errlen) {
  const char *id = pt_feedback_entry_str(entry, "id");
  const char *sha = pt_feedback_entry_str(entry, "sha256");
  json_t *size = json_object_get(entry, "size");
  if (!json_is_object(entry) || !id || !sha || !pt_feedback_entry_str(entry, "kind") ||
      !json_is_integer(size)) {
    pt_errf(err, errlen, "catalog entry lacks id, kind, size or sha256");
    return -EINVAL;
  }
  if (fb->n == PT_FEEDBACK_MAX_ATTACHMENTS) {
    pt_errf(err, errlen, "at most %d attachments", PT_FEEDBACK_MAX_ATTACHMENTS);
    return -E2BIG;
  }
  for (size_t i = 0; i < fb->n; i++)
    if (strcmp(pt_feedback_entry_str(fb->att[i].entry, "id"), id) == 0) {
      pt_errf(err, errlen, "artifact %s is attached already", id);
      return -EEXIST;
    }
  if ((json_int_t)len != json_integer_value(size)) {
    pt_errf(err, errlen, "artifact %s: received %zu bytes, catalog says %" JSON_INTEGER_FORMAT,
            id, len, json_integer_value(size));
    return -EBADMSG;
  }
  char hex[PT_SHA256_HEX];
  int r = pt_sha256_hex(data, len, hex);
  if (r < 0) {
    pt_errf(err, errlen, "artifact %s: SHA-256 failed", id);
    return r;
  }
  if (strcmp(hex, sha) != 0) {
    pt_errf(err, errlen, "artifact %s: SHA-256 of the received bytes does not match the catalog",
            id);
    return -EBADMSG;
  }
  attachment *a = &fb->att[fb->n];
  a->entry = json_deep_copy(entry);
  a->data = malloc(len ? len : 1);
  if (!a->entry || !a->data) {
    json_decref(a->entry);
    free(a->data);
    a->entry = NULL;
    a->data = NULL;
    pt_errf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  memcpy(a->data, data, len);
  a->len = len;
  fb->n++;
  return 0;
}
