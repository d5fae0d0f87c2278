/* tui_cli_common.c - failure output and client shared by the subcommands
 * (see tui_cli_common.h). */
#include "tui/tui_cli_common.h"

#include "common/pt_escape.h"
#include "common/pt_home.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void tui_cli_fail(const char *fmt, ...) {
  char buf[1024], safe[1100];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  for (char *p = buf; *p; p++)
    if (*p == '\n' || *p == '\r') *p = ' ';
  /* other control bytes of outside text (a path, a daemon's message)
   * never reach the terminal raw (pt_escape.h) */
  pt_escape_str(safe, sizeof safe, buf, 0);
  fflush(stdout);
  fprintf(stderr, "polytoken: %s\n", safe);
}

pt_client *tui_cli_client_new(const char *client_name) {
  char why[256], *home = NULL;
  if (pt_home_resolve(NULL, &home, why, sizeof why) < 0) {
    tui_cli_fail("%s", why);
    return NULL;
  }
  pt_client *c = pt_client_new(home, client_name);
  free(home);
  if (!c) tui_cli_fail("out of memory");
  return c;
}
