/*
 * pd_ngram.h - the built-in responder's language model: a word-level
 * trigram model (with bigram back-off) over the conversation plus a built-in
 * seed corpus, and deterministic generation from it.
 *
 * This is honest CPU work (tokenizing, hashing, counting, weighted sampling)
 * so a profile of the daemon has something real to show; it runs on a libuv
 * work thread (pd_resp_builtin.c).
 *
 * Threads: a model is not thread-safe; build and use it from one thread.
 * Different models on different threads are independent (no globals).
 * Errors: -ENOMEM.
 */
#ifndef PD_NGRAM_H
#define PD_NGRAM_H

#include <stddef.h>
#include <stdint.h>

typedef struct pd_ngram pd_ngram;

pd_ngram *pd_ngram_new(void);   /* NULL on out of memory */
void pd_ngram_del(pd_ngram *m); /* NULL allowed */

/* Tokenizes `text` (words, numbers, punctuation; sentence ends split the
 * text into sentences) and adds its trigrams and bigrams. 0 or -ENOMEM. */
int pd_ngram_add_text(pd_ngram *m, const char *text);

/* Number of distinct tokens / trigram contexts (for tests and logs). */
size_t pd_ngram_vocab(const pd_ngram *m);
size_t pd_ngram_contexts(const pd_ngram *m);

/* Generates up to max_tokens tokens, seeded by `seed` and starting from the
 * last words of `prompt` when the model knows them. The same model contents,
 * seed and prompt always give the same output. Stops early at a sentence
 * end once at least min_tokens were produced. Returns 0 and a malloc'd
 * array of malloc'd strings in *out (*n entries; free with
 * pd_ngram_free_tokens), or -ENOMEM. */
int pd_ngram_generate(pd_ngram *m, uint64_t seed, const char *prompt, int min_tokens,
                      int max_tokens, char ***out, int *n);
void pd_ngram_free_tokens(char **tokens, int n);

/* Joins tokens the way they are streamed: a space before each token except
 * the first and before punctuation. Returns a malloc'd string or NULL. */
char *pd_ngram_join(char **tokens, int n);
/* 1 if the token is punctuation that attaches to the previous word. */
int pd_ngram_is_punct(const char *tok);

/* FNV-1a 64 of a string: the seed of a turn is the hash of its text. */
uint64_t pd_ngram_hash(const char *s);

/* The built-in seed corpus (static text, a few KB). */
const char *pd_ngram_seed_corpus(void);

#endif
