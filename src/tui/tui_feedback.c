/* tui_feedback.c - the TUI feedback flow (see tui_feedback.h). */
#include "tui/tui_feedback.h"

#include "common/pt_feedback.h"
#include "common/pt_feedback_fetch.h"
#include "common/pt_feedback_outbox.h"
#include "common/pt_feedback_upload.h"
#include "common/pt_fmt.h"
#include "common/pt_thread_name.h"
#include "tui/tui_review.h"
#include "tui/tui_editkey.h"
#include "tui/tui_lineedit.h"
#include "tui/tui_loop.h"
#include "tui/tui_text.h"

#include <curses.h>
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY_CTRL(c) ((c) & 0x1f)
#define FETCH_TIMEOUT_MS 30000

typedef enum { ST_CLOSED, ST_MESSAGE, ST_PICK, ST_REVIEW, ST_SENDING, ST_DONE } fb_state;

typedef struct upload_job {
  uv_work_t req;
  tui_feedback *f;
  char home[PATH_MAX];
  char dir[PATH_MAX];
  pt_feedback_upload_opts opts;
  char url[2048];
  pt_feedback_upload_result res;
  char err[1024];        /* why it failed, or what failed to be recorded */
  int rc;
  atomic_int cancel; /* set by the loop thread (quit), read by the worker */
} upload_job;

struct tui_feedback {
  pt_client *client;
  uv_loop_t *loop;
  void (*redraw)(void *);
  void *ud;
  fb_state st;
  tui_lineedit *msg;
  json_t *entries;       /* artifacts.list entries (own ref) */
  char *picked;          /* one flag per entry */
  int sel, top;
  pt_feedback *bundle;   /* built on entering review */
  char *review;          /* review text */
  int scroll;
  char status[1024];     /* one-line message on the current step */
  char result[4 * PATH_MAX + 1024];
  upload_job *job;
  tui_unit u_upload;
  tui_feedback_dump_fn self_dump;   /* the TUI's own sampler, or NULL */
  void *self_dump_ud;
};

static void put_line(int y, int x, const char *s, size_t n, int width) {
  size_t i = tui_fit_bytes(s, n, width);
  if (i > 0) mvaddnstr(y, x, s, (int)i);
}

static void put_s(int y, int x, const char *s, int width) { put_line(y, x, s, strlen(s), width); }

static void bar(int y, const char *text) {
  attron(A_REVERSE);
  mvhline(y, 0, ' ', COLS);
  put_s(y, 1, text, COLS - 2);
  attroff(A_REVERSE);
}

tui_feedback *tui_feedback_new(pt_client *client, uv_loop_t *loop, void (*redraw)(void *),
                               void *ud) {
  tui_feedback *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->client = client;
  f->loop = loop;
  f->redraw = redraw;
  f->ud = ud;
  f->msg = tui_lineedit_new(PT_FEEDBACK_MAX_MESSAGE, 20);
  if (!f->msg) { free(f); return NULL; }
  pt_feedback_upload_global_init(); /* main thread, before any upload worker */
  return f;
}

void tui_feedback_set_self_dump(tui_feedback *f, tui_feedback_dump_fn dump, void *ud) {
  if (!f) return;
  f->self_dump = dump;
  f->self_dump_ud = ud;
}

static void reset_selection(tui_feedback *f) {
  json_decref(f->entries);
  f->entries = NULL;
  free(f->picked);
  f->picked = NULL;
  f->sel = f->top = 0;
}

static void drop_bundle(tui_feedback *f) {
  pt_feedback_del(f->bundle);
  f->bundle = NULL;
  free(f->review);
  f->review = NULL;
  f->scroll = 0;
}

void tui_feedback_del(tui_feedback *f) {
  if (!f) return;
  reset_selection(f);
  drop_bundle(f);
  tui_lineedit_del(f->msg);
  free(f->job);
  tui_unit_end(&f->u_upload);
  free(f);
}

void tui_feedback_cancel_upload(tui_feedback *f) {
  if (!f || !f->job) return;
  atomic_store(&f->job->cancel, 1);
  /* Not started yet: the threadpool drops it and upload_done gets
   * UV_ECANCELED. Running: the worker sees the flag (pt_feedback_upload). */
  uv_cancel((uv_req_t *)&f->job->req);
}

int tui_feedback_active(const tui_feedback *f) { return f && f->st != ST_CLOSED; }

void tui_feedback_open(tui_feedback *f) {
  if (f->st != ST_CLOSED) return;
  tui_le_clear(f->msg);
  reset_selection(f);
  drop_bundle(f);
  f->status[0] = '\0';
  f->st = ST_MESSAGE;
}

static void close_flow(tui_feedback *f) {
  reset_selection(f);
  drop_bundle(f);
  f->st = ST_CLOSED;
}

/* Lists the catalog (the daemon refreshes it on every list), keeping the
 * picks of entries that are still there. */
static void load_catalog(tui_feedback *f) {
  json_t *res = NULL;
  pt_client_error err;
  if (!pt_client_connected(f->client)) {
    snprintf(f->status, sizeof f->status, "Not connected to the daemon.");
    return;
  }
  if (pt_client_call(f->client, "artifacts.list", json_object(), FETCH_TIMEOUT_MS, &res, &err) < 0) {
    snprintf(f->status, sizeof f->status, "Cannot list artifacts: %s", err.message);
    return;
  }
  json_t *entries = json_object_get(res, "entries");
  if (!json_is_array(entries)) {
    snprintf(f->status, sizeof f->status, "The daemon's catalog reply has no entries.");
    json_decref(res);
    return;
  }
  size_t n = json_array_size(entries);
  char *picked = calloc(n ? n : 1, 1);
  if (!picked) { json_decref(res); return; }
  for (size_t i = 0; i < n && f->entries; i++) {
    const char *id = json_string_value(json_object_get(json_array_get(entries, i), "id"));
    for (size_t j = 0; id && j < json_array_size(f->entries); j++)
      if (f->picked[j] &&
          !strcmp(id, json_string_value(json_object_get(json_array_get(f->entries, j), "id"))))
        picked[i] = 1;
  }
  json_incref(entries);
  json_decref(res);
  json_decref(f->entries);
  free(f->picked);
  f->entries = entries;
  f->picked = picked;
  if (f->sel >= (int)n) f->sel = n ? (int)n - 1 : 0;
  snprintf(f->status, sizeof f->status, "%zu artifact%s in the catalog.", n, n == 1 ? "" : "s");
}

/* Whether the listed catalog has an entry of this kind. */
static int has_kind(const tui_feedback *f, const char *kind) {
  size_t n = f->entries ? json_array_size(f->entries) : 0;
  for (size_t i = 0; i < n; i++) {
    const char *k = json_string_value(json_object_get(json_array_get(f->entries, i), "kind"));
    if (k && strcmp(k, kind) == 0) return 1;
  }
  return 0;
}

static const char *base_name(const char *path) {
  const char *s = strrchr(path, '/');
  return s ? s + 1 : path;
}

/* Picks and selects the listed entry of this kind whose file is named
 * name; 1 when found (its label in *label), else 0. */
static int pick_file(tui_feedback *f, const char *kind, const char *name, const char **label) {
  size_t n = f->entries ? json_array_size(f->entries) : 0;
  for (size_t i = 0; i < n && name[0]; i++) {
    json_t *e = json_array_get(f->entries, i);
    const char *k = json_string_value(json_object_get(e, "kind"));
    const char *p = json_string_value(json_object_get(e, "path"));
    if (!k || strcmp(k, kind) != 0 || !p || strcmp(base_name(p), name) != 0) continue;
    f->picked[i] = 1;
    f->sel = (int)i;
    *label = json_string_value(json_object_get(e, "label"));
    return 1;
  }
  return 0;
}

/* p in the picker: the daemon writes a snapshot now (profile.dump, as
 * `polytoken profile dump` does), then the TUI's own sampler (profiling
 * build), the catalog is listed again, and the new snapshots ("CPU profile
 * (pprof)", "TUI CPU profile (pprof)") are picked. Why: right after a
 * session is attached, its profiling/ directory holds no snapshot until
 * the first periodic one, so the picker had no profile of what just
 * happened. */
static void dump_now(tui_feedback *f) {
  json_t *res = NULL;
  pt_client_error err;
  if (!pt_client_connected(f->client)) {
    snprintf(f->status, sizeof f->status, "Not connected to the daemon.");
    return;
  }
  if (pt_client_call(f->client, "profile.dump", NULL, FETCH_TIMEOUT_MS, &res, &err) < 0) {
    if (strcmp(err.code, "not_profiling") == 0)
      snprintf(f->status, sizeof f->status,
               "This daemon is not a profiling build: it has no CPU profile to write "
               "(restart it from the profiling build).");
    else
      snprintf(f->status, sizeof f->status, "Cannot write a CPU profile: %s", err.message);
    return;
  }
  char name[256], tname[256] = "";
  const char *path = json_string_value(json_object_get(res, "path"));
  snprintf(name, sizeof name, "%s", path ? base_name(path) : "");
  json_decref(res);
  char terr[256] = "";
  if (f->self_dump) {
    char tpath[4096];
    if (f->self_dump(tpath, sizeof tpath, terr, sizeof terr, f->self_dump_ud) == 0 &&
        strlen(base_name(tpath)) < sizeof tname)
      strcpy(tname, base_name(tpath));
  }
  load_catalog(f);
  const char *dl = NULL, *tl = NULL;
  int dok = pick_file(f, "cpu-profile", name, &dl);
  int tok = tname[0] && pick_file(f, "tui-cpu-profile", tname, &tl);
  if (dok && tok)
    snprintf(f->status, sizeof f->status, "Wrote %s and %s; picked as \"%s\" and \"%s\".", name,
             tname, dl ? dl : "CPU profile (pprof)", tl ? tl : "TUI CPU profile (pprof)");
  else if (dok)
    snprintf(f->status, sizeof f->status, "Wrote %s; picked as \"%s\".%s%s%s", name,
             dl ? dl : "CPU profile (pprof)",
             terr[0] ? " The TUI's own profile could not be written: " : "", terr,
             tname[0] && !tok ? " The TUI's own is not in the catalog (r refreshes)." : "");
  else
    snprintf(f->status, sizeof f->status,
             "Wrote %s, but the catalog does not list it (r refreshes).",
             name[0] ? name : "a snapshot");
}

/* Fetches the picked artifacts into a new bundle and builds the review text. */
static int build_review(tui_feedback *f) {
  drop_bundle(f);
  if (pt_feedback_new(&f->bundle, tui_le_text(f->msg)) < 0) {
    snprintf(f->status, sizeof f->status, "The message is too long.");
    return -EINVAL;
  }
  size_t cap = 4096, len = 0;
  char *text = malloc(cap);
  if (!text) return -ENOMEM;
  text[0] = '\0';
#define APPEND(s)                                                      \
  do {                                                                 \
    size_t l_ = strlen(s);                                             \
    if (len + l_ + 1 > cap) {                                          \
      while (len + l_ + 1 > cap) cap *= 2;                             \
      char *t_ = realloc(text, cap);                                   \
      if (!t_) { free(text); return -ENOMEM; }                         \
      text = t_;                                                       \
    }                                                                  \
    memcpy(text + len, (s), l_ + 1);                                   \
    len += l_;                                                         \
  } while (0)
  APPEND("Message:\n  ");
  APPEND(tui_le_text(f->msg)[0] ? tui_le_text(f->msg) : "(empty)");
  APPEND("\n\n");
  size_t n = f->entries ? json_array_size(f->entries) : 0, count = 0;
  for (size_t i = 0; i < n; i++) {
    if (!f->picked[i]) continue;
    json_t *e = json_array_get(f->entries, i);
    char err[512];
    if (pt_feedback_fetch_add(f->bundle, f->client, e, err, sizeof err) < 0) {
      snprintf(f->status, sizeof f->status, "Cannot fetch %s: %s (press r in the picker to refresh)",
               json_string_value(json_object_get(e, "label")), err);
      free(text);
      drop_bundle(f);
      return -EIO;
    }
    size_t dlen = 0;
    const uint8_t *d = pt_feedback_data(f->bundle, pt_feedback_count(f->bundle) - 1, &dlen);
    char *desc = tui_review_describe(e, d, dlen);
    if (!desc) { free(text); drop_bundle(f); return -ENOMEM; }
    char head[64];
    snprintf(head, sizeof head, "Attachment %zu:\n", ++count);
    APPEND(head);
    APPEND(desc);
    APPEND("\n");
    free(desc);
  }
  if (count == 0) APPEND("No attachments.\n\n");
  else {
    APPEND(tui_review_notice);
    APPEND("\n");
  }
#undef APPEND
  f->review = text;
  f->scroll = 0;
  return 0;
}

/* ---- sending ---- */

static void upload_work(uv_work_t *req) {
  PT_THREAD_JOB(PT_THREAD_TUI_UPLOAD, PT_THREAD_TUI_POOL);
  upload_job *j = req->data;
  j->rc = pt_feedback_upload(j->home, j->dir, &j->opts, &j->res, j->err, sizeof j->err);
}

static void upload_done(uv_work_t *req, int status) {
  upload_job *j = req->data;
  tui_feedback *f = j->f;
  pt_task_poll_begin(&f->u_upload.task);
  if (status == UV_ECANCELED || j->rc == -ECANCELED)
    snprintf(f->result, sizeof f->result, "Saved to %s\nUpload cancelled; the bundle stays in the outbox.", j->dir);
  else if (j->rc == 0 && j->res.record_error == 0)
    snprintf(f->result, sizeof f->result,
             "Saved to %s\nUploaded: sent (HTTP %ld after %d attempt%s).\nBundle moved to %s",
             j->dir, j->res.http_status, j->res.attempts, j->res.attempts == 1 ? "" : "s",
             j->res.dir);
  else if (j->rc == 0)
    snprintf(f->result, sizeof f->result,
             "Saved to %s\nUploaded: sent (HTTP %ld after %d attempt%s), %s.\nThe bundle is in %s",
             j->dir, j->res.http_status, j->res.attempts, j->res.attempts == 1 ? "" : "s", j->err,
             j->res.dir);
  else if (j->rc != -EIO)
    snprintf(f->result, sizeof f->result,
             "Saved to %s\nNot uploaded: %s\nThe bundle stays in the outbox.", j->dir, j->err);
  else
    snprintf(f->result, sizeof f->result,
             "Saved to %s\nUpload failed after %d attempt%s: %s\nThe bundle stays in the outbox "
             "(status.json records the error).",
             j->dir, j->res.attempts, j->res.attempts == 1 ? "" : "s", j->err);
  f->st = ST_DONE;
  f->job = NULL;
  free(j);
  pt_task_poll_end(&f->u_upload.task);
  tui_unit_end(&f->u_upload);
  if (f->redraw) f->redraw(f->ud);
}

static void send_bundle(tui_feedback *f) {
  char dir[PATH_MAX], err[512];
  const char *home = pt_client_home_dir(f->client);
  if (pt_feedback_outbox_write(f->bundle, home, dir, sizeof dir, err, sizeof err) < 0) {
    snprintf(f->status, sizeof f->status, "Cannot write the bundle: %s", err);
    return;
  }
  pt_feedback_upload_opts o;
  pt_feedback_upload_opts_from_env(&o);
  drop_bundle(f);
  if (!o.url) {
    snprintf(f->result, sizeof f->result,
             "Saved to %s\nNot uploaded: POLYTOKEN_FEEDBACK_URL is not set; the bundle stays in "
             "the outbox.", dir);
    f->st = ST_DONE;
    return;
  }
  upload_job *j = calloc(1, sizeof *j);
  if (!j) {
    snprintf(f->result, sizeof f->result, "Saved to %s\nNot uploaded: out of memory.", dir);
    f->st = ST_DONE;
    return;
  }
  j->f = f;
  snprintf(j->home, sizeof j->home, "%s", home);
  snprintf(j->dir, sizeof j->dir, "%s", dir);
  snprintf(j->url, sizeof j->url, "%s", o.url);
  j->opts = o;
  j->opts.url = j->url; /* the worker must not read the environment */
  atomic_init(&j->cancel, 0);
  j->opts.cancel = &j->cancel;
  j->req.data = j;
  tui_unit_start(&f->u_upload, "tui.feedback_upload");
  tui_unit_wake(&f->u_upload);
  if (uv_queue_work(f->loop, &j->req, upload_work, upload_done) != 0) {
    tui_unit_end(&f->u_upload);
    free(j);
    snprintf(f->result, sizeof f->result, "Saved to %s\nNot uploaded: cannot start the upload.", dir);
    f->st = ST_DONE;
    return;
  }
  f->job = j;
  snprintf(f->result, sizeof f->result, "Saved to %s\nUploading to %s ...", dir, j->url);
  f->st = ST_SENDING;
}

/* ---- keys ---- */

static void message_key(tui_feedback *f, int is_key, wint_t ch) {
  tui_lineedit *le = f->msg;
  if (!is_key && ch == 27) {
    close_flow(f);
    return;
  }
  int enter = is_key ? ch == KEY_ENTER : (ch == '\r' || ch == '\n');
  if (!enter) {
    tui_edit_key(le, is_key, ch);
    return;
  }
  if (tui_le_len(le) == 0) {
    snprintf(f->status, sizeof f->status, "Write a message first (Esc cancels).");
    return;
  }
  f->st = ST_PICK;
  load_catalog(f); /* opening the picker refreshes the catalog */
}

static void pick_key(tui_feedback *f, int is_key, wint_t ch) {
  int n = f->entries ? (int)json_array_size(f->entries) : 0;
  if (is_key) {
    if (ch == KEY_UP && f->sel > 0) f->sel--;
    else if (ch == KEY_DOWN && f->sel + 1 < n) f->sel++;
    else if (ch == KEY_ENTER) goto review;
    return;
  }
  switch (ch) {
  case 27: f->st = ST_MESSAGE; f->status[0] = '\0'; return;
  case ' ': if (n) f->picked[f->sel] ^= 1; return;
  case 'r': load_catalog(f); return;
  case 'p': dump_now(f); return;
  case 'k': if (f->sel > 0) f->sel--; return;
  case 'j': if (f->sel + 1 < n) f->sel++; return;
  case '\r': case '\n': goto review;
  default: return;
  }
review:
  if (build_review(f) == 0) {
    f->st = ST_REVIEW;
    f->status[0] = '\0';
  }
}

static void review_key(tui_feedback *f, int is_key, wint_t ch) {
  if (is_key) {
    if (ch == KEY_UP || ch == KEY_PPAGE) f->scroll -= ch == KEY_UP ? 1 : LINES - 4;
    if (ch == KEY_DOWN || ch == KEY_NPAGE) f->scroll += ch == KEY_DOWN ? 1 : LINES - 4;
    if (f->scroll < 0) f->scroll = 0;
    return;
  }
  if (ch == 'y' || ch == 'Y') send_bundle(f);
  else if (ch == 'n' || ch == 'N' || ch == 27) {
    drop_bundle(f);
    f->st = ST_PICK;
  }
}

void tui_feedback_key(tui_feedback *f, int is_key, wint_t ch) {
  /* Ctrl-C leaves the flow from any step but sending (the worker owns the
   * bundle then); it never quits the TUI from here. */
  if (!is_key && ch == KEY_CTRL('c') && f->st != ST_SENDING) {
    close_flow(f);
    return;
  }
  switch (f->st) {
  case ST_MESSAGE: message_key(f, is_key, ch); break;
  case ST_PICK: pick_key(f, is_key, ch); break;
  case ST_REVIEW: review_key(f, is_key, ch); break;
  case ST_SENDING: break; /* wait for the worker */
  case ST_DONE: close_flow(f); break;
  case ST_CLOSED: break;
  }
}

/* ---- drawing ---- */

/* Draws text in rows [y0, y1), skipping its first `skip` rows. Each line
 * is word-wrapped to the screen, its continuation rows indented as the
 * line is: the review is where the user reads what will be sent, so no
 * path or warning may be cut at the terminal's edge. */
static void draw_text(const char *text, int y0, int y1, int skip) {
  const char *p = text;
  int width = COLS - 2, row = 0, y = y0;
  while (*p && y < y1) {
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    size_t ind = 0;
    while (ind < n && p[ind] == ' ' && (int)ind < width / 2) ind++;
    tui_span *sp = NULL;
    int k = tui_wrap(p + ind, n - ind, width - (int)ind, &sp);
    if (k < 0) {   /* no memory for the spans: the line as it fits */
      if (row++ >= skip) put_line(y++, 1, p, n, width);
    } else {
      for (int i = 0; i < k && y < y1; i++)
        if (row++ >= skip)
          put_line(y++, 1 + (int)ind, p + ind + sp[i].off, sp[i].len, width - (int)ind);
      free(sp);
    }
    if (!e) break;
    p = e + 1;
  }
}

void tui_feedback_draw(tui_feedback *f) {
  int rows = LINES;
  curs_set(0);
  switch (f->st) {
  case ST_MESSAGE: {
    bar(0, "Feedback 1/3: message");
    put_s(2, 1, "Describe what happened. The next step offers attachments from the daemon's", COLS - 2);
    put_s(3, 1, "artifact catalog; nothing is sent before you confirm on the review screen.", COLS - 2);
    mvaddstr(5, 1, "> ");
    const char *t = tui_le_text(f->msg);
    size_t len = tui_le_len(f->msg), cur = tui_le_cursor(f->msg), start = 0;
    int avail = COLS - 4;
    while (start < cur && tui_str_width(t + start, cur - start) > avail)
      start += tui_utf8_len(t + start, len - start);
    put_line(5, 3, t + start, len - start, avail);
    if (f->status[0]) put_s(7, 1, f->status, COLS - 2);
    bar(rows - 1, "Enter next  Esc cancel  Ctrl-U clear");
    curs_set(1);
    move(5, 3 + tui_str_width(t + start, cur - start));
    break;
  }
  case ST_PICK: {
    bar(0, "Feedback 2/3: attachments (catalog refreshed when opened)");
    int n = f->entries ? (int)json_array_size(f->entries) : 0;
    int view = rows - 5;
    if (f->sel < f->top) f->top = f->sel;
    if (f->sel >= f->top + view) f->top = f->sel - view + 1;
    time_t now = time(NULL);
    /* Columns: the label, then a profile's window and samples (so an
     * empty one shows as such), size and age. Where the terminal is too
     * narrow for all, the age goes first, then the size; the label is cut
     * last, so an 80-column terminal still shows each profile's window. */
    enum { SIZE_W = 10, AGE_W = 12 };   /* the size and age columns */
    int labw = 10, winw = 0;
    for (int i = 0; i < n; i++) {
      json_t *e = json_array_get(f->entries, (size_t)i);
      const char *l = json_string_value(json_object_get(e, "label"));
      char win[64];
      int lw = l ? tui_str_width(l, strlen(l)) : 0;
      int ww = (int)strlen(tui_review_window(e, win, sizeof win));
      if (lw > labw) labw = lw;
      if (ww > winw) winw = ww;
    }
    if (labw > 50) labw = 50;
    int avail = COLS - 2, winc = winw ? 2 + winw : 0;
    int show_size = 4 + labw + 2 + SIZE_W + winc <= avail;
    int show_age = show_size && 4 + labw + 2 + SIZE_W + 2 + AGE_W + winc <= avail;
    if (!show_size && 4 + labw + winc > avail) labw = avail - 4 - winc > 20 ? avail - 4 - winc : 20;
    for (int i = f->top; i < n && i - f->top < view; i++) {
      json_t *e = json_array_get(f->entries, (size_t)i);
      char size[32] = "", age[32] = "", win[64], lab[256], line[512];
      if (show_size)
        pt_fmt_size((uint64_t)json_integer_value(json_object_get(e, "size")), size, sizeof size);
      if (show_age)
        pt_fmt_age(json_integer_value(json_object_get(e, "created_unix")), (int64_t)now, age,
                   sizeof age);
      tui_review_window(e, win, sizeof win);
      /* the label padded to labw columns (cut to them where longer) */
      const char *l = json_string_value(json_object_get(e, "label"));
      if (!l) l = "";
      size_t lb = tui_fit_bytes(l, strlen(l), labw);
      int pad = labw - tui_str_width(l, lb);
      snprintf(lab, sizeof lab, "%.*s%*s", (int)lb, l, pad > 0 ? pad : 0, "");
      snprintf(line, sizeof line, "%s %s%s%*s%s%-*s%s%s", f->picked[i] ? "[x]" : "[ ]", lab,
               show_size ? "  " : "", show_size ? SIZE_W : 0, size, show_age ? "  " : "",
               show_age ? AGE_W : 0, age, winw ? "  " : "", win);
      if (i == f->sel) attron(A_REVERSE);
      put_s(2 + i - f->top, 1, line, COLS - 2);
      if (i == f->sel) attroff(A_REVERSE);
    }
    if (n == 0) put_s(2, 1, "The catalog is empty (no profiles, log or telemetry yet).", COLS - 2);
    /* Two short lines, the action first: an 80-column terminal shows it
     * whole (put_s cuts at the edge). */
    if (!has_kind(f, "cpu-profile") && 2 + n + 2 < rows - 3) {
      put_s(2 + n + 1, 1, "No CPU profile of this session yet: p writes one now.", COLS - 2);
      put_s(2 + n + 2, 1,
            "(A profiling daemon writes one each minute in which it sampled anything.)",
            COLS - 2);
    }
    if (f->status[0]) {
      /* wrapped over up to two rows above the bar (the list and the hint
       * end above them): "Wrote <daemon file> and <TUI file>; picked as
       * ..." is longer than most terminals are wide */
      tui_span *sp = NULL;
      int k = tui_wrap(f->status, strlen(f->status), COLS - 2, &sp);
      free(sp);
      k = k < 1 ? 1 : k > 2 ? 2 : k;
      draw_text(f->status, rows - 1 - k, rows - 1, 0);
    }
    bar(rows - 1, "Space pick  Enter review  r refresh  p CPU profile now  Up/Down move  Esc back");
    break;
  }
  case ST_REVIEW:
    bar(0, "Feedback 3/3: review - attachments are sent RAW and UNSANITIZED");
    draw_text(f->review ? f->review : "", 2, rows - 2, f->scroll);
    bar(rows - 1, "y send  n/Esc back  Up/Down/PgUp/PgDn scroll");
    break;
  case ST_SENDING:
  case ST_DONE:
    bar(0, f->st == ST_SENDING ? "Feedback: sending" : "Feedback: done");
    draw_text(f->result, 2, rows - 2, 0);
    bar(rows - 1, f->st == ST_SENDING ? "Uploading..." : "Press any key to return to the conversation");
    break;
  case ST_CLOSED:
    break;
  }
}
