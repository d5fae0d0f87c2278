/* pt_base64.c - base64 decoding (see pt_base64.h). */
#include "common/pt_base64.h"

#include "common/pt_alloc.h"

#include <errno.h>

static int b64val(int ch) {
  if (ch >= 'A' && ch <= 'Z') return ch - 'A';
  if (ch >= 'a' && ch <= 'z') return ch - 'a' + 26;
  if (ch >= '0' && ch <= '9') return ch - '0' + 52;
  if (ch == '+') return 62;
  if (ch == '/') return 63;
  return -1;
}

int pt_base64_decode(const char *s, size_t n, uint8_t **out, size_t *outlen) {
  *out = NULL;
  *outlen = 0;
  if (n % 4) return -EINVAL;
  uint8_t *o = pt_malloc(n / 4 * 3 + 1);
  if (!o) return -ENOMEM;
  size_t k = 0;
  for (size_t i = 0; i < n; i += 4) {
    int last = i + 4 == n;
    int a = b64val(s[i]), b = b64val(s[i + 1]);
    int c = (last && s[i + 2] == '=') ? -2 : b64val(s[i + 2]);
    int d = (last && s[i + 3] == '=') ? -2 : b64val(s[i + 3]);
    if (a < 0 || b < 0 || c == -1 || d == -1 || (c == -2 && d != -2)) {
      free(o);
      return -EINVAL;
    }
    o[k++] = (uint8_t)(a << 2 | b >> 4);
    if (c >= 0) o[k++] = (uint8_t)((b & 15) << 4 | c >> 2);
    if (d >= 0) o[k++] = (uint8_t)((c & 3) << 6 | d);
  }
  *out = o;
  *outlen = k;
  return 0;
}
