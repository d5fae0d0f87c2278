/*
 * test_unwind_jit.c - the walker in code outside loaded objects (JIT code,
 * published ranges, signal/ptp_xrange.h) and in an object's code its CFI
 * does not describe: frame-pointer steps, each validated, and the leaf's
 * prologue/epilogue states read from the code at the PC. Fake stacks and a
 * hand-made table set; exact frames.
 */
#include "pt_test.h"
#include "prof/signal/ptp_unwind.h"
#include "prof/signal/ptp_xrange.h"
#include "prof/output/ptp_window.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Two pages of "JIT code" (readable) and a range nobody may read. */
static uint8_t g_code[2 * 4096] __attribute__((aligned(4096)));
#define CODE ((uintptr_t)g_code)
#define NOREAD_LO ((uintptr_t)0x7000000)
#define NOREAD_HI ((uintptr_t)0x7001000)

/* Fake objects: [0x1000, 0x2000) with one END row over [0x1000, 0x1800)
 * (the outermost frame: a walk reaching it is complete) and no row above;
 * [0x3000, 0x4000) the same, but a system object. */
typedef struct fixture {
  ptp_cfi_tab *tab;
  ptp_cfi_obj objs[2];
  ptp_cfi_lib libs[2];
  ptp_cfi_set set;
  ptp_xrange xr[2];
  ptp_xrange_set xrs;
  uintptr_t stack[128];
  uintptr_t lo, hi;
} fixture;

static fixture *fx_new(void) {
  fixture *f = calloc(1, sizeof *f);
  PT_ASSERT(f);
  f->tab = calloc(1, sizeof *f->tab + sizeof(ptp_cfi_rule) + sizeof(ptp_cfi_row));
  PT_ASSERT(f->tab);
  ptp_cfi_rule *rule = (ptp_cfi_rule *)(f->tab + 1);
  ptp_cfi_row *row = (ptp_cfi_row *)(rule + 1);
  *rule = (ptp_cfi_rule){ .kind = PTP_CFI_END };
  *row = (ptp_cfi_row){ .start = 0x1000, .len = 0x800, .rule = 0 };
  f->tab->nrows = 1;
  f->tab->rows = row;
  f->tab->nrules = 1;
  f->tab->rules = rule;
  /* The system object's table covers the same offsets, 0x2000 higher. */
  f->objs[0] = (ptp_cfi_obj){ 0x1000, 0x2000, 0 };
  f->objs[1] = (ptp_cfi_obj){ 0x3000, 0x4000, 1 };
  for (int i = 0; i < 2; i++) {
    atomic_init(&f->libs[i].tab, f->tab);
    atomic_init(&f->libs[i].state, PTP_LIB_READY);
    f->libs[i].code_readable = 1;
  }
  f->libs[1].system = 1;
  f->set = (ptp_cfi_set){ .objs = f->objs, .nobjs = 2, .libs = f->libs, .nlibs = 2 };
  f->xr[0] = (ptp_xrange){ .lo = NOREAD_LO, .hi = NOREAD_HI, .flags = 0 };
  f->xr[1] = (ptp_xrange){ .lo = CODE, .hi = CODE + sizeof g_code, .flags = PTP_XR_READABLE };
  if (f->xr[0].lo > f->xr[1].lo) {
    ptp_xrange t = f->xr[0];
    f->xr[0] = f->xr[1];
    f->xr[1] = t;
  }
  f->xrs = (ptp_xrange_set){ .r = f->xr, .n = 2 };
  f->lo = (uintptr_t)&f->stack[0];
  f->hi = (uintptr_t)&f->stack[128];
  memset(g_code, 0x90, sizeof g_code);          /* nop: "the body" */
  g_code[0x100] = 0x55;                          /* push rbp */
  memcpy(&g_code[0x200], "\x48\x89\xe5", 3);     /* mov rbp, rsp */
  memcpy(&g_code[0x210], "\x48\x8b\xec", 3);     /* mov rbp, rsp (other encoding) */
  g_code[0x300] = 0xc3;                          /* ret */
  memcpy(&g_code[0x310], "\xc2\x10\x00", 3);     /* ret 16 */
  memcpy(&g_code[4095], "\x48\x89\xe5", 3);      /* mov rbp, rsp across the page end */
  return f;
}

static void fx_del(fixture *f) {
  free(f->tab);
  free(f);
}

static uintptr_t S(fixture *f, int i) { return (uintptr_t)&f->stack[i]; }

static int walk(fixture *f, uintptr_t pc, uintptr_t sp, uintptr_t fp, uintptr_t *fr, uint16_t *fl,
                int *asked) {
  ptp_regs r = { .pc = pc, .sp = sp, .fp = fp };
  return ptp_unwind_ex(&r, f->lo, f->hi, &f->set, &f->xrs, fr, 16, fl, asked);
}

/* The caller's frame record at stack[8]: [8] -> stack[16], [9] = return
 * address into JIT code at 0x500; stack[16]: end of the JIT chain, return
 * into the object's outermost frame. */
static void two_frames(fixture *f) {
  f->stack[8] = S(f, 16);
  f->stack[9] = CODE + 0x500;
  f->stack[16] = S(f, 24);
  f->stack[17] = 0x1500;
}

PT_TEST(prof_unwind_jit_chain) {
  fixture *f = fx_new();
  two_frames(f);
  uintptr_t fr[16];
  uint16_t fl;
  int asked = -1;
  /* Interrupted in a body (nop): frame pointers through two JIT frames,
   * then the object's CFI (its END row: complete). */
  int n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, &asked);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_UINT_EQ(fr[0], CODE + 0x400);
  PT_ASSERT_UINT_EQ(fr[1], CODE + 0x500);
  PT_ASSERT_UINT_EQ(fr[2], 0x1500);
  PT_ASSERT_INT_EQ(fl, 0);
  PT_ASSERT_INT_EQ(asked, 0);
  /* Without the range set, the same PC is unknown: the leaf only. */
  ptp_regs r = { .pc = CODE + 0x400, .sp = S(f, 4), .fp = S(f, 8) };
  n = ptp_unwind(&r, f->lo, f->hi, &f->set, fr, 16, &fl);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* The frame pointer equal to sp (right after `mov rbp, rsp`) is fine. */
  f->stack[4] = S(f, 16);
  f->stack[5] = CODE + 0x500;
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 4), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_INT_EQ(fl, 0);
  fx_del(f);
}

PT_TEST(prof_unwind_jit_leaf_states) {
  fixture *f = fx_new();
  two_frames(f);
  uintptr_t fr[16];
  uint16_t fl;
  /* At `push rbp` (the first instruction), `ret` and `ret imm16`: no frame
   * of its own, rbp is the caller's, the return address is at [sp]. A
   * frame-pointer step would skip the caller (CODE + 0x500). */
  const unsigned at[] = { 0x100, 0x300, 0x310 };
  for (size_t i = 0; i < 3; i++) {
    memset(f->stack, 0, 8 * sizeof f->stack[0]);
    two_frames(f);
    f->stack[4] = CODE + 0x500;
    int n = walk(f, CODE + at[i], S(f, 4), S(f, 8), fr, &fl, NULL);
    PT_ASSERT_MSG(n == 4, "at %#x: %d frames", at[i], n);
    PT_ASSERT_UINT_EQ(fr[1], CODE + 0x500);   /* the caller, from [sp] */
    PT_ASSERT_UINT_EQ(fr[2], CODE + 0x500);   /* its frame (rbp): return into JIT code */
    PT_ASSERT_UINT_EQ(fr[3], 0x1500);
    PT_ASSERT_INT_EQ(fl, 0);
  }
  /* [sp] not executable at `push rbp`: ends there, truncated. */
  f->stack[4] = 0x9999;
  int n = walk(f, CODE + 0x100, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* At `mov rbp, rsp` (after `push rbp`): [sp] is the saved rbp (equal to
   * rbp), the return address at [sp + 8]; both encodings. */
  const unsigned mov[] = { 0x200, 0x210 };
  for (size_t i = 0; i < 2; i++) {
    f->stack[3] = S(f, 8);
    f->stack[4] = CODE + 0x500;
    n = walk(f, CODE + mov[i], S(f, 3), S(f, 8), fr, &fl, NULL);
    PT_ASSERT_MSG(n == 4, "at %#x: %d frames", mov[i], n);
    PT_ASSERT_UINT_EQ(fr[1], CODE + 0x500);
    PT_ASSERT_UINT_EQ(fr[3], 0x1500);
    PT_ASSERT_INT_EQ(fl, 0);
  }
  /* A `mov rbp, rsp` whose [sp] is not rbp is no prologue: a body (the
   * frame-pointer step). */
  f->stack[3] = 0x1234;
  n = walk(f, CODE + 0x200, S(f, 3), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_UINT_EQ(fr[1], CODE + 0x500);
  PT_ASSERT_UINT_EQ(fr[2], 0x1500);
  /* The instruction crosses the end of the PC's page: only that page is
   * read, so it counts as a body. */
  f->stack[3] = S(f, 8);
  n = walk(f, CODE + 4095, S(f, 3), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_UINT_EQ(fr[2], 0x1500);
  fx_del(f);
}

PT_TEST(prof_unwind_jit_checks) {
  fixture *f = fx_new();
  uintptr_t fr[16];
  uint16_t fl;
  int n;
  /* A return address in no executable memory we know. */
  two_frames(f);
  f->stack[9] = 0x9999;
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* ... also not just past a range's end (the call would lie outside). */
  f->stack[9] = CODE + sizeof g_code + 1;
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* The frame below sp. */
  two_frames(f);
  n = walk(f, CODE + 0x400, S(f, 10), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* A misaligned frame pointer. */
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 8) + 4, fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* A frame pointer past the stack top. */
  n = walk(f, CODE + 0x400, S(f, 4), f->hi + 64, fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* A chain pointing back down (a loop): the second JIT frame's rbp lies
   * below its sp. */
  two_frames(f);
  f->stack[16] = S(f, 8);
  f->stack[17] = CODE + 0x600;
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_UINT_EQ(fr[2], CODE + 0x600);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* A leaf in a range that is not readable: its frame's state cannot be
   * told, the walk ends there; as a caller (a return address) it steps. */
  two_frames(f);
  n = walk(f, NOREAD_LO + 0x10, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  f->stack[9] = NOREAD_LO + 0x20;
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_UINT_EQ(fr[1], NOREAD_LO + 0x20);
  PT_ASSERT_UINT_EQ(fr[2], 0x1500);
  PT_ASSERT_INT_EQ(fl, 0);
  fx_del(f);
}

/* A leaf in a published readable range whose page is gone: the handler can
 * run after the moment its context describes (ThreadSanitizer defers
 * signals; a dlclose meanwhile unmaps the code), so the code at the PC is
 * read without faulting: the walk ends there, truncated, and the process
 * lives (before: SIGSEGV in code_at). */
PT_TEST(prof_unwind_jit_leaf_unmapped) {
  fixture *f = fx_new();
  two_frames(f);
  void *page = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  PT_ASSERT(page != MAP_FAILED);
  PT_ASSERT_INT_EQ(munmap(page, 4096), 0);
  uintptr_t gone = (uintptr_t)page;
  ptp_xrange r[2] = { { .lo = gone, .hi = gone + 4096, .flags = PTP_XR_READABLE },
                      { .lo = CODE, .hi = CODE + sizeof g_code, .flags = PTP_XR_READABLE } };
  if (r[0].lo > r[1].lo) {
    ptp_xrange t = r[0];
    r[0] = r[1];
    r[1] = t;
  }
  f->xrs = (ptp_xrange_set){ .r = r, .n = 2 };
  uintptr_t fr[16];
  uint16_t fl;
  int n = walk(f, gone + 0x100, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT_UINT_EQ(fr[0], gone + 0x100);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* the mapped range next to it still reads its code (a `push rbp` leaf) */
  f->stack[4] = CODE + 0x500;
  n = walk(f, CODE + 0x100, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 4);
  PT_ASSERT_INT_EQ(fl, 0);
  fx_del(f);
}

PT_TEST(prof_unwind_jit_unknown_pc_asks) {
  fixture *f = fx_new();
  uintptr_t fr[16];
  uint16_t fl;
  int asked = -1;
  atomic_store(&ptp_g_xranges_wanted, 0);
  /* A PC in no object and no range: truncated; the first such walk raises
   * the flag and asks for the consumer, the next ones only find it raised. */
  int n = walk(f, 0x5000, S(f, 4), S(f, 8), fr, &fl, &asked);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  PT_ASSERT_INT_EQ(asked, 1);
  PT_ASSERT_INT_EQ(atomic_load(&ptp_g_xranges_wanted), 1);
  n = walk(f, 0x5000, S(f, 4), S(f, 8), fr, &fl, &asked);
  PT_ASSERT_INT_EQ(asked, 0);
  /* Also as a return address: the JIT leaf's caller in unknown memory. */
  atomic_store(&ptp_g_xranges_wanted, 0);
  two_frames(f);
  f->stack[9] = CODE + 0x500;
  f->stack[17] = 0x5008;
  f->xr[1].hi = CODE + 0x1000;            /* only the first page */
  f->stack[9] = CODE + 0x500;
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, &asked);
  PT_ASSERT_INT_EQ(n, 2);                  /* 0x5008 fails the return-address check */
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  PT_ASSERT_INT_EQ(asked, 0);
  /* A known range: nothing raised. */
  atomic_store(&ptp_g_xranges_wanted, 0);
  two_frames(f);
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, &asked);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_INT_EQ(atomic_load(&ptp_g_xranges_wanted), 0);
  fx_del(f);
}

PT_TEST(prof_unwind_jit_cfi_gap) {
  fixture *f = fx_new();
  uintptr_t fr[16];
  uint16_t fl;
  /* A return address into the object's code its table does not cover
   * (0x1800..0x2000): stepped with frame pointers, as JIT code. The leaf
   * reads the code at its PC: point the frame at a readable "push rbp"
   * for the leaf case below. */
  two_frames(f);
  f->stack[9] = 0x1900;                    /* gap in a non-system object */
  f->stack[16] = S(f, 24);
  f->stack[17] = 0x1500;
  int n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_UINT_EQ(fr[1], 0x1900);
  PT_ASSERT_UINT_EQ(fr[2], 0x1500);
  PT_ASSERT_INT_EQ(fl, 0);
  /* The same gap in a system object (glibc describes all its code): no
   * step, truncated. */
  f->stack[9] = 0x3900;
  n = walk(f, CODE + 0x400, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 2);
  PT_ASSERT_UINT_EQ(fr[1], 0x3900);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  /* A leaf in a gap of an object whose code is not readable: ends there. */
  f->libs[0].code_readable = 0;
  f->stack[9] = CODE + 0x500;
  n = walk(f, 0x1900, S(f, 4), S(f, 8), fr, &fl, NULL);
  PT_ASSERT_INT_EQ(n, 1);
  PT_ASSERT(fl & PTP_SAMPLE_TRUNCATED);
  fx_del(f);
}
