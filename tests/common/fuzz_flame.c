/*
 * fuzz_flame.c - libFuzzer target for the flame graph page
 * (src/common/pt_flame.c, pt_flame_model.c, pt_flame_json.c) on profiles
 * read by pt_pprof_read from the fuzzer's bytes, seeded with real snapshots
 * of this project (tests/common/fuzz_seeds/pprof_read).
 *
 * For every input the reader accepts, pt_flame_html (options picked by the
 * last byte: sample type, the profile as its own base, small caps) returns
 * 0 or a documented error with a message, never crashes; on success:
 *  - the page is NUL-free text of the length returned, its only "</script"
 *    are the ends of its two script elements, and the data holds no '<';
 *  - the data is valid JSON (jansson) whose tree is a preorder (depth 0
 *    once, then each at most one deeper than the one before), every frame,
 *    node, label set and string index is in range, every row's values sum to
 *    the totals, and with a base, the base's too.
 * Built and run by tests/common/flame_fuzz_test.sh.
 */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pt_flame.h"
#include "common/pt_pprof_read.h"
#include "tests/fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t arr_n(json_t *o, const char *k) {
  json_t *a = json_object_get(o, k);
  CHECK(json_is_array(a));
  return json_array_size(a);
}

static json_int_t at(json_t *o, const char *k, size_t i) {
  json_t *v = json_array_get(json_object_get(o, k), i);
  CHECK(json_is_integer(v));
  return json_integer_value(v);
}

static void check_rows(json_t *rows, size_t n_nodes, size_t n_ls, size_t n_types, json_t *totals) {
  size_t n = arr_n(rows, "node");
  CHECK(arr_n(rows, "labelset") == n);
  json_t *vals = json_object_get(rows, "values");
  CHECK(json_array_size(vals) == n_types && json_array_size(totals) == n_types);
  for (size_t i = 0; i < n; i++) {
    CHECK(at(rows, "node", i) >= 0 && (size_t)at(rows, "node", i) < n_nodes);
    CHECK(at(rows, "labelset", i) >= 0 && (size_t)at(rows, "labelset", i) < n_ls);
  }
  for (size_t t = 0; t < n_types; t++) {
    json_t *col = json_array_get(vals, t);
    CHECK(json_array_size(col) == n);
    json_int_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += json_integer_value(json_array_get(col, i));
    CHECK(sum == json_integer_value(json_array_get(totals, t)));
  }
}

static void check_page(const char *html, size_t len, int with_base) {
  CHECK(strlen(html) == len);
  int ends = 0;
  for (const char *s = html; (s = strstr(s, "</script")); s++) ends++;
  CHECK(ends == 2);
  const char *open = "<script type=\"application/json\" id=\"pt-data\">";
  const char *a = strstr(html, open);
  CHECK(a);
  a += strlen(open);
  const char *e = strstr(a, "</script>");
  CHECK(e && !memchr(a, '<', (size_t)(e - a)));
  json_error_t je;
  json_t *j = json_loadb(a, (size_t)(e - a), JSON_ALLOW_NUL, &je);
  CHECK(j);
  size_t ns = arr_n(j, "strings");
  json_t *fr = json_object_get(j, "frames"), *nd = json_object_get(j, "nodes");
  size_t nf = arr_n(fr, "name"), nn = arr_n(nd, "depth");
  CHECK(arr_n(fr, "file") == nf && arr_n(fr, "kind") == nf);
  for (size_t i = 0; i < nf; i++) {
    CHECK(at(fr, "name", i) >= 0 && (size_t)at(fr, "name", i) < ns);
    CHECK(at(fr, "file", i) >= 0 && (size_t)at(fr, "file", i) < ns);
    CHECK(at(fr, "kind", i) >= 0 && at(fr, "kind", i) <= 2);
  }
  CHECK(nn >= 1 && arr_n(nd, "frame") == nn && arr_n(nd, "line") == nn);
  CHECK(at(nd, "depth", 0) == 0 && at(nd, "frame", 0) == -1);
  for (size_t i = 1; i < nn; i++) {
    CHECK(at(nd, "depth", i) >= 1 && at(nd, "depth", i) <= at(nd, "depth", i - 1) + 1);
    CHECK(at(nd, "frame", i) >= 0 && (size_t)at(nd, "frame", i) < nf);
  }
  json_t *ls = json_object_get(j, "labelsets");
  size_t nls = json_array_size(ls);
  CHECK(nls >= 1 && json_array_size(json_array_get(ls, 0)) == 0);
  for (size_t i = 0; i < nls; i++) {
    json_t *p = json_array_get(ls, i);
    CHECK(json_array_size(p) % 2 == 0);
    for (size_t k = 0; k < json_array_size(p); k++) {
      json_int_t x = json_integer_value(json_array_get(p, k));
      CHECK(x >= 0 && (size_t)x < ns);
    }
  }
  size_t nt = json_array_size(json_object_get(json_object_get(j, "profile"), "sample_types"));
  CHECK(nt >= 1);
  json_int_t dt = json_integer_value(json_object_get(j, "default_type"));
  CHECK(dt >= 0 && (size_t)dt < nt);
  check_rows(json_object_get(j, "rows"), nn, nls, nt, json_object_get(j, "totals"));
  if (with_base) check_rows(json_object_get(j, "base_rows"), nn, nls, nt, json_object_get(j, "base_totals"));
  else CHECK(json_is_null(json_object_get(j, "base_rows")));
  json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint8_t *in = malloc(size ? size : 1); /* exact size: ASan sees any overread */
  if (!in) return 0;
  memcpy(in, data, size);
  pt_pprof_limits lim = {0, (size_t)16 << 20};
  pt_pprof *p = NULL;
  if (pt_pprof_read(in, size, &lim, &p, NULL, 0) == 0) {
    uint8_t pick = size ? in[size - 1] : 0;
    pt_flame_opts o;
    pt_flame_opts_init(&o);
    if (pick & 1) o.sample_type = "samples";
    if (pick & 2) o.base = p;
    if ((pick & 0x1c) == 0x1c) o.max_nodes = 1 + pick % 7;
    if ((pick & 0xe0) == 0xe0) o.max_output = 4096 + (size_t)pick * 100;
    if (pick % 11 == 0) o.title = (const char *)in; /* any bytes, NUL-terminated below? no: */
    char title[64];
    if (o.title) { /* the input's first bytes as a title, NUL-terminated */
      size_t k = size < sizeof title - 1 ? size : sizeof title - 1;
      memcpy(title, in, k);
      title[k] = 0;
      o.title = title;
    }
    char *html = (char *)&lim, err[256] = ""; /* must be reset to NULL on error */
    size_t len = 1;
    int r = pt_flame_html(p, &o, &html, &len, err, sizeof err);
    if (r == 0) {
      check_page(html, len, o.base != NULL);
      free(html);
    } else {
      CHECK(r == -EINVAL || r == -EFBIG || r == -ENOMEM);
      CHECK(html == NULL && len == 0 && err[0] != '\0');
    }
    pt_pprof_free(p);
  }
  free(in);
  return 0;
}
