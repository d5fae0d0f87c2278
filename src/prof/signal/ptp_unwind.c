/*
 * ptp_unwind.c - the stack walker run inside the SIGPROF handler.
 *
 * ASYNC-SIGNAL-SAFE FILE: everything here runs in a signal handler. Only
 * arithmetic, reads of the interrupted thread's stack (each one checked
 * against its bounds first), reads of a published ptp_cfi_set and
 * ptp_xrange_set, at most three bytes of code at the interrupted PC inside
 * its own page (JIT leaf, see jit_step: through process_vm_readv, a bare
 * system call, the one call this file makes), and lock-free compare-and-swaps
 * on a pre-allocated slot of the set (marking an object's table as wanted)
 * and on ptp_g_xranges_wanted. No allocation, no lock, no other global
 * state but code_at's refusal flag.
 *
 * Stack reads are exempt from AddressSanitizer: the walker deliberately reads
 * other frames' slots, which ASan's stack redzones would report.
 */
#include <errno.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "prof/signal/ptp_unwind.h"
#include "prof/signal/ptp_xrange.h"
#include "prof/output/ptp_window.h"

_Atomic(const ptp_cfi_set *) ptp_g_cfi;

#if defined(__SANITIZE_ADDRESS__)
#define PTP_NO_ASAN __attribute__((no_sanitize_address))
#else
#define PTP_NO_ASAN
#endif

/* A label's block is rarely run (GCC; clang ignores label attributes). */
#if defined(__GNUC__) && !defined(__clang__)
#define PTP_COLD_LABEL __attribute__((cold))
#else
#define PTP_COLD_LABEL
#endif

/* Reads one word of the stack if [a, a + 8) lies within [lo, hi) and a is
 * aligned; returns 0 otherwise (the caller ends the walk). */
PTP_NO_ASAN static inline int stack_read(uintptr_t a, uintptr_t lo, uintptr_t hi, uintptr_t *v) {
  if (a < lo || hi < 8 || a > hi - 8 || (a & 7u)) return 0;
  *v = *(const volatile uintptr_t *)a;
  return 1;
}

ptp_cfi_lib *ptp_cfi_find(const ptp_cfi_set *cfi, uintptr_t pc) {
  size_t lo = 0, hi = cfi->nobjs;
  /* last object with lo <= pc */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (cfi->objs[mid].lo <= pc) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const ptp_cfi_obj *o = &cfi->objs[lo - 1];
  return pc < o->hi ? &cfi->libs[o->lib] : NULL;
}

const ptp_cfi_rule *ptp_cfi_tab_lookup(const ptp_cfi_tab *tab, uintptr_t pc) {
  /* Rows are bias-relative; a pc below the bias wraps to a huge value that
   * no row covers (starts and lengths are below 2^32 + 2^16). */
  const uintptr_t rel = pc - tab->bias;
  size_t lo = 0, hi = tab->nrows;
  /* last row with start <= rel */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (tab->rows[mid].start <= rel) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return NULL;
  const ptp_cfi_row *row = &tab->rows[lo - 1];
  /* rule < nrules: checked when the table was built or read */
  return rel - row->start < row->len ? &tab->rules[row->rule] : NULL;
}

const ptp_cfi_rule *ptp_cfi_lookup(const ptp_cfi_set *cfi, uintptr_t pc) {
  const ptp_cfi_lib *lib = ptp_cfi_find(cfi, pc);
  if (!lib) return NULL;
  const ptp_cfi_tab *tab = atomic_load_explicit(&lib->tab, memory_order_acquire);
  return tab ? ptp_cfi_tab_lookup(tab, pc) : NULL;
}

int ptp_cfi_in_system(const ptp_cfi_set *cfi, uintptr_t pc) {
  const ptp_cfi_lib *lib = ptp_cfi_find(cfi, pc);
  if (!lib) return 0;
  uint8_t st = atomic_load_explicit(&lib->state, memory_order_relaxed);
  return st != PTP_LIB_FP && st != PTP_LIB_NOCFI;
}

int ptp_unwind(const ptp_regs *r, uintptr_t stack_lo, uintptr_t stack_hi,
               const ptp_cfi_set *cfi, uintptr_t *frames, int max, uint16_t *flags) {
  return ptp_unwind_ex(r, stack_lo, stack_hi, cfi, NULL, frames, max, flags, NULL);
}

/* ---- frames in code outside loaded objects (JIT) -------------------------
 *
 * Such code (a published range, ptp_xrange.h, or an object's code its CFI
 * does not describe: V8's builtins linked into node) has no unwind table;
 * JIT compilers that want to be profiled keep frame pointers (V8: `push
 * rbp; mov rbp, rsp` in every JS frame, its builtins too), so a frame there
 * is stepped with [rbp] = caller's rbp and [rbp + 8] = return address,
 * each step validated: the frame lies in the thread's stack at or above sp,
 * 8-byte aligned (stack_read; not 16: V8's JS frames are not, the caller
 * pushes the arguments), the walk progresses (the caller's sp = rbp + 16 >
 * sp), and the return address lies in executable memory we know (a loaded
 * object's text or a published range). Any failed check ends the walk,
 * truncated; nothing is guessed.
 *
 * The interrupted frame (the leaf) needs more: at a function's first
 * instruction, or at its `ret` after the epilogue, rbp still (or again)
 * holds the caller's frame pointer and the return address is at [sp]; a
 * frame-pointer step would silently skip the caller. So the code at the
 * interrupted PC is read (only inside its own page, which the CPU is
 * executing from, and only in a range mapped readable):
 *   push rbp (55), ret (c3), ret imm16 (c2)  -> return address [sp], rbp
 *                                               unchanged (the caller's);
 *   mov rbp, rsp (48 89 e5 / 48 8b ec)       -> just after `push rbp`:
 *       with [sp] == rbp, return address [sp + 8];
 *   anything else                            -> the frame is set up: a
 *                                               frame-pointer step.
 * A leaf in an unreadable range ends the walk (truncated). Known limit
 * (the frame-pointer walk's own): a JIT function that builds no frame at
 * all hides its caller when interrupted in its body.
 */

/* Set once process_vm_readv is refused (a seccomp filter: ENOSYS, EPERM):
 * code_at loads directly from then on. */
static _Atomic int vm_read_refused;

/* Copies n bytes of code at pc if they lie in pc's page. 0 when they cross
 * the page or cannot be read.
 * The page is mapped when the handler runs at the moment of the signal
 * (the interrupted thread executes from it), but not always when it runs
 * later with that moment's context: ThreadSanitizer defers an asynchronous
 * signal to the thread's next intercepted call, and a dlclose in between
 * unmaps the code (seen: a SIGSEGV here in tests/prof/sampler_stress_test.sh
 * under TSan, the handler called from dlclose's free). So the bytes are
 * read by the kernel, which answers EFAULT for an unmapped page instead of
 * faulting; only where that call is refused is the load direct, which holds
 * for a handler run at the signal. One system call, only for a leaf in JIT
 * code. */
PTP_NO_ASAN static inline int code_at(uintptr_t pc, unsigned n, uint8_t *out) {
  if ((pc & 4095u) + n > 4096u) return 0;
  if (!atomic_load_explicit(&vm_read_refused, memory_order_relaxed)) {
    int saved = errno;
    struct iovec local = { out, n }, remote = { (void *)pc, n };
    long got = syscall(SYS_process_vm_readv, (long)getpid(), &local, 1ul, &remote, 1ul, 0ul);
    int e = errno;
    errno = saved;
    if (got == (long)n) return 1;
    if (got >= 0 || (e != ENOSYS && e != EPERM)) return 0;   /* EFAULT: not mapped */
    atomic_store_explicit(&vm_read_refused, 1, memory_order_relaxed);
  }
  for (unsigned i = 0; i < n; i++) out[i] = *(const volatile uint8_t *)(pc + i);
  return 1;
}

/* A return address ra is plausible when the call before it lies in
 * executable memory we know: a loaded object or a published range. */
static inline int ra_known(const ptp_cfi_set *cfi, const ptp_xrange_set *xr, uintptr_t ra) {
  return ra > 0 && (ptp_cfi_find(cfi, ra - 1) || ptp_xrange_find(xr, ra - 1));
}

/* One step out of a frame in x (see above). Returns 1 with *npc, *nsp,
 * *nfp set, or 0 (end the walk, truncated). */
__attribute__((noinline)) PTP_NO_ASAN static int jit_step(const ptp_cfi_set *cfi, const ptp_xrange_set *xr,
                                const ptp_xrange *x, int leaf, uintptr_t pc, uintptr_t sp,
                                uintptr_t fp, int fp_known, uintptr_t lo, uintptr_t hi,
                                uintptr_t *npc, uintptr_t *nsp, uintptr_t *nfp) {
  if (leaf) {
    uint8_t c[3];
    if (!(x->flags & PTP_XR_READABLE) || !code_at(pc, 1, c)) return 0;
    if (c[0] == 0x55 || c[0] == 0xc3 || c[0] == 0xc2) {
      /* No frame of its own (yet, or any more): the return address is on
       * top of the stack and rbp is the caller's. */
      if (!stack_read(sp, lo, hi, npc) || !ra_known(cfi, xr, *npc)) return 0;
      *nsp = sp + 8;
      *nfp = fp;
      return 1;
    }
    uintptr_t top;
    if (c[0] == 0x48 && code_at(pc, 3, c) &&
        ((c[1] == 0x89 && c[2] == 0xe5) || (c[1] == 0x8b && c[2] == 0xec)) &&
        stack_read(sp, lo, hi, &top) && top == fp && fp_known) {
      /* Between `push rbp` and `mov rbp, rsp`. */
      if (!stack_read(sp + 8, lo, hi, npc) || !ra_known(cfi, xr, *npc)) return 0;
      *nsp = sp + 16;
      *nfp = fp;
      return 1;
    }
  }
  if (!fp_known || fp < sp || !stack_read(fp, lo, hi, nfp) ||
      !stack_read(fp + 8, lo, hi, npc) || !ra_known(cfi, xr, *npc))
    return 0;
  *nsp = fp + 16;
  return 1;
}

PTP_NO_ASAN int ptp_unwind_ex(const ptp_regs *r, uintptr_t stack_lo, uintptr_t stack_hi,
                              const ptp_cfi_set *cfi, const ptp_xrange_set *xr_in,
                              uintptr_t *frames, int max, uint16_t *flags, int *asked) {
  *flags = 0;
  if (asked) *asked = 0;
  if (r->pc == 0 || max < 1) return 0;
  frames[0] = r->pc;
  int n = 1;
  uintptr_t pc = r->pc, sp = r->sp, fp = r->fp;
  /* Unknown bounds, or the thread runs on another stack (a signal stack, a
   * fiber): keep the leaf only, marked truncated, so the CPU time still
   * counts. */
  if (stack_hi == 0 || sp < stack_lo || sp >= stack_hi) {
    *flags |= PTP_SAMPLE_TRUNCATED;
    return 1;
  }
  /* The ranges are read only on the JIT branches: kept in memory, so that
   * native stacks (the common case) keep the loop's values in registers
   * (measured: held in a register, it cost the CFI path three spills). */
  const ptp_xrange_set *volatile xr = xr_in;
  /* Nothing below the interrupted sp is part of any caller's frame; only
   * [sp, top) is read (and it is mapped: it is this thread's live stack). */
  const uintptr_t lo = sp, hi = stack_hi;
  /* Invariant: fp holds the value rbp had in the current frame. Code without
   * frame pointers may use rbp as a general register; then its CFI says
   * where it saved the caller's value and we restore it from there, else
   * (rule "same value") the incoming value is the caller's too. */
  int fp_known = 1;
  int leaf = 1;       /* pc is an interrupted PC, not a return address */
  for (;;) {
    uintptr_t npc, nsp, nfp;
    const ptp_xrange *jx;
    ptp_xrange gap;
    if (n >= max) {
      *flags |= PTP_SAMPLE_TRUNCATED | PTP_SAMPLE_DEPTH_CAP;
      break;
    }
    ptp_cfi_lib *lib = cfi ? ptp_cfi_find(cfi, pc) : NULL;
    uint8_t state = lib ? atomic_load_explicit(&lib->state, memory_order_acquire) : PTP_LIB_FP;
    if (cfi && !lib) {
      jx = ptp_xrange_find(xr, pc);
      if (jx) goto jit;
      /* In no object and no range we know of (JIT code made since the
       * ranges were read, or an object loaded after the set was built):
       * nothing tells how to get out of this frame. Keep what we have,
       * truncated; the walk that raises the flag wakes the consumer, which
       * looks for new objects and ranges. */
      int expect = 0;
      if (atomic_load_explicit(&ptp_g_xranges_wanted, memory_order_relaxed) == 0 &&
          atomic_compare_exchange_strong_explicit(&ptp_g_xranges_wanted, &expect, 1,
                                                  memory_order_relaxed, memory_order_relaxed) &&
          asked)
        *asked = 1;
      *flags |= PTP_SAMPLE_TRUNCATED;
      break;
    }
    if (state == PTP_LIB_NOCFI) { *flags |= PTP_SAMPLE_TRUNCATED; break; }
    if (state != PTP_LIB_FP) {
      const ptp_cfi_tab *tab = atomic_load_explicit(&lib->tab, memory_order_acquire);
      if (!tab) {
        /* No table yet: ask the consumer for one (it builds it at its next
         * pass) and keep this sample, truncated. */
        uint8_t expect = PTP_LIB_NONE;
        if (atomic_load_explicit(&lib->state, memory_order_relaxed) == PTP_LIB_NONE &&
            atomic_compare_exchange_strong_explicit(&lib->state, &expect, PTP_LIB_WANTED,
                                                    memory_order_relaxed, memory_order_relaxed) &&
            asked)
          *asked = 1;
        *flags |= PTP_SAMPLE_TRUNCATED;
        break;
      }
      /* A return address points after the call; pc - 1 is inside it (and
       * inside the right function when the call was the last instruction). */
      const ptp_cfi_rule *rule = ptp_cfi_tab_lookup(tab, leaf ? pc : pc - 1);
      if (!rule) {
        /* Code of a non-system object that its CFI does not describe: code
         * a JIT compiler generated at build time and linked in (V8's
         * builtins in node's text, which its JIT code calls), walked as JIT
         * code is. glibc's objects describe all their code: there a PC
         * without a row stays truncated. (lib is looked up again: kept
         * across the lookup above, it would cost the common path a spill.) */
        const ptp_cfi_lib *l = ptp_cfi_find(cfi, pc);
        if (l->system) { *flags |= PTP_SAMPLE_TRUNCATED; break; }
        gap = (ptp_xrange){ .flags = l->code_readable ? PTP_XR_READABLE : 0u };
        jx = &gap;
        goto jit;
      }
      if (rule->kind == PTP_CFI_NORULE) { *flags |= PTP_SAMPLE_TRUNCATED; break; }
      if (rule->kind == PTP_CFI_END) break;             /* outermost frame: complete */
      uintptr_t cfa;
      if (rule->kind == PTP_CFI_RSP) {
        cfa = sp + (intptr_t)rule->cfa_off;
      } else {
        if (!fp_known) { *flags |= PTP_SAMPLE_TRUNCATED; break; }
        cfa = fp + (intptr_t)rule->cfa_off;
      }
      if (!stack_read(cfa + (intptr_t)rule->ra_off, lo, hi, &npc)) {
        *flags |= PTP_SAMPLE_TRUNCATED;
        break;
      }
      if (rule->rbp_off == PTP_RBP_SAME) {
        nfp = fp;
      } else if (rule->rbp_off == PTP_RBP_UNKNOWN) {
        nfp = 0;
        fp_known = 0;
      } else if (leaf && cfa + (intptr_t)rule->rbp_off < sp) {
        /* Interrupted in an epilogue after `pop %rbp`: GCC's CFI keeps the
         * save rule to the end of the function, but the slot is below sp
         * (dead, possibly overwritten by the signal frame) and rbp already
         * holds the caller's value again. Only the interrupted frame can
         * be in this state: a caller's save slots lie above its callee's
         * CFA. */
        nfp = fp;
      } else if (!stack_read(cfa + (intptr_t)rule->rbp_off, lo, hi, &nfp)) {
        *flags |= PTP_SAMPLE_TRUNCATED;
        break;
      } else {
        fp_known = 1;
      }
      nsp = cfa;
    } else {
      /* Frame pointer (an object that keeps them, or cfi == NULL):
       * [fp] = caller's rbp, [fp + 8] = return address. */
      if (fp_known && fp == 0) break;                   /* end of the chain */
      if (!fp_known || fp < sp ||
          !stack_read(fp, lo, hi, &nfp) || !stack_read(fp + 8, lo, hi, &npc)) {
        *flags |= PTP_SAMPLE_TRUNCATED;
        break;
      }
      nsp = fp + 16;
      fp_known = 1;
    }
    if (nsp <= sp) { *flags |= PTP_SAMPLE_TRUNCATED; break; }  /* no progress */
    if (npc == 0) break;                                /* end of the chain */
  next:
    frames[n++] = npc;
    pc = npc;
    sp = nsp;
    fp = nfp;
    leaf = 0;
    continue;
  jit: PTP_COLD_LABEL;
    {
      /* A frame in JIT code: one validated frame-pointer step (jit_step:
       * nsp > sp, npc != 0), its results through locals of this block. */
      uintptr_t jpc, jsp, jfp;
      if (!jit_step(cfi, xr, jx, leaf, pc, sp, fp, fp_known, lo, hi, &jpc, &jsp, &jfp)) {
        *flags |= PTP_SAMPLE_TRUNCATED;
        break;
      }
      npc = jpc;
      nsp = jsp;
      nfp = jfp;
      fp_known = 1;
      goto next;
    }
  }
  return n;
}
