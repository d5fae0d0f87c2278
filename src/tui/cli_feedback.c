/* cli_feedback.c - artifacts and feedback subcommands (see cli_feedback.h). */
#include "tui/cli_feedback.h"

#include "common/pt_client.h"
#include "common/pt_feedback.h"
#include "common/pt_feedback_fetch.h"
#include "common/pt_feedback_outbox.h"
#include "common/pt_feedback_pick.h"
#include "common/pt_feedback_upload.h"
#include "common/pt_fmt.h"
#include "tui/tui_cli_common.h"
#include "tui/tui_review.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CALL_TIMEOUT_MS 30000

static int is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

static const char *jstr(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_string(v) ? json_string_value(v) : "";
}

static pt_client *connect_cli(void) {
  pt_client *c = tui_cli_client_new("polytoken-cli");
  if (!c) return NULL;
  pt_client_error err;
  if (pt_client_connect(c, 1, CALL_TIMEOUT_MS, &err) < 0) {
    tui_cli_fail("%s", err.message);
    pt_client_del(c);
    return NULL;
  }
  return c;
}

static json_t *list_catalog(pt_client *c) {
  json_t *res = NULL;
  pt_client_error err;
  if (pt_client_call(c, "artifacts.list", json_object(), CALL_TIMEOUT_MS, &res, &err) < 0) {
    tui_cli_fail("artifacts.list: %s", err.message);
    return NULL;
  }
  if (!json_is_array(json_object_get(res, "entries"))) {
    tui_cli_fail("artifacts.list: the daemon's reply has no entries");
    json_decref(res);
    return NULL;
  }
  return res;
}

/* ---- artifacts ---- */

static void artifacts_usage(void) {
  printf("usage: polytoken artifacts [--json]\n"
         "  Lists what the daemon's artifact catalog offers as feedback attachments\n"
         "  (CPU profile snapshots of the active session with their window and\n"
         "  samples, those snapshots merged, daemon log, telemetry).\n"
         "  --json  print the daemon's artifacts.list reply as JSON (paths relative to\n"
         "          the session's directory or the state root, both named in the\n"
         "          reply, and each file's absolute path)\n");
}

int cli_artifacts_main(int argc, char **argv) {
  int json = 0;
  for (int i = 2; i < argc; i++) {
    if (is_help(argv[i])) { artifacts_usage(); return 0; }
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else { tui_cli_fail("artifacts: unknown argument %s (see --help)", argv[i]); return 2; }
  }
  pt_client *c = connect_cli();
  if (!c) return 1;
  json_t *res = list_catalog(c);
  pt_client_del(c);
  if (!res) return 1;
  if (json) {
    char *s = json_dumps(res, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) printf("%s\n", s);
    free(s);
  } else {
    json_t *entries = json_object_get(res, "entries");
    printf("catalog generation %" JSON_INTEGER_FORMAT ", %zu artifacts\n",
           json_integer_value(json_object_get(res, "generation")), json_array_size(entries));
    size_t i;
    json_t *e;
    int64_t now = (int64_t)time(NULL);
    json_array_foreach(entries, i, e) {
      char size[32], age[32], win[64];
      pt_fmt_size((uint64_t)json_integer_value(json_object_get(e, "size")), size, sizeof size);
      pt_fmt_age(json_integer_value(json_object_get(e, "created_unix")), now, age, sizeof age);
      tui_review_window(e, win, sizeof win);
      printf("%s  %-22s %10s  %-12s %-22s %s\n", jstr(e, "id"), jstr(e, "kind"), size, age, win,
             jstr(e, "label"));
    }
  }
  json_decref(res);
  return 0;
}

/* ---- feedback ---- */

static void feedback_usage(void) {
  printf("usage: polytoken feedback send --message TEXT [--attach KIND_OR_ID]...\n"
         "       polytoken feedback show KIND_OR_ID\n"
         "  send   writes a feedback bundle to $POLYTOKEN_HOME/feedback/outbox/<id>/ with\n"
         "         the message and each attachment as the daemon's catalog serves it,\n"
         "         and POSTs it to $POLYTOKEN_FEEDBACK_URL when that is set.\n"
         "         KIND_OR_ID: an artifact id from `polytoken artifacts`, or a kind\n"
         "         (cpu-profile, tui-cpu-profile, cpu-profile-merged,\n"
         "         tui-cpu-profile-merged, daemon-log, telemetry) meaning the newest\n"
         "         artifact of that kind.\n"
         "  show   prints what an attachment contains (the review screen, as text).\n"
         "Attachments are sent raw and unsanitized: see docs/feedback.md.\n");
}

static int cmd_show(int argc, char **argv) {
  if (argc != 4) { tui_cli_fail("feedback show: needs exactly one KIND_OR_ID (see --help)"); return 2; }
  pt_client *c = connect_cli();
  if (!c) return 1;
  json_t *res = list_catalog(c);
  int rc = 1;
  if (res) {
    json_t *e = pt_feedback_pick(json_object_get(res, "entries"), argv[3]);
    if (!e) {
      tui_cli_fail("no artifact matches %s (see polytoken artifacts)", argv[3]);
    } else {
      uint8_t *data = NULL;
      size_t len = 0;
      char err[512];
      if (pt_feedback_fetch(c, e, &data, &len, err, sizeof err) < 0) {
        tui_cli_fail("fetching %s: %s", jstr(e, "id"), err);
      } else {
        char *text = tui_review_describe(e, data, len);
        if (text) { fputs(text, stdout); rc = 0; }
        else tui_cli_fail("out of memory");
        free(text);
        free(data);
      }
    }
  }
  json_decref(res);
  pt_client_del(c);
  return rc;
}

static int cmd_send(int argc, char **argv) {
  const char *message = NULL;
  const char *attach[PT_FEEDBACK_MAX_ATTACHMENTS];
  size_t nattach = 0;
  for (int i = 3; i < argc; i++) {
    if (is_help(argv[i])) { feedback_usage(); return 0; }
    if (strcmp(argv[i], "--message") == 0 && i + 1 < argc) {
      message = argv[++i];
    } else if (strcmp(argv[i], "--attach") == 0 && i + 1 < argc) {
      if (nattach == PT_FEEDBACK_MAX_ATTACHMENTS) {
        tui_cli_fail("feedback send: at most %d attachments", PT_FEEDBACK_MAX_ATTACHMENTS);
        return 2;
      }
      attach[nattach++] = argv[++i];
    } else {
      tui_cli_fail("feedback send: unexpected argument %s (see --help)", argv[i]);
      return 2;
    }
  }
  if (!message) { tui_cli_fail("feedback send: --message TEXT is required"); return 2; }
  pt_feedback *fb = NULL;
  if (pt_feedback_new(&fb, message) < 0) {
    tui_cli_fail("feedback send: the message is longer than %zu bytes", PT_FEEDBACK_MAX_MESSAGE);
    return 2;
  }
  pt_client *c = connect_cli();
  if (!c) { pt_feedback_del(fb); return 1; }
  json_t *res = nattach ? list_catalog(c) : NULL;
  int rc = 1;
  if (nattach && !res) goto out;
  for (size_t i = 0; i < nattach; i++) {
    json_t *e = pt_feedback_pick(json_object_get(res, "entries"), attach[i]);
    if (!e) {
      tui_cli_fail("no artifact matches %s (see polytoken artifacts)", attach[i]);
      goto out;
    }
    char err[512];
    if (pt_feedback_fetch_add(fb, c, e, err, sizeof err) < 0) {
      tui_cli_fail("attaching %s (%s): %s", jstr(e, "label"), jstr(e, "id"), err);
      goto out;
    }
  }
  char *home = strdup(pt_client_home_dir(c));
  char dir[4096], msg[512];
  if (!home) { tui_cli_fail("out of memory"); goto out; }
  int r = pt_feedback_outbox_write(fb, home, dir, sizeof dir, msg, sizeof msg);
  if (r < 0) {
    tui_cli_fail("writing the feedback bundle: %s", msg);
    free(home);
    goto out;
  }
  printf("bundle: %s\n", dir);
  for (size_t i = 0; i < pt_feedback_count(fb); i++) {
    json_t *e = pt_feedback_entry(fb, i);
    size_t len = 0;
    pt_feedback_data(fb, i, &len);
    printf("attached: %s (%s, %zu bytes, sha256 %s)\n", jstr(e, "label"), jstr(e, "id"), len,
           jstr(e, "sha256"));
  }
  if (nattach) printf("note: attachments are sent raw and unsanitized (docs/feedback.md)\n");
  pt_feedback_upload_opts o;
  pt_feedback_upload_opts_from_env(&o);
  if (!o.url) {
    printf("upload: skipped (POLYTOKEN_FEEDBACK_URL is not set); the bundle stays in the outbox\n");
    rc = 0;
  } else {
    pt_feedback_upload_result ur;
    char uerr[1024];
    fflush(stdout);
    r = pt_feedback_upload(home, dir, &o, &ur, uerr, sizeof uerr);
    if (r == 0 && ur.record_error == 0) {
      printf("upload: sent (HTTP %ld after %d attempt%s); bundle moved to %s\n", ur.http_status,
             ur.attempts, ur.attempts == 1 ? "" : "s", ur.dir);
      rc = 0;
    } else if (r == 0) {
      /* delivered: not an error to retry (that would send it twice) */
      printf("upload: sent (HTTP %ld after %d attempt%s); the bundle is in %s\n", ur.http_status,
             ur.attempts, ur.attempts == 1 ? "" : "s", ur.dir);
      fprintf(stderr, "polytoken: warning: %s\n", uerr);
      rc = 0;
    } else if (r != -EIO) {
      tui_cli_fail("upload: not sent: %s; the bundle stays in %s", uerr, ur.dir);
    } else {
      tui_cli_fail("upload failed after %d attempt%s: %s; the bundle stays in %s", ur.attempts,
                   ur.attempts == 1 ? "" : "s", uerr, ur.dir);
    }
  }
  free(home);
out:
  json_decref(res);
  pt_client_del(c);
  pt_feedback_del(fb);
  return rc;
}

int cli_feedback_main(int argc, char **argv) {
  if (argc < 3) {
    tui_cli_fail("feedback: missing subcommand (send, show; see --help)");
    return 2;
  }
  if (is_help(argv[2])) {
    feedback_usage();
    return 0;
  }
  if (strcmp(argv[2], "send") == 0) return cmd_send(argc, argv);
  if (strcmp(argv[2], "show") == 0) {
    if (argc > 3 && is_help(argv[3])) { feedback_usage(); return 0; }
    return cmd_show(argc, argv);
  }
  tui_cli_fail("feedback: unknown subcommand %s (send, show)", argv[2]);
  return 2;
}
