/*
 * tui_term.c - curses setup/teardown and the crash-signal handler.
 *
 * Crash handling and async-signal-safety (the trade-off): on SIGSEGV,
 * SIGABRT, SIGBUS and SIGFPE we call endwin() from the signal handler, then
 * restore the default action and re-raise the signal so the process still
 * dies with it (core dump, exit status). endwin() is NOT async-signal-safe:
 * it writes through curses' output buffer and calls tcsetattr(). If the crash
 * happened inside curses itself, its state may be inconsistent and endwin()
 * could misbehave or crash again; the second crash then hits the default
 * action (the handler is installed with SA_RESETHAND), so the worst case is
 * the same death without a restored terminal. We accept that because the
 * alternative - a raw, no-echo terminal after every crash - is worse for the
 * user, and a crash inside curses is far less likely than one elsewhere. The
 * handler guards against re-entry with a sig_atomic_t flag and touches no
 * other state.
 */
#include "tui/tui_term.h"

#include <curses.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t term_active;
static volatile sig_atomic_t in_crash;
static const int crash_signals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE};
static struct sigaction old_actions[4];

static void crash_handler(int sig) {
  if (!in_crash) {
    in_crash = 1;
    if (term_active) {
      term_active = 0;
      endwin(); /* not async-signal-safe: see the top comment */
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

int tui_term_active(void) { return term_active; }

int tui_term_begin(void) {
  if (term_active) return 0;
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) return -ENOTTY;
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
  term_active = 1;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = crash_handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_NODEFER;
  for (int i = 0; i < 4; i++) sigaction(crash_signals[i], &sa, &old_actions[i]);
  return 0;
}

void tui_term_end(void) {
  if (!term_active) return;
  for (int i = 0; i < 4; i++) sigaction(crash_signals[i], &old_actions[i], NULL);
  term_active = 0;
  endwin();
}
