"""bench/real/pywork.py - the pure-Python workload of the real-program bench
(run by Debian's /usr/bin/python3.11, built without frame pointers): the
interpreter's eval loop, dicts, strings, recursion and sorting, about 1 CPU s
per SCALE. No imports beyond sys, so every sample is interpreter code."""
import sys


def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


def words(n):
    out, x = [], 12345
    for _ in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out.append("w%x" % (x % 5003))
    return out


def count(ws):
    d = {}
    for w in ws:
        d[w] = d.get(w, 0) + 1
    return sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    total = 0
    for _ in range(scale):
        total += fib(25)
        top = count(words(400000))
        total += top[0][1] + len(" ".join(w for w, _ in top[:1000]))
    print(total)


main()
