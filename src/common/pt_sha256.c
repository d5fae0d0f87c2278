/* pt_sha256.c - SHA-256 via OpenSSL EVP (see pt_sha256.h). */
#include "pt_sha256.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <openssl/evp.h>

struct pt_sha256 {
  EVP_MD_CTX *ctx;
};

pt_sha256 *pt_sha256_new(void) {
  pt_sha256 *h = calloc(1, sizeof *h);
  if (!h) return NULL;
  h->ctx = EVP_MD_CTX_new();
  if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1) {
    pt_sha256_del(h);
    return NULL;
  }
  return h;
}

int pt_sha256_update(pt_sha256 *h, const void *data, size_t len) {
  if (len == 0) return 0;
  return EVP_DigestUpdate(h->ctx, data, len) == 1 ? 0 : -EIO;
}

int pt_sha256_final(pt_sha256 *h, char hex[PT_SHA256_HEX]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(h->ctx, md, &n) != 1 || n != PT_SHA256_LEN) return -EIO;
  static const char digits[] = "0123456789abcdef";
  for (unsigned i = 0; i < n; i++) {
    hex[2 * i] = digits[md[i] >> 4];
    hex[2 * i + 1] = digits[md[i] & 15];
  }
  hex[2 * n] = '\0';
  return 0;
}

pt_sha256 *pt_sha256_dup(const pt_sha256 *h) {
  pt_sha256 *d = calloc(1, sizeof *d);
  if (!d) return NULL;
  d->ctx = EVP_MD_CTX_new();
  if (!d->ctx || EVP_MD_CTX_copy_ex(d->ctx, h->ctx) != 1) {
    pt_sha256_del(d);
    return NULL;
  }
  return d;
}

int pt_sha256_peek(const pt_sha256 *h, char hex[PT_SHA256_HEX]) {
  pt_sha256 *d = pt_sha256_dup(h);
  if (!d) return -ENOMEM;
  int r = pt_sha256_final(d, hex);
  pt_sha256_del(d);
  return r;
}

void pt_sha256_del(pt_sha256 *h) {
  if (!h) return;
  EVP_MD_CTX_free(h->ctx);
  free(h);
}

int pt_sha256_hex(const void *data, size_t len, char hex[PT_SHA256_HEX]) {
  pt_sha256 *h = pt_sha256_new();
  if (!h) return -ENOMEM;
  int r = pt_sha256_update(h, data, len);
  if (r == 0) r = pt_sha256_final(h, hex);
  pt_sha256_del(h);
  return r;
}

int pt_sha256_update_fd(pt_sha256 *h, int fd, size_t limit, size_t *nread) {
  enum { CHUNK = 65536 };
  unsigned char *buf = malloc(CHUNK);
  if (nread) *nread = 0;
  if (!buf) return -ENOMEM;
  size_t total = 0;
  int r = 0;
  while (total < limit) {
    size_t want = limit - total < CHUNK ? limit - total : CHUNK;
    ssize_t n = read(fd, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      r = -errno;
      break;
    }
    if (n == 0) break;
    if ((r = pt_sha256_update(h, buf, (size_t)n)) < 0) break;
    total += (size_t)n;
  }
  if (nread) *nread = total;
  free(buf);
  return r;
}

int pt_sha256_fd(int fd, size_t limit, char hex[PT_SHA256_HEX], size_t *nread) {
  pt_sha256 *h = pt_sha256_new();
  if (!h) return -ENOMEM;
  int r = pt_sha256_update_fd(h, fd, limit, nread);
  if (r == 0) r = pt_sha256_final(h, hex);
  pt_sha256_del(h);
  return r;
}
