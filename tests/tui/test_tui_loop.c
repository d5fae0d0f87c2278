/* Unit tests for the TUI's event-loop seam (src/tui/tui_loop.c) on a real
 * libuv loop: callbacks run bracketed, wakers are armed/disarmed on
 * transitions, and ending a unit from its own callback is deferred. */
#include "pt_test.h"
#include "tui/tui_loop.h"

#include <unistd.h>

typedef struct ctx {
  tui_unit unit;
  tui_timer timer;
  tui_poll poll;
  int fired, in_poll_seen, live_inside, end_pending_inside;
  int fds[2];
} ctx;

static void on_timer(void *ud) {
  ctx *c = ud;
  c->fired++;
  c->in_poll_seen = c->unit.in_poll;
  tui_unit_end(&c->unit); /* from inside its own callback */
  c->live_inside = c->unit.live;
  c->end_pending_inside = c->unit.end_pending;
  tui_timer_close(&c->timer, NULL);
}

PT_TEST(tui_loop_end_inside_callback_is_deferred) {
  uv_loop_t loop;
  PT_ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  ctx c = {0};
  tui_unit_start(&c.unit, "test.unit");
  PT_ASSERT_INT_EQ(c.unit.live, 1);
  PT_ASSERT_INT_EQ(tui_timer_init(&loop, &c.timer, &c.unit, on_timer, &c), 0);
  PT_ASSERT_INT_EQ(tui_timer_pending(&c.timer), 0);
  PT_ASSERT_INT_EQ(tui_timer_start(&c.timer, 1, 0), 0);
  PT_ASSERT_INT_EQ(tui_timer_pending(&c.timer), 1); /* armed */
  PT_ASSERT_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  PT_ASSERT_INT_EQ(c.fired, 1);
  PT_ASSERT_INT_EQ(c.in_poll_seen, 1);        /* ran between poll_begin/end */
  PT_ASSERT_INT_EQ(c.live_inside, 1);         /* not ended mid-poll ... */
  PT_ASSERT_INT_EQ(c.end_pending_inside, 1);
  PT_ASSERT_INT_EQ(c.unit.live, 0);           /* ... but right after it */
  PT_ASSERT_INT_EQ(c.unit.in_poll, 0);
  PT_ASSERT_INT_EQ(tui_timer_pending(&c.timer), 0); /* one-shot fired: disarmed */
  PT_ASSERT_INT_EQ(uv_loop_close(&loop), 0);
}

static void on_readable(void *ud, int status, int events) {
  ctx *c = ud;
  PT_ASSERT_INT_EQ(status, 0);
  PT_ASSERT(events & UV_READABLE);
  char b;
  PT_ASSERT(read(c->fds[0], &b, 1) == 1);
  c->fired++;
  c->in_poll_seen = c->unit.in_poll;
  /* Restarting the unit inside its callback revokes a pending end. */
  tui_unit_end(&c->unit);
  tui_unit_start(&c->unit, "test.unit");
  tui_poll_close(&c->poll, NULL);
}

PT_TEST(tui_loop_poll_arm_disarm_and_restart) {
  uv_loop_t loop;
  PT_ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  ctx c = {0};
  PT_ASSERT(pipe(c.fds) == 0);
  tui_unit_start(&c.unit, "test.unit");
  PT_ASSERT_INT_EQ(tui_poll_init(&loop, &c.poll, c.fds[0], &c.unit, on_readable, &c), 0);
  PT_ASSERT_INT_EQ(tui_poll_start(&c.poll, UV_READABLE), 0);
  PT_ASSERT_INT_EQ(c.poll.armed, 1);
  PT_ASSERT_INT_EQ(tui_poll_start(&c.poll, UV_READABLE), 0); /* no double arm */
  PT_ASSERT_INT_EQ(c.poll.armed, 1);
  PT_ASSERT(write(c.fds[1], "x", 1) == 1);
  PT_ASSERT_INT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
  PT_ASSERT_INT_EQ(c.fired, 1);
  PT_ASSERT_INT_EQ(c.in_poll_seen, 1);
  PT_ASSERT_INT_EQ(c.poll.armed, 0);  /* closed: disarmed */
  PT_ASSERT_INT_EQ(c.unit.live, 1);   /* the end was revoked */
  tui_unit_end(&c.unit);
  PT_ASSERT_INT_EQ(c.unit.live, 0);
  close(c.fds[0]);
  close(c.fds[1]);
  PT_ASSERT_INT_EQ(uv_loop_close(&loop), 0);
}
