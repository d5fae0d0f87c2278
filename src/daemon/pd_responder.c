/* pd_responder.c - picks the responder for a turn (see pd_responder.h).
 * Its own unit so that neither implementation refers to the other. */
#include "daemon/pd_responder.h"

#include <stdlib.h>

const pd_responder_vt *pd_responder_select(void) {
  const char *cmd = getenv("POLYTOKEN_RESPONDER_CMD");
  return (cmd && *cmd) ? &pd_resp_exec : &pd_resp_builtin;
}
