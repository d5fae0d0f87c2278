/* test_feedback.c - unit tests of the feedback bundle (pt_feedback.c), its
 * outbox layout (pt_feedback_outbox.c), picking entries (pt_feedback_pick.c),
 * base64 (pt_base64.c) and the pickers' size/age text (pt_fmt.c). Uploads:
 * test_feedback_upload.c, and against a real HTTP server
 * tests/feedback/feedback_upload_test.sh. */
#include "common_test.h"
#include "common/pt_base64.h"
#include "common/pt_feedback.h"
#include "common/pt_feedback_outbox.h"
#include "common/pt_feedback_pick.h"
#include "common/pt_feedback_upload.h"
#include "common/pt_file.h"
#include "common/pt_fmt.h"
#include "common/pt_sha256.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static json_t *entry_for(const char *id, const char *kind, const char *path, const void *data,
                         size_t len, long created) {
  char hex[PT_SHA256_HEX];
  PT_ASSERT_INT_EQ(pt_sha256_hex(data, len, hex), 0);
  return json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:I, s:s}", "id", id, "kind", kind,
                   "label", "CPU profile (pprof)", "source", "daemon", "size", (json_int_t)len,
                   "sha256", hex, "path", path, "created_unix", (json_int_t)created, "created",
                   "2026-11-29T21:00:00Z");
}

PT_TEST(common_feedback_bundle_written_to_outbox) {
  char *home = pt_tmpdir("fbhome");
  pt_feedback *fb = NULL;
  PT_ASSERT_INT_EQ(pt_feedback_new(&fb, "the reply was slow\nsecond line"), 0);
  const char prof[] = "\x1f\x8b profile bytes \x00\x01\x02";
  const char log[] = "2026-11-29 log line\n";
  json_t *e1 = entry_for("0123456789abcdef", "cpu-profile",
                         "profiling/daemon-profile-20261129T210000Z-1.pb.gz", prof, sizeof prof, 10);
  json_t *e2 = entry_for("fedcba9876543210", "daemon-log", "logs/daemon.log", log, strlen(log), 5);
  char err[256];
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e1, (const uint8_t *)prof, sizeof prof, err, sizeof err), 0);
  /* The same id twice, or bytes that are not what the catalog listed. */
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e1, (const uint8_t *)prof, sizeof prof, err, sizeof err),
                   -EEXIST);
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e2, (const uint8_t *)"2026-11-29 log linX\n", strlen(log),
                                   err, sizeof err), -EBADMSG);
  PT_ASSERT(strstr(err, "SHA-256"));
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e2, (const uint8_t *)log, strlen(log) - 1, err, sizeof err),
                   -EBADMSG);
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e2, (const uint8_t *)log, strlen(log), err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(pt_feedback_count(fb), 2);

  char dir[4096];
  PT_ASSERT_INT_EQ(pt_feedback_outbox_write(fb, home, dir, sizeof dir, err, sizeof err), 0);
  char *outbox = ptt_path2(home, "feedback/outbox");
  PT_ASSERT(strncmp(dir, outbox, strlen(outbox)) == 0);
  char *m = ptt_path2(dir, "message.txt");
  size_t len = 0;
  char *d = pt_read_file(m, &len);
  PT_ASSERT_STR_EQ(d, "the reply was slow\nsecond line");
  free(d);
  char *a1 = ptt_path2(dir, "01-daemon-profile-20261129T210000Z-1.pb.gz");
  d = pt_read_file(a1, &len);
  PT_ASSERT(d);
  PT_ASSERT_UINT_EQ(len, sizeof prof);
  PT_ASSERT_MEM_EQ(d, prof, sizeof prof);
  free(d);
  char *a2 = ptt_path2(dir, "02-daemon.log");
  d = pt_read_file(a2, &len);
  PT_ASSERT_STR_EQ(d, log);
  free(d);
  char *mp = ptt_path2(dir, "manifest.json");
  json_t *man = json_load_file(mp, 0, NULL);
  PT_ASSERT(man);
  json_t *atts = json_object_get(man, "attachments");
  PT_ASSERT_UINT_EQ(json_array_size(atts), 2);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(atts, 0), "id")),
                   "0123456789abcdef");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(atts, 0), "sha256")),
                   json_string_value(json_object_get(e1, "sha256")));
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(atts, 1), "file")),
                   "02-daemon.log");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(atts, 1), "kind")),
                   "daemon-log");
  json_decref(man);
  /* Nothing left half-built. */
  char *tmp = ptt_path2(home, "feedback/tmp");
  DIR *td = opendir(tmp);
  PT_ASSERT(td);
  struct dirent *de;
  int n = 0;
  while ((de = readdir(td))) n += de->d_name[0] != '.';
  closedir(td);
  PT_ASSERT_INT_EQ(n, 0);

  /* No URL: upload refuses clearly and the bundle stays. */
  pt_feedback_upload_opts o = {NULL, 4, 200, 1000, NULL};
  pt_feedback_upload_result res;
  PT_ASSERT_INT_EQ(pt_feedback_upload(home, dir, &o, &res, err, sizeof err), -EINVAL);
  PT_ASSERT(access(mp, F_OK) == 0);

  /* Picking by kind or id. */
  json_t *arr = json_pack("[O, O]", e2, e1);
  json_t *newer = entry_for("aaaaaaaaaaaaaaaa", "cpu-profile", "profiling/x.pb.gz", "x", 1, 99);
  json_array_append_new(arr, newer);
  PT_ASSERT(pt_feedback_pick(arr, "cpu-profile") == newer);
  PT_ASSERT(pt_feedback_pick(arr, "0123456789abcdef") == json_array_get(arr, 1));
  PT_ASSERT(pt_feedback_pick(arr, "daemon-log") == json_array_get(arr, 0));
  PT_ASSERT(pt_feedback_pick(arr, "telemetry") == NULL);
  json_decref(arr);

  pt_feedback_del(fb);
  json_decref(e1);
  json_decref(e2);
  free(tmp); free(mp); free(a1); free(a2); free(m); free(outbox);
  pt_rm_rf(home);
  free(home);
}

PT_TEST(common_feedback_base64_roundtrip_and_errors) {
  uint8_t *o = NULL;
  size_t n = 0;
  PT_ASSERT_INT_EQ(pt_base64_decode("aGVsbG8=", 8, &o, &n), 0);
  PT_ASSERT_UINT_EQ(n, 5);
  PT_ASSERT_MEM_EQ(o, "hello", 5);
  free(o);
  PT_ASSERT_INT_EQ(pt_base64_decode("", 0, &o, &n), 0);
  PT_ASSERT_UINT_EQ(n, 0);
  free(o);
  PT_ASSERT_INT_EQ(pt_base64_decode("aGVsbG8", 7, &o, &n), -EINVAL);
  PT_ASSERT_INT_EQ(pt_base64_decode("aG=sbG8=", 8, &o, &n), -EINVAL);
  PT_ASSERT_INT_EQ(pt_base64_decode("a!Vs", 4, &o, &n), -EINVAL);
  char buf[32];
  pt_fmt_size(2048, buf, sizeof buf);
  PT_ASSERT_STR_EQ(buf, "2.0 KiB");
  pt_fmt_age(1000, 1000 + 125, buf, sizeof buf);
  PT_ASSERT_STR_EQ(buf, "2 min ago");
}


/* A bundle with one attachment written to the outbox of home; its path in
 * dir. */
static void write_bundle(const char *home, const char *msg, char *dir, size_t cap) {
  pt_feedback *fb = NULL;
  PT_ASSERT_INT_EQ(pt_feedback_new(&fb, msg), 0);
  const char log[] = "a log line\n";
  json_t *e = entry_for("fedcba9876543210", "daemon-log", "logs/daemon.log", log, strlen(log), 5);
  char err[256];
  PT_ASSERT_INT_EQ(pt_feedback_add(fb, e, (const uint8_t *)log, strlen(log), err, sizeof err), 0);
  PT_ASSERT_INT_EQ(pt_feedback_outbox_write(fb, home, dir, cap, err, sizeof err), 0);
  pt_feedback_del(fb);
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *de;
  while ((de = readdir(d)))
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* What killed writers leave in feedback/tmp/ is repaired: a complete
 * bundle goes on to the outbox, an incomplete or tampered one (or junk)
 * to quarantine/feedback-tmp/, a bundle whose writer still holds its lock
 * is left alone, and nothing is deleted. */
PT_TEST(common_feedback_repair_tmp) {
  char *home = pt_tmpdir("fbrepair");
  pt_feedback_repair rp;
  char err[512];
  /* no feedback/ at all: nothing to do */
  PT_ASSERT_INT_EQ(pt_feedback_outbox_repair(home, &rp, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(rp.completed + rp.quarantined + rp.busy + rp.failed, 0);
  /* three whole bundles, put back into tmp/ as a killed writer leaves them */
  char d1[4096], d2[4096], d3[4096], t[4200];
  write_bundle(home, "complete", d1, sizeof d1);
  write_bundle(home, "tampered", d2, sizeof d2);
  write_bundle(home, "in progress", d3, sizeof d3);
  char *tmp = ptt_path2(home, "feedback/tmp"), *outbox = ptt_path2(home, "feedback/outbox");
  const char *id1 = strrchr(d1, '/') + 1, *id2 = strrchr(d2, '/') + 1, *id3 = strrchr(d3, '/') + 1;
  snprintf(t, sizeof t, "%s/%s.0000aaaa", tmp, id1);
  PT_ASSERT(rename(d1, t) == 0);
  snprintf(t, sizeof t, "%s/%s.0000bbbb", tmp, id2);
  PT_ASSERT(rename(d2, t) == 0);
  char *msg = ptt_path2(t, "message.txt");
  pt_write_file(msg, "tampereX", 8); /* same size, other bytes */
  free(msg);
  snprintf(t, sizeof t, "%s/%s.0000cccc", tmp, id3);
  PT_ASSERT(rename(d3, t) == 0);
  int held = open(t, O_RDONLY | O_DIRECTORY);
  PT_ASSERT(held >= 0 && flock(held, LOCK_EX) == 0); /* its writer still runs */
  /* killed before the manifest was written */
  snprintf(t, sizeof t, "%s/20260101T000000Z-01234567.0000dddd", tmp);
  PT_ASSERT(mkdir(t, 0700) == 0);
  msg = ptt_path2(t, "message.txt");
  pt_write_file(msg, "half", 4);
  free(msg);
  /* junk */
  snprintf(t, sizeof t, "%s/stray", tmp);
  pt_write_file(t, "x", 1);

  PT_ASSERT_INT_EQ(pt_feedback_outbox_repair(home, &rp, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(rp.completed, 1);
  PT_ASSERT_UINT_EQ(rp.quarantined, 3);
  PT_ASSERT_UINT_EQ(rp.busy, 1);
  PT_ASSERT_UINT_EQ(rp.failed, 0);
  /* the complete one is in the outbox under its id, byte for byte */
  char *m1 = ptt_path2(d1, "message.txt");
  char *got = pt_read_file(m1, NULL);
  PT_ASSERT_STR_EQ(got, "complete");
  free(got);
  free(m1);
  PT_ASSERT_INT_EQ(count_entries(outbox), 1);
  /* tmp/ keeps only the one in progress */
  PT_ASSERT_INT_EQ(count_entries(tmp), 1);
  snprintf(t, sizeof t, "%s/%s.0000cccc/manifest.json", tmp, id3);
  PT_ASSERT(access(t, F_OK) == 0);
  /* quarantined whole */
  char *q = ptt_path2(home, "quarantine/feedback-tmp");
  PT_ASSERT_INT_EQ(count_entries(q), 3);
  snprintf(t, sizeof t, "%s/%s.0000bbbb/message.txt", q, id2);
  got = pt_read_file(t, NULL);
  PT_ASSERT_STR_EQ(got, "tampereX");
  free(got);
  snprintf(t, sizeof t, "%s/20260101T000000Z-01234567.0000dddd/message.txt", q);
  got = pt_read_file(t, NULL);
  PT_ASSERT_STR_EQ(got, "half");
  free(got);
  snprintf(t, sizeof t, "%s/stray", q);
  PT_ASSERT(access(t, F_OK) == 0);
  /* its writer gone, the one in progress (complete) is finished next time */
  close(held);
  PT_ASSERT_INT_EQ(pt_feedback_outbox_repair(home, &rp, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(rp.completed, 1);
  PT_ASSERT_UINT_EQ(rp.quarantined + rp.busy + rp.failed, 0);
  PT_ASSERT_INT_EQ(count_entries(outbox), 2);
  PT_ASSERT_INT_EQ(count_entries(tmp), 0);
  PT_ASSERT_INT_EQ(pt_feedback_outbox_repair(home, &rp, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(rp.completed + rp.quarantined + rp.busy + rp.failed, 0);
  free(q);
  free(tmp);
  free(outbox);
  pt_rm_rf(home);
}
