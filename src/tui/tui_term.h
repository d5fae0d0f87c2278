/*
 * tui_term.h - terminal setup and teardown for the curses screens, including
 * restoring the terminal when the process dies from a crash signal.
 *
 * Threads: call from the main thread only.
 */
#ifndef TUI_TERM_H
#define TUI_TERM_H

/* Initialises curses on stdin/stdout (raw mode so Ctrl-C arrives as a key,
 * no echo, keypad, non-blocking reads, short ESC delay, alternate screen if
 * the terminal has one) and installs the crash handlers. Returns 0, or
 * -ENOTTY when stdin/stdout is not a terminal, -EIO if curses cannot start. */
int tui_term_begin(void);

/* Restores the terminal (endwin) and removes the crash handlers. Idempotent;
 * safe to call when tui_term_begin failed or was never called. */
void tui_term_end(void);

/* 1 between a successful tui_term_begin and tui_term_end. */
int tui_term_active(void);

#endif
