/*
 * flame_render.c - writes the flame graph page of a profile (pt_flame.h),
 * for the browser test (tests/common/flame_browser_test.sh) and the
 * benchmark (bench/flame/run.sh). Not the user's command: that is
 * `polytoken profile view`.
 *
 * usage: flame_render PROFILE[.pb.gz] OUT.html [--base BASE] [--type T]
 *                     [--title S] [--normalize]
 * Exit 0, or 1 with one line on stderr. Prints "bytes=N" on success.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pt_flame.h"
#include "common/pt_gunzip.h"
#include "common/pt_pprof_read.h"

static int load(const char *path, pt_pprof **out) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "flame_render: %s: %s\n", path, strerror(errno));
    return -1;
  }
  uint8_t *d = NULL;
  size_t n = 0, cap = 0;
  for (;;) {
    if (n == cap) {
      cap = cap ? cap * 2 : 1 << 16;
      uint8_t *q = realloc(d, cap);
      if (!q) abort();
      d = q;
    }
    size_t k = fread(d + n, 1, cap - n, f);
    if (!k) break;
    n += k;
  }
  fclose(f);
  uint8_t *raw = d;
  size_t rn = n;
  if (pt_is_gzip(d, n)) {
    int r = pt_gunzip(d, n, 0, &raw, &rn);
    if (r) {
      fprintf(stderr, "flame_render: %s: gunzip: %s\n", path, strerror(-r));
      free(d);
      return -1;
    }
    free(d);
  }
  char err[256] = "";
  int r = pt_pprof_read(raw, rn, NULL, out, err, sizeof err);
  free(raw);
  if (r) {
    fprintf(stderr, "flame_render: %s: %s\n", path, err);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: flame_render PROFILE OUT.html [--base BASE] [--type T] [--title S] [--normalize]\n");
    return 2;
  }
  pt_flame_opts o;
  pt_flame_opts_init(&o);
  o.title = argv[1];
  const char *base = NULL;
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "--base") && i + 1 < argc) base = argv[++i];
    else if (!strcmp(argv[i], "--type") && i + 1 < argc) o.sample_type = argv[++i];
    else if (!strcmp(argv[i], "--title") && i + 1 < argc) o.title = argv[++i];
    else if (!strcmp(argv[i], "--normalize")) o.diff_normalize = 1;
    else {
      fprintf(stderr, "flame_render: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  pt_pprof *p = NULL, *b = NULL;
  if (load(argv[1], &p)) return 1;
  if (base) {
    if (load(base, &b)) return 1;
    o.base = b;
    o.base_title = base;
  }
  char *html = NULL, err[256] = "";
  size_t len = 0;
  int r = pt_flame_html(p, &o, &html, &len, err, sizeof err);
  if (r) {
    fprintf(stderr, "flame_render: %s (%s)\n", err, strerror(-r));
    return 1;
  }
  FILE *f = fopen(argv[2], "wb");
  if (!f || fwrite(html, 1, len, f) != len || fclose(f)) {
    fprintf(stderr, "flame_render: cannot write %s\n", argv[2]);
    return 1;
  }
  printf("bytes=%zu\n", len);
  free(html);
  pt_pprof_free(p);
  pt_pprof_free(b);
  return 0;
}
