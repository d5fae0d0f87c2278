/* pt_quarantine.c - moving crash leftovers out of the way. See
 * pt_quarantine.h. */
#include "common/pt_quarantine.h"

#include "common/pt_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pt_quarantine_move(int homefd, const char *area, int from, const char *name, char *out,
                       size_t outcap) {
  if (!name || !*name || strchr(name, '/') || !strcmp(name, ".") || !strcmp(name, ".."))
    return -EINVAL;
  char rel[64];
  if (snprintf(rel, sizeof rel, "quarantine/%s", area) >= (int)sizeof rel) return -EINVAL;
  int qfd = pt_mkdir_beneath(homefd, rel, 0700);
  if (qfd < 0) return qfd;
  const char *base = name;
  while (*base == '.') base++;
  if (!*base) base = "unnamed";
  char as[NAME_MAX + 1];
  int r = -EEXIST;
  for (int n = 1; n <= 1000 && r == -EEXIST; n++) {
    int k = n == 1 ? snprintf(as, sizeof as, "%s", base) : snprintf(as, sizeof as, "%s.%d", base, n);
    if (k < 0 || k >= (int)sizeof as) {
      r = -ENAMETOOLONG;
      break;
    }
    r = pt_rename_noreplace(from, name, qfd, as);
  }
  if (r == 0) {
    (void)fsync(qfd);
    (void)fsync(from);
    if (out && outcap) snprintf(out, outcap, "%s", as);
  }
  close(qfd);
  return r;
}
