/* Unit tests for the built-in responder's model (src/daemon/pd_ngram.c). */
#include "pt_test.h"
#include "daemon/pd_ngram.h"

static char *gen(const char *extra, const char *prompt) {
  pd_ngram *m = pd_ngram_new();
  PT_ASSERT(m);
  PT_ASSERT_INT_EQ(pd_ngram_add_text(m, pd_ngram_seed_corpus()), 0);
  if (extra) PT_ASSERT_INT_EQ(pd_ngram_add_text(m, extra), 0);
  char **t;
  int n;
  PT_ASSERT_INT_EQ(pd_ngram_generate(m, pd_ngram_hash(prompt), prompt, 12, 60, &t, &n), 0);
  PT_ASSERT(n >= 1 && n <= 60);
  char *s = pd_ngram_join(t, n);
  pd_ngram_free_tokens(t, n);
  pd_ngram_del(m);
  return s;
}

PT_TEST(daemon_ngram_deterministic) {
  const char *conv = "The cat sat on the mat. The dog sat on the log. Where did the cat sit?";
  char *a = gen(conv, "Where did the cat sit?");
  char *b = gen(conv, "Where did the cat sit?");
  PT_ASSERT_STR_EQ(a, b); /* same conversation + same text = same reply */
  char *c = gen(conv, "Tell me about the daemon and its sessions.");
  PT_ASSERT(strcmp(a, c) != 0);
  PT_ASSERT(strlen(a) > 10);
  free(a);
  free(b);
  free(c);
}

PT_TEST(daemon_ngram_model_counts_and_join) {
  pd_ngram *m = pd_ngram_new();
  PT_ASSERT_INT_EQ(pd_ngram_add_text(m, "a b c. a b d."), 0);
  /* <s>, a, b, c, ., d */
  PT_ASSERT_UINT_EQ(pd_ngram_vocab(m), 6);
  /* the only continuation of "a b" is c or d; generation stays in the model */
  char **t;
  int n;
  PT_ASSERT_INT_EQ(pd_ngram_generate(m, 42, "", 3, 3, &t, &n), 0);
  PT_ASSERT_INT_EQ(n, 3);
  PT_ASSERT_STR_EQ(t[0], "a");
  PT_ASSERT_STR_EQ(t[1], "b");
  PT_ASSERT(strcmp(t[2], "c") == 0 || strcmp(t[2], "d") == 0);
  pd_ngram_free_tokens(t, n);
  char *toks[] = {"hello", ",", "world", "!"};
  char *j = pd_ngram_join(toks, 4);
  PT_ASSERT_STR_EQ(j, "hello, world!");
  free(j);
  /* an empty model produces nothing, without looping */
  pd_ngram *e = pd_ngram_new();
  PT_ASSERT_INT_EQ(pd_ngram_generate(e, 1, "x", 3, 10, &t, &n), 0);
  PT_ASSERT_INT_EQ(n, 0);
  pd_ngram_free_tokens(t, n);
  pd_ngram_del(e);
  pd_ngram_del(m);
}
