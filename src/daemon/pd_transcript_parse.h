/*
 * pd_transcript_parse.h - the checks of a transcript file's bytes, without
 * I/O: one JSON object per '\n'-terminated line, each
 * {turn_id: integer in [1, INT_MAX], role: "user" | "assistant" | "error",
 * text: string, ts: string, [status: ...]} (docs/daemon.md). The transcript
 * reader (pd_transcript_read in pd_transcript.c) reads the file and calls
 * this; the fuzz target tests/daemon/fuzz_transcript.c drives it directly.
 *
 * Threads: any; no state. Errors: 0 or a negative errno.
 */
#ifndef PD_TRANSCRIPT_PARSE_H
#define PD_TRANSCRIPT_PARSE_H

#include <jansson.h>
#include <stddef.h>

/* Checks data[0, len) as a whole transcript. Returns 0 with a new JSON
 * array of the entries in *out (NULL: not wanted; caller decrefs) and the
 * highest turn_id in *max_turn (NULL: not wanted; 0 when empty);
 * -EBADMSG with the reason, naming the line, in err (bad JSON, bad or
 * missing fields, a last line without its newline); -ENOMEM ("out of
 * memory" in err). Nothing is returned in *out on failure. */
int pd_transcript_parse(const char *data, size_t len, json_t **out, int *max_turn, char *err,
                        size_t errlen);

#endif
