/*
 * sampler_nofp_lib.c - a shared library built WITHOUT frame pointers
 * (-O2 -fomit-frame-pointer, see tests/prof/meson.build), like Debian's
 * libuv or jansson, for the sampler's unit test prof_sampler_nofp_lib.
 *
 * ptt_nofp_outer -> nofp_mid -> callback (in the test binary, with frame
 * pointers). nofp_mid loads a junk value into rbp before calling back, so a
 * frame-pointer walk from the callback cannot get past it: only the CFI
 * (which records where nofp_mid saved the caller's rbp) can.
 */
#include <stdint.h>

typedef void (*ptt_nofp_cb)(void *arg);

__attribute__((noinline)) static uint64_t nofp_mid(ptt_nofp_cb cb, void *arg, uint64_t x) {
  /* rbp is clobbered (callee-saved: the compiler saves it in the prologue
   * and describes that in .eh_frame) and holds garbage during the call. */
  __asm__ volatile("movq %0, %%rbp" : : "r"(x ^ 0x5a5a5a5a5a5a5a5aull) : "rbp");
  cb(arg);
  __asm__ volatile("" ::: "memory");
  return x * 3 + 1;                       /* work after the call: no tail call */
}

__attribute__((visibility("default"), noinline))
uint64_t ptt_nofp_outer(ptt_nofp_cb cb, void *arg, int n);

uint64_t ptt_nofp_outer(ptt_nofp_cb cb, void *arg, int n) {
  uint64_t acc = 0;
  for (int i = 0; i < n; i++) acc += nofp_mid(cb, arg, acc + (uint64_t)i);
  __asm__ volatile("" ::: "memory");
  return acc;
}
