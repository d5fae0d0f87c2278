// bench/real/jswork.js - the JavaScript workload of the real-program bench
// (run by Debian's `node` with --perf-basic-prof): recursion, arrays and
// sorting, Map/string work and a JSON round trip, a fixed amount of work
// per SCALE (about 0.4 CPU s here), so every run does the same work. Most of
// its CPU is in code V8 compiles at run time (JIT code, named only by the
// perf map it writes) and in V8's builtins.
"use strict";

function fib(n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

function sortWork(n, seed) {
  const a = new Array(n);
  let x = seed;
  for (let i = 0; i < n; i++) { x = (x * 1103515245 + 12345) & 0x7fffffff; a[i] = x % 100003; }
  a.sort((p, q) => p - q);
  let s = 0;
  for (let i = 0; i < n; i += 97) s = (s + a[i]) | 0;
  return s;
}

function wordCount(n, seed) {
  const m = new Map();
  let x = seed;
  for (let i = 0; i < n; i++) {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    const w = "w" + (x % 5003).toString(16);
    m.set(w, (m.get(w) || 0) + 1);
  }
  let best = 0;
  for (const v of m.values()) if (v > best) best = v;
  return best;
}

function jsonWork(n) {
  const objs = [];
  for (let i = 0; i < n; i++) objs.push({ id: i, name: "item" + i, tags: ["a", "b", i % 7], v: i * 1.5 });
  const back = JSON.parse(JSON.stringify(objs));
  return back.length + back[n - 1].id;
}

function main(scale) {
  let t = 0;
  for (let r = 0; r < scale; r++) {
    for (let i = 0; i < 4; i++) t += fib(27);
    t += sortWork(300000, r + 1);
    t += wordCount(800000, r + 7);
    t += jsonWork(40000);
  }
  return t;
}

console.log(main(parseInt(process.argv[2] || "1", 10)));
