/*
 * bench/daemon/paired.h - the shared statistics of the switch benchmarks
 * (switch_cost.c, switch_pingpong.c): modes run in a shuffled order in each
 * round, and each mode is reported as its mean and its mean per-round
 * difference to mode 0 with a 95 % Student-t interval (this VM's noise is
 * a few per cent, so only paired differences over many rounds say
 * anything). Header-only: each benchmark is one C file built by switch.sh.
 */
#ifndef BENCH_PAIRED_H
#define BENCH_PAIRED_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Two-sided 95 % Student-t quantiles for df 1..30; the normal value above. */
static inline double paired_t95(int df) {
  static const double t[30] = { 12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                2.262,  2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
                                2.110,  2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
                                2.060,  2.056, 2.052, 2.048, 2.045, 2.042 };
  return df >= 1 && df <= 30 ? t[df - 1] : 1.96;
}

/* Fills order[0..n) with 0..n-1 in a random order (seed: rand_r's). */
static inline void paired_shuffle(int *order, int n, unsigned *seed) {
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(rand_r(seed) % (unsigned)(i + 1)), x = order[i];
    order[i] = order[j];
    order[j] = x;
  }
}

/* Runs each of n modes once per round, in a shuffled order (the same
 * sequence on every run: seed 1), for `rounds` rounds: v[round * n + mode]
 * = run(mode, ctx). Returns v (the caller frees it), or NULL when out of
 * memory or a run failed (returned a negative value). */
static inline double *paired_rounds(int rounds, int n, double (*run)(int mode, void *ctx),
                                    void *ctx) {
  double *v = calloc((size_t)rounds * (size_t)n, sizeof *v);
  int *order = calloc((size_t)n, sizeof *order);
  if (!v || !order) {
    free(v);
    free(order);
    return NULL;
  }
  unsigned seed = 1;
  for (int p = 0; p < rounds; p++) {
    paired_shuffle(order, n, &seed);
    for (int k = 0; k < n; k++) {
      double r = run(order[k], ctx);
      if (r < 0) {
        free(v);
        free(order);
        return NULL;
      }
      v[p * n + order[k]] = r;
    }
  }
  free(order);
  return v;
}

/* Prints each of the n modes of v[round * n + mode] (rounds >= 2): its
 * mean, and for modes 1.. the mean difference to mode 0 with its interval,
 * in `unit` (e.g. "us per cycle"). */
static inline void paired_report(const char *const *names, int n, const double *v, int rounds,
                                 const char *mean_unit, const char *unit) {
  for (int m = 0; m < n; m++) {
    double s = 0;
    for (int p = 0; p < rounds; p++) s += v[p * n + m];
    printf("  %-5s %7.2f %s (mean)", names[m], s / rounds, mean_unit);
    if (m != 0) {
      double d = 0, dd = 0;
      for (int p = 0; p < rounds; p++) d += v[p * n + m] - v[p * n];
      d /= rounds;
      for (int p = 0; p < rounds; p++) {
        double e = v[p * n + m] - v[p * n] - d;
        dd += e * e;
      }
      double ci = paired_t95(rounds - 1) * sqrt(dd / (rounds - 1)) / sqrt(rounds);
      printf("   vs %s: %+6.2f +- %.2f %s", names[0], d, ci, unit);
    }
    printf("\n");
  }
}

#endif
