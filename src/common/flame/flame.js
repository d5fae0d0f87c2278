/*
 * flame.js - the flame graph page (src/common/pt_flame.h): reads the data
 * (<script id="pt-data">, format in src/common/pt_flame_json.h) and draws
 * an icicle graph of DOM elements, with zoom, search, a label filter, the
 * sample type, and a differential mode against a base profile.
 *
 * Model on the page:
 *  - "sites" are the data's trie nodes (one per call path and line);
 *    "view nodes" merge sibling sites of the same frame, so a box is one
 *    function at one place in the call tree; s2v maps a site to its view
 *    node. View nodes are numbered parents first, so totals accumulate in
 *    one backward pass.
 *  - A label filter is, per label key, a set of values (the empty string
 *    id -1 = "no such label") and whether it keeps or excludes them; keys
 *    combine with AND. It decides per label set, then rows are summed.
 *  - Everything shown is recomputed from the rows by compute(); render()
 *    only lays out: a box is width = value * graph width / value(zoom),
 *    children left to right in name order (stable across filters), boxes
 *    under MIN_PX wide are not drawn.
 * No network, no storage, no external code: everything is in this file.
 */
(function () {
  'use strict';
  var $ = function (id) { return document.getElementById(id); };
  var MIN_PX = 1;        /* narrower boxes are not drawn (a DOM box costs layout time) */
  var MAX_BOXES = 40000; /* at most this many boxes per drawing */
  var NONE = -1;         /* label value id: the sample lacks the key */

  function fatal(msg) {
    var e = $('pt-error');
    e.textContent = msg;
    e.hidden = false;
    document.documentElement.setAttribute('data-pt-ready', 'error');
  }

  var D;
  try {
    D = JSON.parse($('pt-data').textContent);
  } catch (e) {
    fatal('The profile data in this page cannot be read: ' + e.message);
    return;
  }
  if (!D || D.v !== 1) { fatal('This page holds profile data of an unknown version.'); return; }

  var S = D.strings, FN = D.frames.name, FF = D.frames.file, FK = D.frames.kind;
  var NF = FN.length;

  /* ---- the tree ---- */

  var nDepth = D.nodes.depth, nFrame = D.nodes.frame, nLine = D.nodes.line, NS = nDepth.length;
  var sParent = new Int32Array(NS), s2v = new Int32Array(NS);
  /* view nodes: at most one per site; typed arrays, no per-node object */
  var vFrame = new Int32Array(NS), vParent = new Int32Array(NS), vDepth = new Int32Array(NS);
  var NV = 1;
  vFrame[0] = -1;
  vParent[0] = -1;
  (function () {
    /* (view parent, frame) -> view node: open addressing in typed arrays
       (a Map of a million entries costs seconds) */
    var cap = 1;
    while (cap < 2 * NS) cap *= 2;
    var mask = cap - 1, hk = new Int32Array(cap).fill(-1), hf = new Int32Array(cap), hv = new Int32Array(cap);
    var stack = new Int32Array(1024), depthCap = 1024;
    sParent[0] = -1;
    for (var i = 1; i < NS; i++) {
      var d = nDepth[i];
      if (d >= depthCap) { var ns = new Int32Array(depthCap *= 2); ns.set(stack); stack = ns; }
      stack[d] = i;
      var ps = stack[d - 1], pv = s2v[ps], f = nFrame[i];
      sParent[i] = ps;
      var h = (Math.imul(pv, 0x9E3779B1) ^ Math.imul(f + 1, 0x85EBCA77)) & mask, v = -1;
      while (hk[h] >= 0) {
        if (hk[h] === pv && hf[h] === f) { v = hv[h]; break; }
        h = (h + 1) & mask;
      }
      if (v < 0) {
        v = NV++;
        vFrame[v] = f; vParent[v] = pv; vDepth[v] = vDepth[pv] + 1;
        hk[h] = pv; hf[h] = f; hv[h] = v;
      }
      s2v[i] = v;
    }
  })();
  vFrame = vFrame.subarray(0, NV); vParent = vParent.subarray(0, NV); vDepth = vDepth.subarray(0, NV);

  /* frames in name order (then file, then kind), for a stable layout */
  var frameRank = new Int32Array(NF);
  (function () {
    var idx = [];
    for (var f = 0; f < NF; f++) idx.push(f);
    idx.sort(function (a, b) {
      var x = S[FN[a]], y = S[FN[b]];
      if (x !== y) return x < y ? -1 : 1;
      x = S[FF[a]]; y = S[FF[b]];
      if (x !== y) return x < y ? -1 : 1;
      return FK[a] - FK[b];
    });
    for (var i = 0; i < NF; i++) frameRank[idx[i]] = i;
  })();
  /* children of view node v: kidArr[kidOff[v] .. kidOff[v + 1]), in frame order */
  var kidOff = new Int32Array(NV + 1), kidArr = new Int32Array(Math.max(NV - 1, 1));
  (function () {
    for (var v = 1; v < NV; v++) kidOff[vParent[v] + 1]++;
    for (var u = 0; u < NV; u++) kidOff[u + 1] += kidOff[u];
    var fillAt = kidOff.slice(0, NV);
    for (var w = 1; w < NV; w++) kidArr[fillAt[vParent[w]]++] = w;
    var byRank = function (a, b) { return frameRank[vFrame[a]] - frameRank[vFrame[b]]; };
    for (var x = 0; x < NV; x++)
      if (kidOff[x + 1] - kidOff[x] > 1) kidArr.subarray(kidOff[x], kidOff[x + 1]).sort(byRank);
  })();
  function kids(v) { return Array.prototype.slice.call(kidArr.subarray(kidOff[v], kidOff[v + 1])); }

  function name(v) { return v === 0 ? 'all' : S[FN[vFrame[v]]]; }
  function isPseudo(n) { return n === '[truncated]' || n.lastIndexOf('[lost:', 0) === 0; }

  /* ---- rows and label sets ---- */

  function prepRows(r) {
    if (!r) return null;
    var n = r.node.length, view = new Int32Array(n);
    for (var i = 0; i < n; i++) view[i] = s2v[r.node[i]];
    return { n: n, site: r.node, view: view, ls: r.labelset, values: r.values };
  }
  var ROWS = [prepRows(D.rows), prepRows(D.base_rows)];
  var LS = D.labelsets, NLS = LS.length;
  var hasBase = !!D.base_rows;

  /* label keys -> their values (string ids), keys in a useful order */
  var keyVals = new Map();
  LS.forEach(function (p) {
    for (var i = 0; i < p.length; i += 2) {
      var k = p[i];
      if (!keyVals.has(k)) keyVals.set(k, new Set());
      keyVals.get(k).add(p[i + 1]);
    }
  });
  var PREFERRED = ['thread_name', 'task_kind', 'session', 'task', 'task_loc', 'thread_id'];
  var keys = Array.from(keyVals.keys()).sort(function (a, b) {
    var x = PREFERRED.indexOf(S[a]), y = PREFERRED.indexOf(S[b]);
    if (x < 0) x = 99;
    if (y < 0) y = 99;
    if (x !== y) return x - y;
    return S[a] < S[b] ? -1 : S[a] > S[b] ? 1 : 0;
  });

  /* ---- state ---- */

  var st = {
    type: D.default_type,
    zoom: 0, hist: [],
    sel: -1,
    q: '', regex: false, re: null, match: null,
    filters: new Map(), /* key string id -> {vals: Set of value ids or NONE, exclude: bool} */
    fkey: -1,
    dwidth: 'cur', dnorm: !!D.diff_normalize
  };

  /* ---- values ---- */

  var C = { pass: null, cur: null, curSelf: null, base: null, baseSelf: null, scale: 1,
            tot: 0, baseTot: 0, w: null, delta: null, hasDiff: false };

  /* 1 for each label set the filters keep; skipKey's filter is left out */
  function lsPass(skipKey) {
    var pass = new Uint8Array(NLS);
    var fs = [];
    st.filters.forEach(function (f, k) { if (k !== skipKey) fs.push([k, f]); });
    for (var i = 0; i < NLS; i++) {
      var p = LS[i], ok = true;
      for (var j = 0; j < fs.length && ok; j++) {
        var k = fs[j][0], f = fs[j][1], has = false, present = false;
        for (var q = 0; q < p.length; q += 2)
          if (p[q] === k) { present = true; if (f.vals.has(p[q + 1])) has = true; }
        if (!present && f.vals.has(NONE)) has = true;
        ok = has !== f.exclude;
      }
      pass[i] = ok ? 1 : 0;
    }
    return pass;
  }

  function sums(rows, vals, pass) {
    var self = new Float64Array(NV);
    for (var i = 0; i < rows.n; i++) if (pass[rows.ls[i]]) self[rows.view[i]] += vals[i];
    var tot = Float64Array.from(self);
    for (var v = NV - 1; v > 0; v--) tot[vParent[v]] += tot[v];
    return [self, tot];
  }

  function baseTypeOk() { return hasBase && D.base_type[st.type] >= 0; }

  function compute() {
    var pass = lsPass(null);
    C.pass = pass;
    var a = sums(ROWS[0], ROWS[0].values[st.type], pass);
    C.curSelf = a[0]; C.cur = a[1]; C.tot = C.cur[0];
    C.hasDiff = baseTypeOk();
    if (C.hasDiff) {
      var b = sums(ROWS[1], ROWS[1].values[st.type], pass);
      C.baseSelf = b[0]; C.base = b[1]; C.baseTot = C.base[0];
      C.scale = st.dnorm && C.baseTot > 0 ? C.tot / C.baseTot : 1;
      var w = new Float64Array(NV), dl = new Float64Array(NV);
      for (var v = 0; v < NV; v++) {
        var bv = C.base[v] * C.scale;
        dl[v] = C.cur[v] - bv;
        w[v] = st.dwidth === 'base' ? bv : st.dwidth === 'both' ? C.cur[v] + bv : C.cur[v];
      }
      C.w = w; C.delta = dl;
    } else {
      C.base = C.baseSelf = C.delta = null;
      C.scale = 1; C.baseTot = 0;
      C.w = C.cur;
    }
  }

  /* ---- formatting ---- */

  function unitOf(t) { return D.profile.sample_types[t][1]; }
  function typeName(t) { return D.profile.sample_types[t][0]; }
  var numFormats = [];
  function num(x, d) { /* Intl.NumberFormat made once per precision: toLocaleString is slow */
    var f = numFormats[d];
    if (!f) f = numFormats[d] = new Intl.NumberFormat('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });
    return f.format(x);
  }
  function fmtDur(ns) {
    var a = Math.abs(ns);
    if (a >= 6e10) {
      var s = Math.round(ns / 1e9), m = Math.trunc(s / 60);
      return (m >= 60 ? Math.trunc(m / 60) + ' h ' + (m % 60) + ' min' : m + ' min ') + (m >= 60 ? '' : Math.abs(s % 60) + ' s');
    }
    if (a >= 1e9) return num(ns / 1e9, 2) + ' s';
    if (a >= 1e6) return num(ns / 1e6, 2) + ' ms';
    if (a >= 1e3) return num(ns / 1e3, 2) + ' \u00b5s';
    return num(ns, 0) + ' ns';
  }
  function fmtBytes(b) {
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0, x = b;
    while (Math.abs(x) >= 1024 && i < u.length - 1) { x /= 1024; i++; }
    return num(x, i ? 2 : 0) + ' ' + u[i];
  }
  function fmtVal(x, t) {
    var u = unitOf(t === undefined ? st.type : t);
    if (u === 'nanoseconds') return fmtDur(x);
    if (u === 'microseconds') return fmtDur(x * 1e3);
    if (u === 'milliseconds') return fmtDur(x * 1e6);
    if (u === 'seconds') return fmtDur(x * 1e9);
    if (u === 'bytes') return fmtBytes(x);
    var s = num(x, Number.isInteger(x) ? 0 : 2);
    return u && u !== 'count' ? s + ' ' + u : s;
  }
  function signed(x) { return (x > 0 ? '+' : x < 0 ? '\u2212' : '\u00b1') + fmtVal(Math.abs(x)); }
  function pct(x, of) { return of ? num(100 * x / of, 2) + '%' : '\u2013'; }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  /* ---- colors ---- */

  function hash(s) {
    var h = 2166136261;
    for (var i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
    return h >>> 0;
  }
  var colorCache = new Map();
  function warm(v) {
    var f = vFrame[v];
    if (f < 0) return '#d0d0d0';
    var c = colorCache.get(f);
    if (c) return c;
    var n = S[FN[f]];
    if (FK[f] === 2) c = '#c8c8c8';
    else if (isPseudo(n)) c = '#e3e3e3';
    else {
      var h = hash(n);
      /* Brendan Gregg's "hot" palette: red to yellow */
      var r = 205 + (h % 50), g = 60 + ((h >>> 8) % 150), b = 40 + ((h >>> 16) % 45);
      if (FK[f] === 1) { g = Math.min(255, g + 40); b = Math.min(255, b + 90); } /* inlined: paler */
      c = 'rgb(' + r + ',' + g + ',' + b + ')';
    }
    colorCache.set(f, c);
    return c;
  }
  function diffColor(d, max) {
    if (!max || !d) return '#f4f4f4';
    var t = Math.min(1, Math.abs(d) / max), k = Math.round(255 - 195 * t);
    return d > 0 ? 'rgb(255,' + k + ',' + k + ')' : 'rgb(' + Math.round(255 - 195 * t) + ',' + Math.round(255 - 145 * t) + ',255)';
  }

  /* ---- search ---- */

  function setSearch() {
    var q = $('pt-search').value, rx = $('pt-regex').checked, m = $('pt-match');
    st.q = q; st.regex = rx; st.match = null;
    m.classList.remove('pt-bad');
    if (!q) return;
    var test;
    if (rx) {
      var re;
      try { re = new RegExp(q); } catch (e) {
        m.textContent = 'invalid regular expression: ' + e.message;
        m.classList.add('pt-bad');
        return;
      }
      test = function (s) { return re.test(s); };
    } else {
      var lq = q.toLowerCase();
      test = function (s) { return s.toLowerCase().indexOf(lq) >= 0; };
    }
    var match = new Uint8Array(NF);
    for (var f = 0; f < NF; f++) match[f] = test(S[FN[f]]) ? 1 : 0;
    st.match = match;
  }

  /* the value of the samples with a match on their stack, each once */
  function matchedValue(vals) {
    var total = 0, stack = [0];
    while (stack.length) {
      var v = stack.pop();
      if (v && st.match[vFrame[v]]) { total += vals[v]; continue; }
      for (var i = kidOff[v]; i < kidOff[v + 1]; i++) stack.push(kidArr[i]);
    }
    return total;
  }

  function showMatch() {
    var m = $('pt-match');
    if (!st.match) { if (!m.classList.contains('pt-bad')) { m.textContent = ''; } delete m.dataset.value; return; }
    var x = matchedValue(C.cur);
    var s = 'matched ' + fmtVal(x) + ' (' + pct(x, C.tot) + ' of the total';
    if (st.zoom) {
      var zx = 0, stack = [st.zoom];
      if (st.match[vFrame[st.zoom]]) zx = C.cur[st.zoom];
      else while (stack.length) {
        var v = stack.pop();
        if (v !== st.zoom && st.match[vFrame[v]]) { zx += C.cur[v]; continue; }
        for (var i = kidOff[v]; i < kidOff[v + 1]; i++) stack.push(kidArr[i]);
      }
      s += ', ' + pct(zx, C.cur[st.zoom]) + ' of the zoomed frame';
    }
    m.textContent = s + ')';
    m.dataset.value = String(x);
  }

  /* ---- drawing ---- */

  var graph = $('pt-graph'), boxOf = new Map();

  var charW = 0;
  function fitText(n, width) {
    if (!charW) { /* the monospace font's advance, measured once */
      var probe = el('div', 'MMMMMMMMMMMMMMMMMMMM', 'f');
      probe.style.cssText = 'visibility:hidden;width:auto;text-indent:0';
      graph.appendChild(probe);
      charW = probe.getBoundingClientRect().width / 20 || 7.2;
      graph.removeChild(probe);
    }
    var fit = Math.floor((width - 4) / charW);
    if (fit < 2) return '';
    return n.length <= fit ? n : n.slice(0, fit - 1) + '\u2026';
  }

  function ariaText(v) {
    var s = name(v);
    var f = vFrame[v];
    if (f >= 0 && FK[f] === 1) s += ' (inlined)';
    s += ': ' + fmtVal(C.cur[v]) + ', ' + pct(C.cur[v], C.tot) + ' of the total, self ' + fmtVal(C.curSelf[v]);
    if (C.hasDiff) s += '; base ' + fmtVal(C.base[v] * C.scale) + ', change ' + signed(C.delta[v]);
    return s;
  }

  function render() {
    var W = graph.clientWidth;
    var z = st.zoom, wz = C.w[z];
    var frag = document.createDocumentFragment();
    boxOf = new Map();
    var maxDepth = 0, drawn = 0, hidden = 0;
    /* the largest change among the frames drawn, for the diff colors */
    var maxDelta = 0;
    function box(v, x, width, anc) {
      /* the text that fits, cut here: the browser's own ellipsis would lay
         out every whole name (slow with thousands of boxes); the full
         name is in the aria-label and data-name */
      var b = el('div', fitText(name(v), width), 'f');
      b.dataset.name = name(v);
      var f = vFrame[v];
      if (anc) b.classList.add('anc');
      if (f >= 0 && FK[f] === 1) b.classList.add('inl');
      b.style.left = x + 'px';
      b.style.width = width + 'px';
      b.style.top = vDepth[v] * 18 + 'px';
      b.setAttribute('role', 'treeitem');
      b.setAttribute('aria-level', String(vDepth[v] + 1));
      b.setAttribute('aria-label', ariaText(v));
      b.dataset.v = String(v);
      b.dataset.value = String(C.w[v]);
      b.tabIndex = -1;
      if (st.match && f >= 0 && st.match[f]) b.classList.add('m');
      if (C.hasDiff) {
        b.dataset.delta = String(C.delta[v]);
        if (C.cur[v] > 0 && !(C.base[v] > 0) && v) b.classList.add('new');
        if (!(C.cur[v] > 0) && C.base[v] > 0) b.classList.add('gone');
      }
      if (vDepth[v] > maxDepth) maxDepth = vDepth[v];
      frag.appendChild(b);
      boxOf.set(v, b);
      drawn++;
      return b;
    }
    var anc = [];
    for (var a = z; a > 0;) { a = vParent[a]; anc.push(a); }
    var todo = [];
    if (wz > 0) {
      for (var i = anc.length - 1; i >= 0; i--) todo.push([anc[i], 0, W, true]);
      var stack = [[z, 0]];
      while (stack.length) {
        var it = stack.pop(), v = it[0], x = it[1], width = C.w[v] * W / wz;
        if (width < MIN_PX) { hidden++; continue; }
        if (todo.length >= MAX_BOXES) { hidden++; continue; }
        todo.push([v, x, width, false]);
        var k = kids(v), cx = x, pos = [];
        for (var j = 0; j < k.length; j++) { pos.push(cx); cx += C.w[k[j]] * W / wz; }
        for (var j2 = k.length - 1; j2 >= 0; j2--) stack.push([k[j2], pos[j2]]);
        if (C.hasDiff && v !== z && Math.abs(C.delta[v]) > maxDelta) maxDelta = Math.abs(C.delta[v]);
      }
    }
    for (var t = 0; t < todo.length; t++) {
      var d = todo[t], b = box(d[0], d[1], d[2], d[3]);
      b.style.backgroundColor = C.hasDiff ? diffColor(C.delta[d[0]], maxDelta) : warm(d[0]);
    }
    graph.textContent = '';
    graph.appendChild(frag);
    graph.style.height = (drawn ? (maxDepth + 1) * 18 : 18) + 'px';
    graph.dataset.total = String(wz);
    graph.dataset.width = String(W);
    if (!drawn || !(wz > 0)) {
      var e = el('p', z && C.w[0] > 0 ? 'The zoomed frame has no samples under this filter: Back or Reset zoom.'
        : st.filters.size ? 'No samples match the label filter.' : 'This profile has no samples.', 'pt-hint');
      graph.appendChild(e);
    }
    status(drawn, hidden);
    legend(maxDelta);
    showMatch();
  }

  function status(drawn, hidden) {
    var s = $('pt-status');
    s.textContent = '';
    var z = st.zoom;
    if (z) {
      s.appendChild(document.createTextNode('Zoomed into '));
      s.appendChild(el('b', name(z)));
      s.appendChild(document.createTextNode(': ' + fmtVal(C.cur[z]) + ', ' + pct(C.cur[z], C.tot) + ' of the total. '));
    }
    s.appendChild(document.createTextNode(drawn + ' frames drawn' +
      (hidden ? ', ' + hidden + ' too narrow to draw (zoom in to see them)' : '') + '.'));
    $('pt-back').disabled = !st.hist.length;
    $('pt-reset').disabled = !z;
  }

  function legend(maxDelta) {
    var l = $('pt-legend');
    l.textContent = '';
    if (!hasBase) return;
    if (!C.hasDiff) {
      l.textContent = 'The base has no ' + typeName(st.type) + ' values: no differential for this sample type.';
      return;
    }
    l.appendChild(document.createTextNode('shrank \u2212' + fmtVal(maxDelta) + ' '));
    l.appendChild(el('span', null, 'pt-grad'));
    l.appendChild(document.createTextNode(' +' + fmtVal(maxDelta) + ' grew; '));
    var n = el('span', null, 'pt-sw'); n.style.boxShadow = 'inset 3px 0 0 #7f1d1d'; n.style.background = 'rgb(255,60,60)';
    l.appendChild(n);
    l.appendChild(document.createTextNode(' new  '));
    var g = el('span', null, 'pt-sw');
    g.style.backgroundImage = 'repeating-linear-gradient(135deg, transparent 0 4px, rgba(0,0,0,.18) 4px 6px)';
    g.style.backgroundColor = 'rgb(60,110,255)';
    l.appendChild(g);
    l.appendChild(document.createTextNode(' gone (only in the base; widths: base or both show it). Current ' +
      fmtVal(C.tot) + ', base ' + fmtVal(C.baseTot * C.scale) + (C.scale !== 1 ? ' (scaled \u00d7' + num(C.scale, 3) + ')' : '') + '.'));
  }

  /* ---- header ---- */

  function metaText(p, tot, t) {
    var parts = [];
    if (p.time_nanos) {
      var d = new Date(p.time_nanos / 1e6);
      parts.push('started ' + d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC'));
    }
    if (p.duration_nanos) parts.push('duration ' + fmtDur(p.duration_nanos));
    parts.push('total ' + fmtVal(tot, t) + ' of ' + typeName(t));
    /* totals are per sample type of the current profile, the base's too */
    var si = D.profile.sample_types.findIndex(function (x) { return x[0] === 'samples' && x[1] === 'count'; });
    var isBase = p !== D.profile, tots = isBase ? D.base_totals : D.totals;
    if (si >= 0 && si !== t && !(isBase && D.base_type[si] < 0)) parts.push(num(tots[si], 0) + ' samples');
    else if (si < 0) parts.push(num(p.n_samples, 0) + ' sample records');
    if (p.period && p.period_type[1] === 'nanoseconds') parts.push('sampled at ' + num(1e9 / p.period, 0) + ' Hz');
    if (p.drop_frames) parts.push('drop_frames ' + p.drop_frames + ' (not applied)');
    if (p.keep_frames) parts.push('keep_frames ' + p.keep_frames + ' (not applied)');
    return parts.join(' \u00b7 ');
  }

  function header() {
    $('pt-title').textContent = D.title;
    var t = st.type;
    var s = metaText(D.profile, D.totals[t], t);
    if (st.filters.size) s += ' \u00b7 after the label filter: ' + fmtVal(C.tot) + ' (' + pct(C.tot, D.totals[t]) + ')';
    $('pt-meta').textContent = s;
    document.documentElement.dataset.ptTotal = String(C.tot);
    if (hasBase) {
      var bm = $('pt-basemeta');
      bm.hidden = false;
      bm.textContent = 'Base: ' + D.base_title + ' \u00b7 ' + (C.hasDiff ? metaText(D.base, D.base_totals[t], t) : 'no ' + typeName(t) + ' values');
    }
  }

  function comments() {
    var c = D.profile.comments;
    if (!c.length) return;
    var d = $('pt-comments');
    d.hidden = false;
    d.querySelector('summary').textContent = 'Comments (' + c.length + ')';
    var ul = d.querySelector('ul');
    c.forEach(function (x) { ul.appendChild(el('li', x)); });
  }

  /* ---- tooltip and details ---- */

  var tip = $('pt-tip');
  function tipText(v) {
    var f = vFrame[v], frag = document.createDocumentFragment();
    frag.appendChild(el('b', name(v)));
    if (f >= 0 && FK[f] === 1) frag.appendChild(document.createTextNode(' (inlined)'));
    if (f >= 0 && S[FF[f]]) frag.appendChild(el('div', S[FF[f]], 'pt-file'));
    var lines = [
      'total ' + fmtVal(C.cur[v]) + ' (' + pct(C.cur[v], C.tot) + ')',
      'self ' + fmtVal(C.curSelf[v]) + ' (' + pct(C.curSelf[v], C.tot) + ')'
    ];
    if (C.hasDiff) lines.push('base ' + fmtVal(C.base[v] * C.scale) + ', change ' + signed(C.delta[v]));
    lines.forEach(function (x) { frag.appendChild(el('div', x)); });
    return frag;
  }
  graph.addEventListener('mousemove', function (e) {
    var b = e.target.closest && e.target.closest('.f');
    if (!b) { tip.hidden = true; return; }
    var v = +b.dataset.v;
    if (tip.dataset.v !== b.dataset.v) {
      tip.textContent = '';
      tip.appendChild(tipText(v));
      tip.dataset.v = b.dataset.v;
    }
    tip.hidden = false;
    var x = e.clientX + 14, y = e.clientY + 16, r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 4) x = Math.max(4, e.clientX - r.width - 8);
    if (y + r.height > window.innerHeight - 4) y = Math.max(4, e.clientY - r.height - 10);
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  });
  graph.addEventListener('mouseleave', function () { tip.hidden = true; delete tip.dataset.v; });

  /* the lines of view node v: its sites' totals under the filter, by line */
  function linesOf(v) {
    var rows = ROWS[0], vals = rows.values[st.type], site = new Float64Array(NS);
    for (var i = 0; i < rows.n; i++) if (C.pass[rows.ls[i]]) site[rows.site[i]] += vals[i];
    for (var s = NS - 1; s > 0; s--) site[sParent[s]] += site[s];
    var by = new Map();
    for (var s2 = 1; s2 < NS; s2++)
      if (s2v[s2] === v && site[s2]) by.set(nLine[s2], (by.get(nLine[s2]) || 0) + site[s2]);
    return Array.from(by.entries()).sort(function (a, b) { return b[1] - a[1]; });
  }

  function details() {
    var p = $('pt-details'), v = st.sel;
    if (v < 0 || v >= NV) return;
    p.textContent = '';
    var f = vFrame[v];
    var h = el('h2', name(v));
    p.appendChild(h);
    var kind = f < 0 ? 'all samples' : FK[f] === 1 ? 'inlined function' : FK[f] === 2 ? 'code without symbols (its object file)' : isPseudo(S[FN[f]]) ? 'pseudo-frame of the profiler (CPU whose stack is not known)' : 'function';
    var tb = el('table');
    function row(k, val) {
      var tr = el('tr');
      tr.appendChild(el('th', k));
      tr.appendChild(el('td', val));
      tb.appendChild(tr);
    }
    row('kind', kind);
    if (f >= 0 && S[FF[f]]) row(FK[f] === 2 ? 'object' : 'file', S[FF[f]]);
    row('total', fmtVal(C.cur[v]) + ' \u00b7 ' + pct(C.cur[v], C.tot) + ' of the total' +
      (st.zoom && st.zoom !== v ? ' \u00b7 ' + pct(C.cur[v], C.cur[st.zoom]) + ' of the zoomed frame' : ''));
    row('self', fmtVal(C.curSelf[v]) + ' \u00b7 ' + pct(C.curSelf[v], C.tot) + ' of the total');
    if (C.hasDiff) {
      row('base', fmtVal(C.base[v] * C.scale) + (C.scale !== 1 ? ' (scaled)' : '') + ', self ' + fmtVal(C.baseSelf[v] * C.scale));
      row('change', signed(C.delta[v]) + ' \u00b7 ' + pct(C.delta[v], C.tot) + ' of the current total' +
        (C.cur[v] > 0 && !(C.base[v] > 0) ? ' (new)' : !(C.cur[v] > 0) && C.base[v] > 0 ? ' (gone)' : ''));
    }
    var path = [];
    for (var a = vParent[v]; a > 0; a = vParent[a]) path.push(name(a));
    if (path.length) row('called from', path.slice(0, 12).join(' \u2190 ') + (path.length > 12 ? ' \u2190 \u2026' : ''));
    p.appendChild(tb);
    if (f >= 0 && FK[f] !== 2) {
      var ls = linesOf(v);
      if (ls.length) {
        var file = S[FF[f]].split('/').pop() || '?';
        p.appendChild(el('p', 'Where in ' + name(v) + ' (the line running, or the call below it):', 'pt-hint'));
        var lt = el('table');
        ls.slice(0, 12).forEach(function (e) {
          var tr = el('tr');
          tr.appendChild(el('td', file + ':' + (e[0] || '?')));
          tr.appendChild(el('td', fmtVal(e[1]), 'n'));
          tr.appendChild(el('td', pct(e[1], C.cur[v]), 'n'));
          lt.appendChild(tr);
        });
        p.appendChild(lt);
      }
    }
  }

  /* ---- zoom and keyboard ---- */

  function zoomTo(v, push) {
    if (v === st.zoom) return;
    if (push !== false) st.hist.push(st.zoom);
    st.zoom = v;
    st.sel = v;
    render();
    details();
  }
  function back() {
    if (!st.hist.length) return;
    st.zoom = st.hist.pop();
    st.sel = st.zoom;
    render();
    details();
  }
  graph.addEventListener('click', function (e) {
    var b = e.target.closest && e.target.closest('.f');
    if (!b) return;
    var v = +b.dataset.v;
    zoomTo(v);
    var nb = boxOf.get(v);
    if (nb) nb.focus({ preventScroll: true });
  });
  $('pt-back').addEventListener('click', back);
  $('pt-reset').addEventListener('click', function () { st.hist = []; st.zoom = -1; zoomTo(0, false); });
  graph.addEventListener('focusin', function (e) {
    var b = e.target.closest && e.target.closest('.f');
    if (b && +b.dataset.v !== st.sel) { st.sel = +b.dataset.v; details(); }
  });
  graph.addEventListener('focus', function () {
    var b = boxOf.get(st.sel >= 0 && boxOf.has(st.sel) ? st.sel : st.zoom);
    if (b) b.focus();
  });
  graph.addEventListener('keydown', function (e) {
    var cur = document.activeElement && document.activeElement.closest ? document.activeElement.closest('.f') : null;
    var v = cur ? +cur.dataset.v : st.zoom, to = -1;
    if (e.key === 'Escape' || e.key === 'Backspace') { back(); e.preventDefault(); return; }
    if (e.key === 'Enter' || e.key === ' ') { zoomTo(v); var nb = boxOf.get(v); if (nb) nb.focus(); e.preventDefault(); return; }
    if (e.key === 'ArrowUp') to = v ? vParent[v] : -1;
    else if (e.key === 'ArrowDown') {
      var best = -1;
      kids(v).forEach(function (c) { if (boxOf.has(c) && (best < 0 || C.w[c] > C.w[best])) best = c; });
      to = best;
    } else if (e.key === 'ArrowLeft' || e.key === 'ArrowRight') {
      if (v) {
        var sib = kids(vParent[v]).filter(function (c) { return boxOf.has(c); }), i = sib.indexOf(v);
        to = sib[i + (e.key === 'ArrowLeft' ? -1 : 1)];
        if (to === undefined) to = -1;
      }
    } else return;
    e.preventDefault();
    if (to >= 0 && boxOf.has(to)) boxOf.get(to).focus();
  });
  document.addEventListener('keydown', function (e) {
    if (e.key === 'Escape' && e.target === document.body) back();
  });

  /* ---- the label filter ---- */

  function valueName(id) { return id === NONE ? '(no such label)' : S[id]; }

  function fillKeys() {
    var sel = $('pt-fkey');
    sel.textContent = '';
    var o = el('option', keys.length ? '(choose a label)' : '(the profile has no labels)');
    o.value = '-1';
    sel.appendChild(o);
    keys.forEach(function (k) {
      var f = st.filters.get(k);
      var o2 = el('option', S[k] + ' (' + keyVals.get(k).size + ' value' + (keyVals.get(k).size === 1 ? '' : 's') + ')' +
        (f ? (f.exclude ? ' \u2260 ' : ' = ') + f.vals.size + ' chosen' : ''));
      o2.value = String(k);
      sel.appendChild(o2);
    });
    sel.value = String(st.fkey);
    sel.disabled = !keys.length;
  }

  /* the values of key k with their weights under the other filters */
  function valueWeights(k) {
    var pass = lsPass(k), rows = ROWS[0], vals = rows.values[st.type];
    var lsw = new Float64Array(NLS);
    for (var i = 0; i < rows.n; i++) if (pass[rows.ls[i]]) lsw[rows.ls[i]] += vals[i];
    var w = new Map();
    keyVals.get(k).forEach(function (x) { w.set(x, 0); });
    w.set(NONE, 0);
    var all = 0;
    for (var j = 0; j < NLS; j++) {
      if (!lsw[j]) continue;
      all += lsw[j];
      var p = LS[j], present = false, seen = new Set();
      for (var q = 0; q < p.length; q += 2)
        if (p[q] === k && !seen.has(p[q + 1])) { present = true; seen.add(p[q + 1]); w.set(p[q + 1], w.get(p[q + 1]) + lsw[j]); }
      if (!present) w.set(NONE, w.get(NONE) + lsw[j]);
    }
    return { w: w, all: all };
  }

  function fillValues() {
    var box = $('pt-fvalues'), k = st.fkey;
    box.textContent = '';
    $('pt-fexclude').disabled = k < 0;
    if (k < 0) { box.hidden = true; $('pt-fexclude').checked = false; return; }
    box.hidden = false;
    var f = st.filters.get(k);
    $('pt-fexclude').checked = !!(f && f.exclude);
    var vw = valueWeights(k);
    var ids = Array.from(vw.w.keys()).filter(function (x) { return x !== NONE || vw.w.get(NONE) > 0; });
    ids.sort(function (a, b) { return vw.w.get(b) - vw.w.get(a) || (valueName(a) < valueName(b) ? -1 : 1); });
    ids.forEach(function (id) {
      var lab = el('label');
      var cb = el('input');
      cb.type = 'checkbox';
      cb.value = String(id);
      cb.checked = !!(f && f.vals.has(id));
      cb.addEventListener('change', function () { toggleValue(k, id, cb.checked); });
      lab.appendChild(cb);
      var sv = el('span', valueName(id), 'pt-v');
      sv.title = valueName(id);
      lab.appendChild(sv);
      lab.appendChild(el('span', fmtVal(vw.w.get(id)) + ' \u00b7 ' + pct(vw.w.get(id), vw.all), 'pt-w'));
      box.appendChild(lab);
    });
  }

  function fillActive() {
    var a = $('pt-factive');
    a.textContent = '';
    st.filters.forEach(function (f, k) {
      var c = el('span', null, 'pt-chip');
      c.appendChild(document.createTextNode(S[k] + (f.exclude ? ' \u2260 ' : ' = ') +
        Array.from(f.vals).map(valueName).join(' | ')));
      var x = el('button', '\u00d7');
      x.type = 'button';
      x.setAttribute('aria-label', 'Remove the filter on ' + S[k]);
      x.addEventListener('click', function () { st.filters.delete(k); refilter(); });
      c.appendChild(x);
      a.appendChild(c);
    });
    $('pt-fclear').hidden = !st.filters.size;
  }

  function toggleValue(k, id, on) {
    var f = st.filters.get(k);
    if (!f) { f = { vals: new Set(), exclude: $('pt-fexclude').checked }; st.filters.set(k, f); }
    if (on) f.vals.add(id); else f.vals.delete(id);
    if (!f.vals.size) st.filters.delete(k);
    refilter();
  }

  function refilter() {
    compute();
    header();
    fillKeys();
    fillValues();
    fillActive();
    render();
    details();
  }

  $('pt-fkey').addEventListener('change', function () { st.fkey = +this.value; fillValues(); });
  $('pt-fexclude').addEventListener('change', function () {
    var f = st.filters.get(st.fkey);
    if (f) { f.exclude = this.checked; refilter(); }
  });
  $('pt-fclear').addEventListener('click', function () { st.filters.clear(); refilter(); });

  /* ---- the other controls ---- */

  (function () {
    var sel = $('pt-type');
    D.profile.sample_types.forEach(function (t, i) {
      var o = el('option', t[0] + ' (' + t[1] + ')');
      o.value = String(i);
      sel.appendChild(o);
    });
    sel.value = String(st.type);
    sel.disabled = D.profile.sample_types.length < 2;
    sel.addEventListener('change', function () { st.type = +this.value; refilter(); });
  })();
  var searchTimer = 0;
  function onSearch() {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(function () {
      setSearch();
      render();
      /* what the drawing shows now (tests wait for it) */
      document.documentElement.dataset.ptSearch = (st.regex ? 're:' : 's:') + st.q;
    }, NV > 200000 ? 200 : 0);
  }
  $('pt-search').addEventListener('input', onSearch);
  $('pt-regex').addEventListener('change', onSearch);
  if (hasBase) {
    $('pt-diff').hidden = false;
    $('pt-dnorm').checked = st.dnorm;
    $('pt-dwidth').addEventListener('change', function () { st.dwidth = this.value; refilter(); });
    $('pt-dnorm').addEventListener('change', function () { st.dnorm = this.checked; refilter(); });
  }
  var resizing = 0;
  window.addEventListener('resize', function () {
    if (resizing) return;
    resizing = requestAnimationFrame(function () { resizing = 0; render(); });
  });

  /* ---- start ---- */

  try {
    comments();
    compute();
    header();
    fillKeys();
    fillValues();
    render();
  } catch (e) {
    fatal('The flame graph could not be drawn: ' + e.message);
    return;
  }
  document.documentElement.setAttribute('data-pt-ready', '1');
})();
