/* pt_escape.c - escaping text from outside for logs and terminals. See
 * pt_escape.h. */
#include "common/pt_escape.h"

#include <stdint.h>
#include <string.h>

/* Length of the valid UTF-8 sequence starting at p (at most n bytes
 * available), or 0 when p does not start one (RFC 3629: no overlong forms,
 * no surrogates, nothing above U+10FFFF). */
static size_t utf8_len(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  size_t k;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) k = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    k = 3;
    if (c == 0xe0) lo = 0xa0;      /* overlong */
    else if (c == 0xed) hi = 0x9f; /* surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    k = 4;
    if (c == 0xf0) lo = 0x90;      /* overlong */
    else if (c == 0xf4) hi = 0x8f; /* above U+10FFFF */
  } else {
    return 0;
  }
  if (n < k) return 0;
  if (p[1] < lo || p[1] > hi) return 0;
  for (size_t i = 2; i < k; i++)
    if (p[i] < 0x80 || p[i] > 0xbf) return 0;
  return k;
}

size_t pt_escape(char *out, size_t cap, const char *in, size_t len, unsigned flags, size_t *used) {
  static const char hex[] = "0123456789abcdef";
  const unsigned char *p = (const unsigned char *)in;
  size_t o = 0, i = 0;
  if (cap == 0) {
    if (used) *used = 0;
    return 0;
  }
  while (i < len) {
    char esc[16];
    size_t elen = 0, take = 1;
    unsigned char c = p[i];
    if (c == '\n' || c == '\r' || c == '\t') {
      esc[0] = '\\';
      esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
      elen = 2;
    } else if (c < 0x20 || c == 0x7f) {
      elen = 0;
    } else if (c == '\\' && (flags & PT_ESC_BACKSLASH)) {
      esc[0] = esc[1] = '\\';
      elen = 2;
    } else if (c < 0x80) {
      esc[0] = (char)c;
      elen = 1;
    } else {
      size_t k = utf8_len(p + i, len - i);
      if (k == 2 && c == 0xc2 && p[i + 1] <= 0x9f) {
        /* a C1 control: both bytes escaped */
        for (size_t j = 0; j < 2; j++) {
          esc[elen++] = '\\';
          esc[elen++] = 'x';
          esc[elen++] = hex[p[i + j] >> 4];
          esc[elen++] = hex[p[i + j] & 15];
        }
        take = 2;
      } else if (k > 0) {
        memcpy(esc, p + i, k);
        elen = k;
        take = k;
      }
    }
    if (elen == 0) { /* one byte as \xNN */
      esc[0] = '\\';
      esc[1] = 'x';
      esc[2] = hex[c >> 4];
      esc[3] = hex[c & 15];
      elen = 4;
    }
    if (o + elen > cap - 1) break; /* never half an escape or character */
    memcpy(out + o, esc, elen);
    o += elen;
    i += take;
  }
  out[o] = '\0';
  if (used) *used = i;
  return o;
}

size_t pt_escape_str(char *out, size_t cap, const char *in, unsigned flags) {
  return pt_escape(out, cap, in, strlen(in), flags, NULL);
}
