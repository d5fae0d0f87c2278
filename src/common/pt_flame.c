/*
 * pt_flame.c - the flame graph page (pt_flame.h): checks the options,
 * builds the model (pt_flame_model.c), and fills the page's template with
 * the title, style, data (pt_flame_json.c) and script.
 */
#include "common/pt_flame.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pt_err.h"
#include "common/pt_flame_assets.h"
#include "common/pt_flame_json.h"
#include "common/pt_flame_model.h"

void pt_flame_opts_init(pt_flame_opts *o) { memset(o, 0, sizeof *o); }

static bool str_is(const pt_pprof *p, uint32_t i, const char *s, size_t n) {
  return p->strings[i].len == n && !memcmp(p->strings[i].s, s, n);
}

/* "type/unit" of type t, into buf (truncated to fit). */
static void type_name(const pt_pprof *p, size_t t, char *buf, size_t len) {
  snprintf(buf, len, "%s/%s", pt_pprof_string(p, p->sample_types[t].type),
           pt_pprof_string(p, p->sample_types[t].unit));
}

/* The sample type the page shows first (see pt_flame_opts.sample_type). */
static int pick_type(const pt_pprof *p, const char *want, size_t *out, char *err, size_t errlen) {
  size_t n = p->n_sample_types;
  if (!want) {
    *out = n - 1;
    if (p->default_sample_type)
      for (size_t t = 0; t < n; t++)
        if (str_is(p, p->sample_types[t].type, pt_pprof_string(p, p->default_sample_type),
                   p->strings[p->default_sample_type].len)) {
          *out = t;
          break;
        }
    return 0;
  }
  const char *slash = strchr(want, '/');
  size_t tl = slash ? (size_t)(slash - want) : strlen(want);
  for (size_t t = 0; t < n; t++)
    if (str_is(p, p->sample_types[t].type, want, tl) &&
        (!slash || str_is(p, p->sample_types[t].unit, slash + 1, strlen(slash + 1)))) {
      *out = t;
      return 0;
    }
  char have[256] = "";
  for (size_t t = 0, k = 0; t < n && k < sizeof have - 1; t++) {
    char one[128];
    type_name(p, t, one, sizeof one);
    k += (size_t)snprintf(have + k, sizeof have - k, "%s%s", t ? ", " : "", one);
  }
  pt_errf(err, errlen, "the profile has no sample type '%s' (it has: %s)", want, have);
  return -EINVAL;
}

/* Appends the template with its markers filled. */
static void fill(pt_flame_buf *b, const pt_flame_json_in *in) {
  const char *t = pt_flame_asset_html, *end = t + pt_flame_asset_html_len;
  while (t < end && !b->err) {
    const char *at = memchr(t, '@', (size_t)(end - t));
    if (!at) {
      pt_flame_buf_raw(b, t, (size_t)(end - t));
      break;
    }
    pt_flame_buf_raw(b, t, (size_t)(at - t));
    const char *close = memchr(at + 1, '@', (size_t)(end - at - 1));
    size_t kl = close ? (size_t)(close - at - 1) : 0;
    if (close && kl == 5 && !memcmp(at + 1, "TITLE", 5)) {
      pt_flame_buf_html(b, in->title, strlen(in->title));
    } else if (close && kl == 3 && !memcmp(at + 1, "CSS", 3)) {
      pt_flame_buf_raw(b, pt_flame_asset_css, pt_flame_asset_css_len);
    } else if (close && kl == 4 && !memcmp(at + 1, "DATA", 4)) {
      pt_flame_json_write(in, b);
    } else if (close && kl == 2 && !memcmp(at + 1, "JS", 2)) {
      pt_flame_buf_raw(b, pt_flame_asset_js, pt_flame_asset_js_len);
    } else {
      pt_flame_buf_raw(b, "@", 1); /* not a marker */
      t = at + 1;
      continue;
    }
    t = close + 1;
  }
}

int pt_flame_html(const pt_pprof *prof, const pt_flame_opts *opt, char **out, size_t *outlen,
                  char *err, size_t errlen) {
  pt_flame_opts def;
  if (!opt) {
    pt_flame_opts_init(&def);
    opt = &def;
  }
  *out = NULL;
  *outlen = 0;
  size_t type;
  int r = pick_type(prof, opt->sample_type, &type, err, errlen);
  if (r) return r;
  pt_flame_model *m = NULL;
  if ((r = pt_flame_model_build(prof, opt->base, opt->max_nodes, &m, err, errlen))) return r;
  if (opt->base) {
    bool any = false;
    for (size_t t = 0; t < m->n_types; t++) any |= m->base_type[t] >= 0;
    if (!any) {
      char one[128];
      type_name(prof, type, one, sizeof one);
      pt_errf(err, errlen,
              "the base profile shares no sample type with the profile (which has %s%s)", one,
              prof->n_sample_types > 1 ? ", ..." : "");
      pt_flame_model_free(m);
      return -EINVAL;
    }
  }
  pt_flame_json_in in = {
      .m = m,
      .cur = prof,
      .base = opt->base,
      .title = opt->title ? opt->title : "Profile",
      .base_title = opt->base_title ? opt->base_title : "base",
      .default_type = type,
      .diff_normalize = opt->diff_normalize != 0,
  };
  pt_flame_buf b = {.max = opt->max_output ? opt->max_output : PT_FLAME_MAX_OUTPUT};
  fill(&b, &in);
  pt_flame_model_free(m);
  if (b.err) {
    if (b.err == -EFBIG)
      pt_errf(err, errlen, "the page would be over %zu bytes (max_output); view a shorter window",
              b.max);
    else
      pt_errf(err, errlen, "out of memory writing the page");
    free(b.s);
    return b.err;
  }
  *out = b.s;
  *outlen = b.n;
  return 0;
}
