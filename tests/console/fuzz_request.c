/*
 * fuzz_request.c - libFuzzer target for the console's request decoding
 * (src/console/request.c): the first input byte picks the method, the rest is
 * the request body as it arrives in HTTP/2 DATA. Also feeds the :path
 * matcher. Built by tests/console/console_fuzz_test.sh with
 * clang -fsanitize=fuzzer,address,undefined.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "console/ptcon_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  ptcon_method m = (ptcon_method)(data[0] % 6);
  const char *why = NULL;
  ptcon_request req;
  /* Copy into an exact-size heap buffer so ASan catches any over-read. */
  uint8_t *body = malloc(size - 1 ? size - 1 : 1);
  if (!body) return 0;
  memcpy(body, data + 1, size - 1);
  int st = ptcon_request_decode(m, body, size - 1, &req, &why);
  if (!why) abort();                       /* always explained */
  if (st == PTCON_GRPC_OK) {
    if (m == PTCON_M_UNKNOWN) abort();
    if (m == PTCON_M_WATCH_TASK_DETAILS && req.task_id == 0) abort();
    if (size - 1 < 5) abort();
  }
  (void)ptcon_method_from_path((const char *)body, size - 1);
  free(body);
  return 0;
}
