#!/usr/bin/env python3
"""browser_times.py CHROMIUM PAGE.html WORKDIR - loads a flame graph page in
headless chromium (tests/common/cdp.py) and prints, as one JSON line, the
times (ms) of what a user waits for: "ready" from navigation start to the
first drawing done and laid out, "search" from typing a search to the
redrawn graph (the page waits 200 ms after typing when the tree has over
200k frames: included), "filter" from ticking a label value to the
redrawn graph, "zoom" from a click on the widest box under the root to the
redrawn graph, plus the boxes drawn and the JS heap used."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "common"))
import cdp  # noqa: E402

chromium, page_path, work = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
udd = os.path.join(work, "udd-%d" % os.getpid())
os.mkdir(udd)
with cdp.Browser(chromium, udd, os.path.join(work, "chromium.log"), timeout=300) as b:
    p = b.new_page(1400, 900)
    p.navigate("file://" + page_path)
    p.wait('document.documentElement.dataset.ptReady === "1"')
    ready = p.eval("new Promise(r => requestAnimationFrame(() => setTimeout(() => r(performance.now()))))")
    boxes = p.eval("document.querySelectorAll('#pt-graph .f').length")
    heap = p.eval("performance.memory ? performance.memory.usedJSHeapSize : 0")
    search = p.eval("""new Promise(r => { const t0 = performance.now();
      const s = document.getElementById('pt-search'); s.value = 'func_1';
      s.dispatchEvent(new Event('input'));
      const poll = () => document.documentElement.dataset.ptSearch === 's:func_1'
        ? requestAnimationFrame(() => setTimeout(() => r(performance.now() - t0))) : setTimeout(poll, 5);
      poll(); })""")
    filt = p.eval("""new Promise(r => { const k = document.getElementById('pt-fkey');
      k.value = Array.from(k.options).find(o => o.textContent.startsWith('task_kind')).value;
      k.dispatchEvent(new Event('change'));
      const t0 = performance.now();
      document.querySelector('#pt-fvalues input').click();
      requestAnimationFrame(() => setTimeout(() => r(performance.now() - t0))); })""")
    zoom = p.eval("""new Promise(r => { const bs = Array.from(document.querySelectorAll('#pt-graph .f'))
        .filter(b => b.getAttribute('aria-level') === '2');
      bs.sort((a, b) => b.getBoundingClientRect().width - a.getBoundingClientRect().width);
      const t0 = performance.now(); bs[0].click();
      requestAnimationFrame(() => setTimeout(() => r(performance.now() - t0))); })""")
    zoom_boxes = p.eval("document.querySelectorAll('#pt-graph .f').length")
    errs = p.errors
print(json.dumps({"ready_ms": round(ready), "search_ms": round(search), "filter_ms": round(filt),
                  "zoom_ms": round(zoom), "boxes": boxes, "boxes_zoomed": zoom_boxes, "js_heap_mb": round(heap / 2**20, 1),
                  "errors": errs}))
