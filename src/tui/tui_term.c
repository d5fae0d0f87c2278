/*
 * tui_term.c - curses setup/teardown and the crash-signal handler.
 *
 * Crash handling and async-signal-safety: on SIGSEGV, SIGABRT, SIGBUS and
 * SIGFPE the handler restores the terminal WITHOUT curses, using only
 * async-signal-safe calls, then restores the default action and re-raises
 * the signal so the process still dies with it (core dump, exit status).
 *
 * Everything the handler needs is prepared in tui_term_begin, on the main
 * thread, before the handlers are installed:
 *   - `saved_tio`: the terminal modes from before initscr (what endwin would
 *     put back), restored with tcsetattr();
 *   - `restore_seq`: the terminal's own strings to reset attributes (sgr0),
 *     show the cursor (cnorm), leave keypad-transmit mode (rmkx) and leave
 *     the alternate screen (rmcup), read from terminfo and copied into a
 *     static buffer, written with pt_write_all() (write(2) in a loop,
 *     async-signal-safe: src/common/pt_write_all.h).
 * The handler reads only these two (written before sigaction, never changed
 * while handlers are installed) and sig_atomic_t flags; write, tcsetattr,
 * signal and raise are async-signal-safe (POSIX.1-2008 list). So a crash
 * anywhere, including inside curses itself, leaves a usable terminal. What
 * curses had buffered but not written is lost, which is harmless: the screen
 * is being left anyway.
 */
#include "tui/tui_term.h"

#include "common/pt_write_all.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>

static volatile sig_atomic_t term_active;
static volatile sig_atomic_t in_crash;
static const int crash_signals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE};
#define NCRASH (sizeof crash_signals / sizeof crash_signals[0])
static struct sigaction old_actions[NCRASH];

/* Prepared by tui_term_begin before the handlers exist; read-only after. */
static struct termios saved_tio;
static int have_tio;
static char restore_seq[256];
static size_t restore_len;

/* Appends terminfo string capability `cap` to restore_seq, without its
 * padding specifications ("$<5>"), which only matter for slow terminals.
 * Skips absent capabilities and any that would not fit. */
static void add_cap(const char *cap) {
  char *s = tigetstr(cap);
  if (!s || s == (char *)-1) return;
  char tmp[sizeof restore_seq];
  size_t n = 0;
  for (const char *p = s; *p; p++) {
    if (p[0] == '$' && p[1] == '<') {
      const char *end = strchr(p, '>');
      if (end) {
        p = end;
        continue;
      }
    }
    if (n + 1 >= sizeof tmp) return;
    tmp[n++] = *p;
  }
  if (restore_len + n > sizeof restore_seq) return;
  memcpy(restore_seq + restore_len, tmp, n);
  restore_len += n;
}

/* Signal handler: async-signal-safe calls only (see the top comment). */
static void crash_handler(int sig) {
  if (!in_crash) {
    in_crash = 1;
    if (term_active) {
      term_active = 0;
      (void)pt_write_all(STDOUT_FILENO, restore_seq, restore_len);
      if (have_tio) tcsetattr(STDOUT_FILENO, TCSANOW, &saved_tio);
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

int tui_term_active(void) { return term_active; }

int tui_term_begin(void) {
  if (term_active) return 0;
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return -ENOTTY;
  have_tio = tcgetattr(STDOUT_FILENO, &saved_tio) == 0;
  set_escdelay(25);
  if (!initscr()) return -EIO;
  raw();
  noecho();
  nonl();
  keypad(stdscr, TRUE);
  nodelay(stdscr, TRUE);
  if (has_colors()) {
    start_color();
    use_default_colors();
  }
  restore_len = 0;
  add_cap("sgr0");
  add_cap("cnorm");
  add_cap("rmkx");
  add_cap("rmcup");
  term_active = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = crash_handler;
  sigemptyset(&sa.sa_mask);
  /* SA_RESETHAND: a crash inside the handler itself gets the default
   * action; SA_NODEFER: the re-raise is delivered at once. */
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (size_t i = 0; i < NCRASH; i++) sigaction(crash_signals[i], &sa, &old_actions[i]);
  return 0;
}

void tui_term_end(void) {
  if (!term_active) return;
  for (size_t i = 0; i < NCRASH; i++) sigaction(crash_signals[i], &old_actions[i], NULL);
  term_active = 0;
  endwin();
}
