/*
 * ptp_process.h - the sampler's process-wide state: where each piece lives,
 * what guards it, how long it lives and what a fork does to it, written
 * once here.
 *
 * Why process-wide: one process has one SIGPROF handler, one set of
 * threads and one address space, so the handler's view of them, the thread
 * registry and the unwind tables exist once per process, whatever the
 * number of ptprof handles (at most one runs at a time). What belongs to
 * one handle (its ring and counters, ptp_shared; its aggregation,
 * symbolizer and snapshot store) is the handle's and not listed here.
 *
 * Each module keeps its state in one file-level struct (or, for the
 * handler's, a few atomics defined in signal/); no other file-level
 * variable exists in src/prof:
 *
 *   where (struct)                what                         guarded by
 *   signal/ptp_producer.c         ptp_g_shared, ptp_g_inside   atomics; grace (ptp_grace.h)
 *   signal/ptp_unwind.c           ptp_g_cfi                    atomic; written by unwind/ptp_cfi.c
 *   signal/ptp_xrange.c           ptp_g_xranges, _wanted       atomics; written by unwind/ptp_xranges.c
 *   signal/ptp_thread_sig.c       ptp_g_thread_sigs, _tidmap   publication rule (ptp_thread_sig.h)
 *   signal/ptp_label_set.c        ptp_t_labels (TLS)           its own thread
 *   signal/ptp_own_work.c         ptp_t_own_work (TLS)         its own thread
 *   signal/ptp_perffd.c           perffd_state: per number,    atomics
 *                                 our perf events now/lately
 *   signal/ptp_sigstate.c         ptp_g_sig: the program's     two slots + gen (readers
 *                                 SIGPROF disposition, our     lock-free); writers:
 *                                 timers' magic, installed     ptp_siginterpose.c's lock
 *   runtime/ptp_threads.c (reg)   records, free list, tables   reg.mu, reg.sweep_mu;
 *                                 + self_sig (TLS): the         its own thread
 *                                 thread's own record
 *   runtime/ptp_engine.c (eng)    running sampler's settings   reg.mu; counters atomic
 *   runtime/ptp_exitacct.c (acct) exit counters                atomics
 *   runtime/ptp_graveyard.c (grave) names of exited threads,   grave.mu
 *                                 kept by dump epoch
 *   runtime/ptp_labels.c (lab)    interned strings, ended tasks lab.mu; per-thread cache TLS
 *   runtime/ptprof.c (proc)       the started sampler, starts  atomics
 *   runtime/ptp_perf.c            exclude_kernel, decided once atomic
 *   runtime/ptp_interpose.c (libc) libc's functions (dlsym)    atomics, resolved once;
 *                                 a per-thread "inside a refresh" flag
 *   runtime/ptp_fdwatch.c (fw)    libc's close family (dlsym)  atomics, resolved once
 *   runtime/ptp_libc.c            libc's pthread_create (dlsym) atomic, resolved once
 *   runtime/ptp_privio.c (pio)    the ptprof-io helper and its pio.mu (one call at a time:
 *                                 job slot; made anew in a     pio.call_mu); the helper's
 *                                 fork child                   tid atomic
 *   runtime/ptp_siginterpose.c    libc's functions, the writers' a spin lock held with all
 *     (sigi)                      lock, libc's restorer, the    signals blocked; atomics
 *                                 "stopped for good" reason
 *   runtime/ptp_process.c         this set-up's once flag      pthread_once
 *   runtime/ptp_preload.c (pre)   the preload mode's sampler   constructor / atexit only
 *   unwind/ptp_cfi.c (cfi)        set generation, retired      cfi.mu
 *                                 sets, lazy-table accounting,
 *                                 the table cache's pending saves
 *   unwind/ptp_xranges.c (xr)     retired range sets, the      xr.mu
 *                                 re-read rate, counters
 *   cache/ptp_cachefile.c         a temp-name counter          atomic
 *   cache/ptp_fd.c (place)        where the next long-lived    atomic (a hint)
 *                                 descriptor goes
 *   cache/ptp_fdmarks.c (marks)   our long-lived descriptor    atomics (async-signal-
 *                                 numbers, "one was closed"    safe: the close-family
 *                                                              interposers read them)
 *   ptp_alloc.c                   fault injection (test builds) atomic; per-thread TLS
 *
 * Lifetime: each is created at first use and never freed. Threads may be
 * created, and SIGPROF may arrive, at any moment until the process exits,
 * so nothing the handler, the pthread_create trampoline or a thread's exit
 * destructor can reach is ever torn down: the registry's tables are mapped
 * once (MAP_NORESERVE: only the pages of records in use are touched), a
 * retired unwind-table set is freed only after the handler grace. Memory
 * that only a running sampler needs belongs to its handle.
 *
 * Fork: every module whose lock a forked child could inherit held registers
 * its own pthread_atfork handlers at its first use: before fork they take
 * its lock, after it they release it in both processes. No module holds
 * its lock while taking another module's, so the order in which the
 * modules' handlers run (the reverse of their registration) cannot
 * deadlock. In the child:
 *   - signal/: ptp_g_shared is cleared (the parent's ring is never
 *     written: ptp_process_init's handler); the rest stays (the copied
 *     tables describe the child's copied memory);
 *   - registry: every record is forgotten but the forking thread's,
 *     re-keyed to its new tid; engine: no sampler is active, no source is
 *     the child's (POSIX timers are not inherited; the child's copies of
 *     perf event fds are closed, the events stay the parent's);
 *   - unwind tables, executable ranges, labels, graveyard: kept as they
 *     are (the same address space, copied);
 *   - signal interposers (ptp_siginterpose.c): their writers' lock is
 *     taken before fork and released in both; the program's virtual
 *     SIGPROF disposition is the parent's (as a real one would be), our
 *     handler stays installed;
 *   - ptprof.c: a handle the parent created refuses every call but
 *     ptprof_del and ptprof_get_stats (PTPROF_E_FORKED); a child may start
 *     its own sampler.
 */
#ifndef PTP_PROCESS_H
#define PTP_PROCESS_H

/* Sets up what every sampler needs once per process, in order: the thread
 * registry (its tables, the main thread's record, its exit key and fork
 * handlers) and the fork handler of signal/'s published sampler.
 * Idempotent and thread-safe (pthread_once). Returns 0 or the registry's
 * -ENOMEM/-errno (then nothing can sample in this process). */
int ptp_process_init(void);

#endif
