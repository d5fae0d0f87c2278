/*
 * fpdetect_lib.c - a shared library WITHOUT any CFI (no .eh_frame, no
 * .eh_frame_hdr), built twice (tests/prof/meson.build): libptt_fpd_fp with
 * frame pointers, libptt_fpd_nofp without. The sampler's frame-pointer
 * detector (ptp_fpdetect.c) must tell them apart from their prologues:
 * the walker follows rbp through the first and stops (truncated) at the
 * second. PTT_FPD(x) names each symbol after the variant.
 */
#include <stdint.h>

#define PTT_CAT2(a, b) a##b
#define PTT_CAT(a, b) PTT_CAT2(a, b)
#define PTT_FPD(x) PTT_CAT(PTT_CAT(ptt_fpd_, PTT_FPD_VARIANT), x)

typedef void (*ptt_fpd_cb)(void *arg);

#define EXPORT __attribute__((visibility("default"), noinline))

/* Calls back with rbp loaded with junk in the variant without frame
 * pointers (so no frame-pointer walk could get through it by luck), then
 * does work after the call (no tail call). */
EXPORT uint64_t PTT_FPD(_call)(ptt_fpd_cb cb, void *arg, uint64_t x);
uint64_t PTT_FPD(_call)(ptt_fpd_cb cb, void *arg, uint64_t x) {
#ifdef PTT_FPD_CLOBBER
  __asm__ volatile("movq %0, %%rbp" : : "r"(x ^ 0x5a5a5a5a5a5a5a5aull) : "rbp");
#endif
  cb(arg);
  __asm__ volatile("" ::: "memory");
  return x * 3 + 1;
}

/* More functions with a body, so the detector has enough to judge. */
#define MIX(n)                                                                     \
  EXPORT uint64_t PTT_FPD(_mix##n)(uint64_t x, ptt_fpd_cb cb);                     \
  uint64_t PTT_FPD(_mix##n)(uint64_t x, ptt_fpd_cb cb) {                           \
    for (int i = 0; i < (n) + 3; i++) x = x * 6364136223846793005ULL + (uint64_t)i; \
    if (cb && (x & 0xff) == n) cb(&x);                                             \
    return x ^ (x >> 29);                                                          \
  }
MIX(1)
MIX(2)
MIX(3)
MIX(4)
MIX(5)
MIX(6)
