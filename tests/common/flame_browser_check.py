#!/usr/bin/env python3
"""flame_browser_check.py WORK CHROMIUM - the browser half of
tests/common/flame_browser_test.sh (see there for what is asserted).

WORK holds: real.html (the page of a real snapshot), diff.html (the
differential page of two small profiles), and pp/*.txt, the output of
`go tool pprof` on the same profiles, which the page's numbers must equal.
Prints what it checked; exits 1 with "FAIL: ..." on the first mismatch.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cdp  # noqa: E402

WORK, CHROMIUM = sys.argv[1], sys.argv[2]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def pp(name):
    return open(os.path.join(WORK, "pp", name + ".txt")).read()


def pp_shown(name):
    """X of 'Showing nodes accounting for X, P% of T total' (all nodes
    shown: -nodefraction=0 and a node count above the profile's), i.e. the
    total of the samples the filters kept."""
    m = re.search(r"Showing nodes accounting for (-?[\d.]+), [-\d.]+% of ([\d.]+) total", pp(name))
    if not m:
        fail("no totals in pprof output %s:\n%s" % (name, pp(name)))
    return float(m.group(1))


def pp_cum(name):
    """function -> (flat, cum) of a -top listing."""
    out, hdr = {}, False
    for line in pp(name).splitlines():
        if re.search(r"flat\s+flat%\s+sum%\s+cum\s+cum%", line):
            hdr = True
            continue
        if hdr and line.strip():
            f = line.split(None, 5)
            out[f[5]] = (float(f[0]), float(f[3]))
    return out


FRAMES_JS = r"""(() => {
  const g = document.getElementById('pt-graph'), gr = g.getBoundingClientRect();
  return {
    W: g.clientWidth, total: +g.dataset.total, docTotal: +document.documentElement.dataset.ptTotal,
    frames: Array.from(g.querySelectorAll('.f')).map(b => {
      const r = b.getBoundingClientRect();
      return {name: b.dataset.name, text: b.textContent, level: +b.getAttribute('aria-level'), role: b.getAttribute('role'),
              x: r.left - gr.left - g.clientLeft, w: r.width, h: r.height, value: +b.dataset.value,
              delta: b.dataset.delta === undefined ? null : +b.dataset.delta,
              cls: Array.from(b.classList), label: b.getAttribute('aria-label') || ''};
    })};
})()"""


def frames(page):
    return page.eval(FRAMES_JS)


def check_layout(g, what):
    """Every box: its width is value * W / total within a pixel; the root
    (level 1) spans the whole graph and holds the total; each box lies
    inside one box of the level above (its caller), whose value is at least
    the sum of its children's. Returns each box's parent index."""
    W, total, fr = g["W"], g["total"], g["frames"]
    if not fr:
        fail(what + ": no frames drawn")
    for f in fr:
        if f["role"] != "treeitem" or not f["label"].startswith(f["name"]):
            fail("%s: box %r has role %r and aria-label %r" % (what, f["name"], f["role"], f["label"]))
        # the box shows its name, or as much of it as fits (ending in an ellipsis)
        t = f["text"]
        if not (t == f["name"] or t == "" or (t.endswith("\u2026") and f["name"].startswith(t[:-1]))):
            fail("%s: box %s shows the text %r" % (what, f["name"], t))
        if f["w"] > 8 * len(f["name"]) + 12 and t != f["name"]:
            fail("%s: box %s is %.0f px wide but shows %r" % (what, f["name"], f["w"], t))
        if "anc" in f["cls"]:  # a caller of the zoomed frame: the whole width
            if abs(f["w"] - W) > 1.0 or f["value"] < total:
                fail("%s: the caller box %s is %.2f px wide (graph %d) with %s of %s"
                     % (what, f["name"], f["w"], W, f["value"], total))
            continue
        want = f["value"] * W / total
        if abs(f["w"] - want) > 1.0:
            fail("%s: box %s is %.2f px wide, its value %.0f of %.0f wants %.2f px"
                 % (what, f["name"], f["w"], f["value"], total, want))
    roots = [f for f in fr if f["level"] == 1]
    if len(roots) != 1 or roots[0]["name"] != "all" or abs(roots[0]["w"] - W) > 1.0 \
            or abs(roots[0]["x"]) > 1.0:
        fail("%s: the root box is not one box 'all' spanning the %d px graph: %r" % (what, W, roots))
    parent = []
    for i, f in enumerate(fr):
        if f["level"] == 1:
            parent.append(-1)
            continue
        cands = [j for j, p in enumerate(fr) if p["level"] == f["level"] - 1
                 and p["x"] - 0.5 <= f["x"] and f["x"] + f["w"] <= p["x"] + p["w"] + 0.5]
        if len(cands) != 1:
            fail("%s: box %s at level %d x=%.1f w=%.1f lies in %d boxes of the level above"
                 % (what, f["name"], f["level"], f["x"], f["w"], len(cands)))
        parent.append(cands[0])
    for j, p in enumerate(fr):
        if "anc" in p["cls"]:
            continue
        s = sum(f["value"] for i, f in enumerate(fr) if parent[i] == j)
        if s > p["value"]:
            fail("%s: the children of %s sum to %.0f, over its %.0f" % (what, p["name"], s, p["value"]))
    return parent


def js_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def set_type(page, name):
    page.eval("""(() => { const s = document.getElementById('pt-type');
      const o = Array.from(s.options).find(o => o.textContent.startsWith(%s + ' ('));
      s.value = o.value; s.dispatchEvent(new Event('change')); })()""" % js_str(name))


def search(page, q, regex):
    page.eval("""(() => { const r = document.getElementById('pt-regex'); r.checked = %s;
      const s = document.getElementById('pt-search'); s.value = %s;
      s.dispatchEvent(new Event('input')); })()""" % ("true" if regex else "false", js_str(q)))
    page.wait("document.documentElement.dataset.ptSearch === %s" % js_str(("re:" if regex else "s:") + q),
              "the search %r to be applied" % q)
    return page.eval("""(() => { const m = document.getElementById('pt-match');
      return {value: +m.dataset.value, text: m.textContent,
              marked: Array.from(document.querySelectorAll('#pt-graph .f.m')).map(b => b.dataset.name)}; })()""")


def choose_key(page, key):
    page.eval("""(() => { const s = document.getElementById('pt-fkey');
      const o = Array.from(s.options).find(o => o.textContent.startsWith(%s + ' ('));
      s.value = o.value; s.dispatchEvent(new Event('change')); })()""" % js_str(key))


def click_value(page, value):
    """Clicks the checkbox of a value in the open label's list."""
    ok = page.eval("""(() => { const l = Array.from(document.querySelectorAll('#pt-fvalues label'))
        .find(l => l.querySelector('.pt-v').textContent === %s);
      if (!l) return false; l.querySelector('input').click(); return true; })()""" % js_str(value))
    if not ok:
        fail("no checkbox for the label value %r" % value)


def main():
    udd = os.path.join(WORK, "chromium-profile")
    os.mkdir(udd)
    with cdp.Browser(CHROMIUM, udd, os.path.join(WORK, "chromium.log")) as b:
        page = b.new_page(1400, 900)
        url = "file://" + os.path.join(WORK, "real.html")
        page.navigate(url)
        page.wait('document.documentElement.dataset.ptReady === "1"', "the page to draw")

        # --- widths and totals, in samples (exact counts) ---
        set_type(page, "samples")
        g = frames(page)
        total = pp_shown("top")
        if g["docTotal"] != total or g["total"] != total:
            fail("page total %s (graph %s), go tool pprof says %s samples" % (g["docTotal"], g["total"], total))
        parent = check_layout(g, "whole profile")
        # each function's total = its outermost boxes, as pprof's cum
        names = {}
        for i, f in enumerate(g["frames"]):
            n = f["name"] + (" (inline)" if "inl" in f["cls"] else "")
            a, outer = parent[i], True
            while a >= 0:
                fa = g["frames"][a]
                if fa["name"] + (" (inline)" if "inl" in fa["cls"] else "") == n:
                    outer = False
                a = parent[a]
            if outer and f["level"] > 1:
                names[n] = names.get(n, 0) + f["value"]
        cum = pp_cum("top")
        for fn, (flat, c) in cum.items():
            if names.get(fn) != c:
                fail("function %s: the page's boxes hold %s samples, go tool pprof -top says cum %s"
                     % (fn, names.get(fn), c))
        extra = set(names) - set(cum)
        if extra:
            fail("boxes the pprof listing does not have: %s" % sorted(extra))
        print("# %d boxes, total %d samples, %d functions' totals equal pprof -top's cum"
              % (len(g["frames"]), total, len(cum)))
        for need in ("burn_a", "burn_a_hot", "burn_b", "burn_outside", "spin", "main"):
            if need not in names:
                fail("no box for %s" % need)

        # --- search ---
        r = search(page, "^burn_a$", True)
        want = pp_shown("focus_re")
        if r["value"] != want or set(r["marked"]) != {"burn_a"}:
            fail("regex search ^burn_a$: matched %s, marked %s; pprof -focus says %s"
                 % (r["value"], sorted(set(r["marked"])), want))
        r2 = search(page, "BURN_A", False)
        want2 = pp_shown("focus_sub")
        if r2["value"] != want2 or set(r2["marked"]) != {"burn_a", "burn_a_hot"}:
            fail("substring search BURN_A: matched %s, marked %s; pprof -focus=burn_a says %s"
                 % (r2["value"], sorted(set(r2["marked"])), want2))
        if "%.2f%%" % (100.0 * want2 / total) not in r2["text"]:
            fail("the match text %r does not show the share %.2f%%" % (r2["text"], 100.0 * want2 / total))
        # matches on one stack (spin below main) count once
        r3 = search(page, "^(main|spin)$", True)
        want3 = pp_shown("focus_nested")
        if r3["value"] != want3 or set(r3["marked"]) != {"main", "spin"}:
            fail("regex search ^(main|spin)$: matched %s, marked %s; pprof -focus says %s"
                 % (r3["value"], sorted(set(r3["marked"])), want3))
        search(page, "", False)
        print("# search: ^burn_a$ (regex) %d, burn_a (substring) %d, ^(main|spin)$ %d samples, as pprof -focus"
              % (r["value"], r2["value"], r3["value"]))

        # --- label filter ---
        choose_key(page, "task_kind")
        click_value(page, "labels.A")
        g = frames(page)
        want = pp_shown("tagfocus_a")
        if g["docTotal"] != want:
            fail("filter task_kind=labels.A: page total %s, pprof -tagfocus says %s" % (g["docTotal"], want))
        check_layout(g, "task_kind = labels.A")
        if any(f["name"] in ("burn_b", "burn_outside") for f in g["frames"]):
            fail("filter task_kind=labels.A still draws burn_b or burn_outside")
        page.eval("document.getElementById('pt-fexclude').click()")
        g = frames(page)
        want_ex = pp_shown("tagignore_a")
        if g["docTotal"] != want_ex:
            fail("filter task_kind != labels.A: page total %s, pprof -tagignore says %s" % (g["docTotal"], want_ex))
        check_layout(g, "task_kind != labels.A")
        page.eval("document.getElementById('pt-fexclude').click()")
        click_value(page, "labels.A")  # off again: no filter
        click_value(page, "(no such label)")
        g = frames(page)
        want_none = pp_shown("tagignore_any")
        if g["docTotal"] != want_none:
            fail("filter 'no task_kind': page total %s, pprof -tagignore=task_kind=. says %s"
                 % (g["docTotal"], want_none))
        page.eval("document.getElementById('pt-fclear').click()")
        g = frames(page)
        if g["docTotal"] != total:
            fail("after Clear filters the total is %s, not %s" % (g["docTotal"], total))
        print("# label filter: task_kind=labels.A %d, != %d, none %d samples, as pprof -tagfocus/-tagignore"
              % (want, want_ex, want_none))

        # --- zoom ---
        page.eval("""Array.from(document.querySelectorAll('#pt-graph .f'))
          .find(b => b.dataset.name === 'burn_b').click()""")
        g = frames(page)
        if g["total"] != cum["burn_b"][1]:
            fail("zoomed into burn_b: the graph's total is %s, not its %s samples" % (g["total"], cum["burn_b"][1]))
        check_layout(g, "zoomed into burn_b")
        zb = [f for f in g["frames"] if f["name"] == "burn_b"]
        if len(zb) != 1 or abs(zb[0]["w"] - g["W"]) > 1.0:
            fail("zoomed into burn_b, but its box is not the graph's width: %r" % zb)
        if not page.eval("document.getElementById('pt-details').textContent.includes('burn_b')"):
            fail("the details panel does not show burn_b after the click")
        page.eval("document.getElementById('pt-back').click()")
        if frames(page)["total"] != total:
            fail("Back did not return to the whole profile")
        print("# zoom into burn_b and back")

        # --- no network, no error ---
        reqs = [u for u in page.requests if u != url and not u.startswith("data:")]
        if reqs:
            fail("the page made network requests: %s" % reqs)
        if page.errors:
            fail("errors in the page: %s" % page.errors)

        # --- the differential page ---
        durl = "file://" + os.path.join(WORK, "diff.html")
        page.navigate(durl)
        page.wait('document.documentElement.dataset.ptReady === "1"', "the diff page to draw")
        set_type(page, "samples")
        g = frames(page)
        check_layout(g, "diff, widths of the current profile")
        by = {f["name"]: f for f in g["frames"]}
        dtop = pp_cum("diff_top")
        for fn in ("hot_spin", "parse_line"):
            if fn not in by or by[fn]["delta"] != dtop[fn][0]:
                fail("diff: %s's change is %s on the page, go tool pprof -diff_base says flat %s"
                     % (fn, by.get(fn, {}).get("delta"), dtop.get(fn)))
        if "new" not in by["parse_line"]["cls"] or "old_fn" in by:
            fail("diff: parse_line is not marked new, or old_fn (base only) has a width: %r" % sorted(by))
        page.eval("""(() => { const s = document.getElementById('pt-dwidth'); s.value = 'both';
          s.dispatchEvent(new Event('change')); })()""")
        g = frames(page)
        check_layout(g, "diff, widths of both")
        by = {f["name"]: f for f in g["frames"]}
        if "old_fn" not in by or "gone" not in by["old_fn"]["cls"] or by["old_fn"]["delta"] != dtop["old_fn"][0]:
            fail("diff, widths of both: old_fn missing, not marked gone, or its change differs from pprof's %s: %r"
                 % (dtop.get("old_fn"), by.get("old_fn")))
        legend = page.eval("document.getElementById('pt-legend').textContent")
        if "grew" not in legend or "gone" not in legend:
            fail("diff: no legend: %r" % legend)
        reqs = [u for u in page.requests if u not in (url, durl) and not u.startswith("data:")]
        if reqs or page.errors:
            fail("diff page: requests %s, errors %s" % (reqs, page.errors))
        print("# diff: hot_spin %+d, parse_line new %+d, old_fn gone %+d samples, as pprof -diff_base"
              % (by["hot_spin"]["delta"], by["parse_line"]["delta"], by["old_fn"]["delta"]))
    print("ok")


if __name__ == "__main__":
    try:
        main()
    except cdp.CdpError as e:
        fail(str(e))
