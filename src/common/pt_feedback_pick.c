/* pt_feedback_pick.c - a catalog entry by id or kind (see pt_feedback_pick.h). */
#include "common/pt_feedback_pick.h"

#include "common/pt_feedback.h"

#include <string.h>

json_t *pt_feedback_pick(json_t *entries, const char *kind_or_id) {
  size_t i;
  json_t *e, *best = NULL;
  if (!json_is_array(entries) || !kind_or_id) return NULL;
  json_array_foreach(entries, i, e) {
    const char *id = pt_feedback_entry_str(e, "id");
    if (id && strcmp(id, kind_or_id) == 0) return e;
  }
  json_int_t best_t = 0;
  json_array_foreach(entries, i, e) {
    const char *k = pt_feedback_entry_str(e, "kind");
    if (!k || strcmp(k, kind_or_id) != 0) continue;
    json_int_t t = json_integer_value(json_object_get(e, "created_unix"));
    if (!best || t > best_t) {
      best = e;
      best_t = t;
    }
  }
  return best;
}
