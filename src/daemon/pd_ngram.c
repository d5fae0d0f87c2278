/* pd_ngram.c - word trigram model. See pd_ngram.h.
 *
 * Tokens are interned into ids (open-addressing hash table). Token 0 is the
 * sentence boundary "<s>". Each context (a,b) maps to a list of (next,count)
 * kept in first-seen order, so generation depends only on the input text,
 * never on hash-table layout. Contexts for back-off use a = UINT32_MAX.
 */
#include "daemon/pd_ngram.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  uint32_t next, count;
} follow;

typedef struct {
  uint32_t a, b;      /* key; a == EMPTY marks a free slot */
  uint32_t n, cap;
  uint32_t total;     /* sum of counts */
  follow *f;
} ctx_slot;

struct pd_ngram {
  /* token interning */
  char **tok;          /* id -> string */
  uint32_t ntok, captok;
  uint32_t *tok_tab;   /* hash slots holding id+1, 0 = free */
  size_t tok_tab_cap;
  /* contexts */
  ctx_slot *ctx;
  size_t ctx_cap, nctx;
};

#define EMPTY 0xfffffffeu
#define BACKOFF 0xffffffffu

uint64_t pd_ngram_hash(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ull;
  }
  return h;
}

static uint64_t hash_n(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

pd_ngram *pd_ngram_new(void) {
  pd_ngram *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->tok_tab_cap = 1024;
  m->tok_tab = calloc(m->tok_tab_cap, sizeof *m->tok_tab);
  m->ctx_cap = 1024;
  m->ctx = malloc(m->ctx_cap * sizeof *m->ctx);
  if (!m->tok_tab || !m->ctx) {
    pd_ngram_del(m);
    return NULL;
  }
  for (size_t i = 0; i < m->ctx_cap; i++) m->ctx[i].a = EMPTY;
  return m;
}

void pd_ngram_del(pd_ngram *m) {
  if (!m) return;
  for (uint32_t i = 0; i < m->ntok; i++) free(m->tok[i]);
  free(m->tok);
  free(m->tok_tab);
  if (m->ctx)
    for (size_t i = 0; i < m->ctx_cap; i++)
      if (m->ctx[i].a != EMPTY) free(m->ctx[i].f);
  free(m->ctx);
  free(m);
}

size_t pd_ngram_vocab(const pd_ngram *m) { return m->ntok; }
size_t pd_ngram_contexts(const pd_ngram *m) { return m->nctx; }

static int tok_grow(pd_ngram *m) {
  size_t ncap = m->tok_tab_cap * 2;
  uint32_t *nt = calloc(ncap, sizeof *nt);
  if (!nt) return -ENOMEM;
  for (size_t i = 0; i < m->tok_tab_cap; i++) {
    uint32_t v = m->tok_tab[i];
    if (!v) continue;
    size_t h = pd_ngram_hash(m->tok[v - 1]) & (ncap - 1);
    while (nt[h]) h = (h + 1) & (ncap - 1);
    nt[h] = v;
  }
  free(m->tok_tab);
  m->tok_tab = nt;
  m->tok_tab_cap = ncap;
  return 0;
}

/* Returns the id of token s[0..n), interning it; -1 on OOM. */
static int64_t intern(pd_ngram *m, const char *s, size_t n) {
  if ((m->ntok + 1) * 2 > m->tok_tab_cap && tok_grow(m) < 0) return -1;
  size_t h = hash_n(s, n) & (m->tok_tab_cap - 1);
  for (;;) {
    uint32_t v = m->tok_tab[h];
    if (!v) break;
    const char *t = m->tok[v - 1];
    if (strlen(t) == n && memcmp(t, s, n) == 0) return v - 1;
    h = (h + 1) & (m->tok_tab_cap - 1);
  }
  if (m->ntok == m->captok) {
    uint32_t nc = m->captok ? m->captok * 2 : 256;
    char **nt = realloc(m->tok, nc * sizeof *nt);
    if (!nt) return -1;
    m->tok = nt;
    m->captok = nc;
  }
  char *c = malloc(n + 1);
  if (!c) return -1;
  memcpy(c, s, n);
  c[n] = 0;
  m->tok[m->ntok] = c;
  m->tok_tab[h] = m->ntok + 1;
  return m->ntok++;
}

static size_t ctx_hash(uint32_t a, uint32_t b) { return (size_t)mix(((uint64_t)a << 32) | b); }

static int ctx_grow(pd_ngram *m) {
  size_t ncap = m->ctx_cap * 2;
  ctx_slot *nc = malloc(ncap * sizeof *nc);
  if (!nc) return -ENOMEM;
  for (size_t i = 0; i < ncap; i++) nc[i].a = EMPTY;
  for (size_t i = 0; i < m->ctx_cap; i++) {
    if (m->ctx[i].a == EMPTY) continue;
    size_t h = ctx_hash(m->ctx[i].a, m->ctx[i].b) & (ncap - 1);
    while (nc[h].a != EMPTY) h = (h + 1) & (ncap - 1);
    nc[h] = m->ctx[i];
  }
  free(m->ctx);
  m->ctx = nc;
  m->ctx_cap = ncap;
  return 0;
}

static ctx_slot *ctx_find(const pd_ngram *m, uint32_t a, uint32_t b) {
  size_t h = ctx_hash(a, b) & (m->ctx_cap - 1);
  while (m->ctx[h].a != EMPTY) {
    if (m->ctx[h].a == a && m->ctx[h].b == b) return &m->ctx[h];
    h = (h + 1) & (m->ctx_cap - 1);
  }
  return NULL;
}

static int ctx_add(pd_ngram *m, uint32_t a, uint32_t b, uint32_t next) {
  if ((m->nctx + 1) * 2 > m->ctx_cap && ctx_grow(m) < 0) return -ENOMEM;
  size_t h = ctx_hash(a, b) & (m->ctx_cap - 1);
  while (m->ctx[h].a != EMPTY && !(m->ctx[h].a == a && m->ctx[h].b == b))
    h = (h + 1) & (m->ctx_cap - 1);
  ctx_slot *c = &m->ctx[h];
  if (c->a == EMPTY) {
    memset(c, 0, sizeof *c);
    c->a = a;
    c->b = b;
    m->nctx++;
  }
  for (uint32_t i = 0; i < c->n; i++) {
    if (c->f[i].next == next) {
      c->f[i].count++;
      c->total++;
      return 0;
    }
  }
  if (c->n == c->cap) {
    uint32_t nc = c->cap ? c->cap * 2 : 4;
    follow *nf = realloc(c->f, nc * sizeof *nf);
    if (!nf) return -ENOMEM;
    c->f = nf;
    c->cap = nc;
  }
  c->f[c->n].next = next;
  c->f[c->n].count = 1;
  c->n++;
  c->total++;
  return 0;
}

int pd_ngram_is_punct(const char *t) {
  return t[0] && !t[1] && strchr(".,!?;:", t[0]) != NULL;
}

static int is_sentence_end(const char *t) { return t[0] && !t[1] && strchr(".!?", t[0]); }

static int is_word_char(unsigned char c) {
  return isalnum(c) || c == '\'' || c == '-' || c >= 0x80; /* keep UTF-8 words whole */
}

/* Calls fn(token, len) for each token of text. */
static int tokenize(const char *text, int (*fn)(void *, const char *, size_t), void *arg) {
  const unsigned char *p = (const unsigned char *)text;
  while (*p) {
    if (is_word_char(*p)) {
      const unsigned char *s = p;
      while (*p && is_word_char(*p)) p++;
      int r = fn(arg, (const char *)s, (size_t)(p - s));
      if (r < 0) return r;
    } else if (strchr(".,!?;:", *p)) {
      int r = fn(arg, (const char *)p, 1);
      if (r < 0) return r;
      p++;
    } else {
      p++;
    }
  }
  return 0;
}

typedef struct {
  pd_ngram *m;
  uint32_t a, b;
} add_state;

static int add_tok(void *arg, const char *s, size_t n) {
  add_state *st = arg;
  int64_t id = intern(st->m, s, n);
  if (id < 0) return -ENOMEM;
  if (ctx_add(st->m, st->a, st->b, (uint32_t)id) < 0) return -ENOMEM;
  if (ctx_add(st->m, BACKOFF, st->b, (uint32_t)id) < 0) return -ENOMEM;
  st->a = st->b;
  st->b = (uint32_t)id;
  if (is_sentence_end(st->m->tok[id])) {
    /* sentence boundary: the next sentence starts from <s> <s> */
    if (ctx_add(st->m, st->a, st->b, 0) < 0) return -ENOMEM;
    st->a = st->b = 0;
  }
  return 0;
}

int pd_ngram_add_text(pd_ngram *m, const char *text) {
  if (m->ntok == 0 && intern(m, "<s>", 3) != 0) return -ENOMEM;
  add_state st = {m, 0, 0};
  int r = tokenize(text, add_tok, &st);
  if (r < 0) return r;
  /* close an unterminated last sentence */
  if (st.b != 0 && ctx_add(m, st.a, st.b, 0) < 0) return -ENOMEM;
  return 0;
}

typedef struct {
  pd_ngram *m;
  int64_t last[2];
} prompt_state;

static int prompt_tok(void *arg, const char *s, size_t n) {
  prompt_state *st = arg;
  /* look the token up without interning (the prompt is already in the
   * model when it came from the transcript; unknown words just reset) */
  int64_t id = -1;
  size_t h = hash_n(s, n) & (st->m->tok_tab_cap - 1);
  for (;;) {
    uint32_t v = st->m->tok_tab[h];
    if (!v) break;
    const char *t = st->m->tok[v - 1];
    if (strlen(t) == n && memcmp(t, s, n) == 0) {
      id = v - 1;
      break;
    }
    h = (h + 1) & (st->m->tok_tab_cap - 1);
  }
  st->last[0] = st->last[1];
  st->last[1] = id;
  return 0;
}

static uint64_t xorshift(uint64_t *s) {
  uint64_t x = *s;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  return *s = x;
}

static uint32_t pick(const ctx_slot *c, uint64_t *rng) {
  uint64_t r = xorshift(rng) % c->total;
  for (uint32_t i = 0; i < c->n; i++) {
    if (r < c->f[i].count) return c->f[i].next;
    r -= c->f[i].count;
  }
  return c->f[c->n - 1].next;
}

void pd_ngram_free_tokens(char **tokens, int n) {
  if (!tokens) return;
  for (int i = 0; i < n; i++) free(tokens[i]);
  free(tokens);
}

int pd_ngram_generate(pd_ngram *m, uint64_t seed, const char *prompt, int min_tokens,
                      int max_tokens, char ***out, int *nout) {
  *out = NULL;
  *nout = 0;
  if (max_tokens <= 0) return 0;
  char **toks = calloc((size_t)max_tokens, sizeof *toks);
  if (!toks) return -ENOMEM;
  uint64_t rng = mix(seed) | 1;
  uint32_t a = 0, b = 0;
  if (m->ntok > 0 && prompt) {
    prompt_state ps = {m, {-1, -1}};
    tokenize(prompt, prompt_tok, &ps);
    /* continue from the prompt's last two words when the model has them */
    if (ps.last[0] >= 0 && ps.last[1] >= 0 && ctx_find(m, (uint32_t)ps.last[0], (uint32_t)ps.last[1])) {
      a = (uint32_t)ps.last[0];
      b = (uint32_t)ps.last[1];
    } else if (ps.last[1] >= 0 && ctx_find(m, BACKOFF, (uint32_t)ps.last[1])) {
      b = (uint32_t)ps.last[1];
    }
  }
  int n = 0, restarts = 0;
  while (n < max_tokens && m->ntok > 1) {
    const ctx_slot *c = ctx_find(m, a, b);
    if (!c || c->total == 0) c = ctx_find(m, BACKOFF, b);
    if (!c || c->total == 0) {
      if (a == 0 && b == 0) break; /* empty model */
      a = b = 0;
      if (++restarts > max_tokens) break;
      continue;
    }
    uint32_t next = pick(c, &rng);
    if (next == 0) {
      /* sentence boundary */
      if (n >= min_tokens) break;
      a = b = 0;
      if (++restarts > max_tokens) break;
      continue;
    }
    toks[n] = strdup(m->tok[next]);
    if (!toks[n]) {
      pd_ngram_free_tokens(toks, n);
      return -ENOMEM;
    }
    n++;
    a = b;
    b = next;
    if (is_sentence_end(m->tok[next]) && n >= min_tokens) break;
  }
  *out = toks;
  *nout = n;
  return 0;
}

char *pd_ngram_join(char **tokens, int n) {
  size_t len = 1;
  for (int i = 0; i < n; i++) len += strlen(tokens[i]) + 1;
  char *s = malloc(len), *p = s;
  if (!s) return NULL;
  for (int i = 0; i < n; i++) {
    if (i > 0 && !pd_ngram_is_punct(tokens[i])) *p++ = ' ';
    size_t l = strlen(tokens[i]);
    memcpy(p, tokens[i], l);
    p += l;
  }
  *p = 0;
  return s;
}

const char *pd_ngram_seed_corpus(void) {
  /* Plain prose about the tool itself, so offline replies read as text. */
  return
    "Polytoken is a local conversation tool. A daemon keeps your sessions and "
    "a terminal client talks to it over a socket. Every turn you send is written "
    "to the transcript before the reply starts, and every reply is written when "
    "it ends. The offline responder builds a small language model from the "
    "conversation and a seed text, then samples a reply one word at a time. "
    "It is not clever, but it is deterministic: the same conversation and the "
    "same question always give the same answer. That makes it useful for tests "
    "and for profiling, because the work it does is real work. "
    "If you want a real model, set a responder command and the daemon will run "
    "it for each turn, with the conversation as JSON on its standard input. "
    "The reply streams back as the command prints it. "
    "A turn can be cancelled at any time. A responder that crashes or hangs "
    "is reported in the conversation, and the session stays usable. "
    "Sessions live in their own directories under the state root. "
    "Each session has a name, a creation time and a time of last activity. "
    "The transcript is a file of JSON lines, one line per entry, and the daemon "
    "only ever appends to it. When the disk is full the append fails cleanly, "
    "the partial line is removed, and the error is shown to you. "
    "Profiling builds add a sampler and a task console. The sampler records "
    "where the time goes, the task console shows what each task is doing, "
    "and the profile is written when the daemon stops. "
    "Good tools explain what they do. Good errors say what went wrong and "
    "what to do next. Small programs that do one thing well are easy to test. "
    "The event loop waits for input, runs a callback, and goes back to waiting. "
    "A callback should be short, so that every client gets its turn. "
    "Heavy work moves to a worker thread, and the result comes back to the loop. "
    "You can ask about sessions, turns, the daemon, the transcript or the loop. "
    "What would you like to talk about today? I can tell you how the pieces fit "
    "together, how a turn flows from the client to the responder and back, "
    "or how the files are kept safe on disk. ";
}
