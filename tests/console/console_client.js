// console_client.js - a real gRPC client (@grpc/grpc-js + @grpc/proto-loader
// with the project's own proto/console/*.proto) that checks a running task
// console. Used by tests/console/*_test.sh against tests/console/console_demo
// (and later by the lead against polytokend / polytoken).
//
//   node console_client.js demo  ADDR PROGRESS_FILE   scripted-workload checks
//   node console_client.js split ADDR NTASKS          a state over 4 MiB
//   node console_client.js bad   ADDR PROGRESS_FILE   hostile clients
//   node console_client.js flood ADDR PROGRESS_FILE N connections held, then closed
//   node console_client.js names ADDR NAME...         the named tasks exist
//   node console_client.js generic ADDR [NAME...]     any console: invariants,
//                                                      names, details, errors, pause
//   node console_client.js refused ADDR               a console that does not serve
//                                                      this user: WatchUpdates fails
//                                                      with UNAVAILABLE, no Update
//   node console_client.js busy  ADDR NAME=POLLS...   once each named task has
//                                                      POLLS polls: prints JSON
//                                                      {NAME: {id, polls, busy_ns}}
//
// Exit 0 = every assertion held; 1 = a failure (printed).
'use strict';

const path = require('path');
const fs = require('fs');
const net = require('net');
const http2 = require('http2');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_DIR = path.join(__dirname, '..', '..', 'proto', 'console');
const SVC = '/rs.tokio.console.instrument.Instrument/';

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}
function check(cond, msg) {
  if (!cond) fail(msg);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function loadService() {
  const def = protoLoader.loadSync('instrument.proto', {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: false,
    oneofs: true,
    bytes: Buffer,
  });
  return grpc.loadPackageDefinition(def).rs.tokio.console.instrument.Instrument;
}

let connSeq = 0;
function newClient(Instrument, addr) {
  // A private subchannel pool: every client is its own HTTP/2 connection.
  return new Instrument(addr, grpc.credentials.createInsecure(), {
    'grpc.use_local_subchannel_pool': 1,
    'grpc.ptcon_test_conn': ++connSeq,
    'grpc.max_receive_message_length': 4 * 1024 * 1024,
  });
}

// protobufjs turns 64-bit map keys into 8-char "hash" strings (the key's
// little-endian bytes); decimal strings are passed through.
function mapKey(k) {
  if (/^[0-9]+$/.test(k)) return k;
  let v = 0n;
  for (let i = k.length - 1; i >= 0; i--) v = (v << 8n) | BigInt(k.charCodeAt(i) & 0xff);
  return v.toString();
}
function normStats(obj) {
  const out = {};
  for (const [k, v] of Object.entries(obj || {})) out[mapKey(k)] = v;
  return out;
}

const tsNs = (t) => (t ? BigInt(t.seconds || 0) * 1000000000n + BigInt(t.nanos || 0) : null);
const durNs = (d) => (d ? BigInt(d.seconds || 0) * 1000000000n + BigInt(d.nanos || 0) : 0n);

// Client-side model of the console state, like tokio-console builds it.
class Model {
  constructor() {
    this.metas = new Map();
    this.tasks = new Map();  // id -> {task, stats}
    this.updates = 0;
    this.dropped = 0;
    this.lastNow = null;
  }
  apply(u, label) {
    this.updates++;
    check(u.now, `${label}: Update without now`);
    const now = tsNs(u.now);
    if (this.lastNow !== null) check(now >= this.lastNow, `${label}: now went backwards`);
    this.lastNow = now;
    if (u.new_metadata) {
      for (const nm of u.new_metadata.metadata || []) {
        check(nm.id && nm.metadata, `${label}: NewMetadata without id or metadata`);
        this.metas.set(nm.id.id, nm.metadata);
      }
    }
    const tu = u.task_update;
    if (!tu) return;
    if (tu.dropped_events) this.dropped += Number(tu.dropped_events);
    const stats = normStats(tu.stats_update);
    for (const t of tu.new_tasks || []) {
      const id = t.id && t.id.id;
      check(id, `${label}: task without id`);
      check(t.metadata && this.metas.has(t.metadata.id),
        `${label}: task ${id} references unregistered metadata ${t.metadata && t.metadata.id}`);
      check(stats[id], `${label}: new task ${id} without its stats in the same Update`);
      this.tasks.set(id, { task: t, stats: null, seen: this.updates });
    }
    for (const [id, s] of Object.entries(stats)) {
      const e = this.tasks.get(id);
      check(e, `${label}: stats for unknown task ${id}`);
      check(s.created_at, `${label}: stats of ${id} without created_at`);
      check(s.poll_stats, `${label}: stats of ${id} without poll_stats`);
      const c = tsNs(s.created_at);
      for (const k of ['dropped_at', 'last_wake']) {
        if (s[k]) check(tsNs(s[k]) >= c, `${label}: ${k} before created_at for ${id}`);
      }
      const ps = s.poll_stats;
      for (const k of ['first_poll', 'last_poll_started', 'last_poll_ended']) {
        if (ps[k]) {
          check(tsNs(ps[k]) >= c, `${label}: ${k} before created_at for ${id}`);
          check(tsNs(ps[k]) <= now, `${label}: ${k} after now for ${id}`);
        }
      }
      for (const d of [ps.busy_time, s.scheduled_time]) {
        if (d) check(BigInt(d.seconds || 0) >= 0n && (d.nanos || 0) >= 0, `${label}: negative duration`);
      }
      e.stats = s;
    }
  }
  byName(name) {
    const out = [];
    for (const [id, e] of this.tasks) {
      const f = (e.task.fields || []).find((x) => x.str_name === 'task.name');
      if (f && f.str_val === name) out.push(Object.assign({ id }, e));
    }
    return out;
  }
}

function field(task, name) {
  return (task.fields || []).find((x) => x.str_name === name);
}

function watchUpdates(client, model, label) {
  const call = client.WatchUpdates({});
  const st = { call, error: null, ended: false, count: 0, waiters: [] };
  call.on('data', (u) => {
    st.count++;
    try {
      model.apply(u, label);
    } catch (e) {
      fail(`${label}: ${e.stack}`);
    }
    const w = st.waiters;
    st.waiters = [];
    w.forEach((f) => f());
  });
  call.on('error', (e) => { st.error = e; });
  call.on('end', () => { st.ended = true; });
  return st;
}

async function waitFor(pred, ms, what) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pred()) return;
    await sleep(50);
  }
  fail(`timed out waiting for ${what}`);
}

function watchState(client) {
  const call = client.WatchState({});
  const st = { call, states: [], error: null };
  call.on('data', (s) => st.states.push(s.temporality || 'LIVE'));
  call.on('error', (e) => { st.error = e; });
  return st;
}

function unary(client, method, req) {
  return new Promise((res, rej) => client[method](req, (err, r) => (err ? rej(err) : res(r))));
}

function firstDetails(client, id) {
  return new Promise((resolve) => {
    const call = client.WatchTaskDetails({ id: { id: String(id) } });
    let done = false;
    call.on('data', (d) => {
      if (done) return;
      done = true;
      call.cancel();
      resolve({ details: d });
    });
    call.on('error', (e) => { if (!done) { done = true; resolve({ error: e }); } });
    call.on('end', () => { if (!done) { done = true; resolve({ ended: true }); } });
  });
}

// HdrHistogram V2: 40-byte big-endian header, then ZigZag LEB128 counts
// (9th byte carries 8 bits), negative = run of that many empty buckets.
function decodeHist(buf) {
  check(Buffer.isBuffer(buf) && buf.length >= 41, 'histogram too short');
  check(buf.readUInt32BE(0) === 0x1c849313, 'bad V2 cookie');
  const len = buf.readUInt32BE(4);
  check(buf.length === 40 + len, `payload length ${len} != ${buf.length - 40}`);
  check(buf.readUInt32BE(8) === 0, 'normalizing offset');
  const sig = buf.readUInt32BE(12);
  check(sig >= 1 && sig <= 5, 'significant figures');
  const lowest = buf.readBigUInt64BE(16), highest = buf.readBigUInt64BE(24);
  check(lowest >= 1n && highest >= 2n * lowest, 'bounds');
  check(buf.readDoubleBE(32) === 1.0, 'conversion ratio');
  const counts = [];
  let p = 40;
  while (p < buf.length) {
    let v = 0n, shift = 0n, i = 0;
    for (;;) {
      check(p < buf.length, 'truncated LEB128');
      const b = BigInt(buf[p++]);
      if (i === 8) { v |= b << shift; break; }
      v |= (b & 0x7fn) << shift;
      if (!(b & 0x80n)) break;
      shift += 7n;
      i++;
    }
    const z = (v >> 1n) ^ -(v & 1n);
    if (z < 0n) for (let k = 0n; k < -z; k++) counts.push(0);
    else counts.push(Number(z));
  }
  const total = counts.reduce((a, b) => a + b, 0);
  return { counts, total, lowest, highest, sig };
}

function readProgress(file) {
  try {
    return parseInt(fs.readFileSync(file, 'utf8'), 10) || 0;
  } catch (e) {
    return 0;
  }
}

async function assertProgress(file, what) {
  const a = readProgress(file);
  await sleep(400);
  const b = readProgress(file);
  check(b > a, `the app loop did not advance during ${what} (${a} -> ${b})`);
}

// ---------------------------------------------------------------- demo ----
async function demo(addr, progress) {
  const I = loadService();
  const A = newClient(I, addr);
  const ma = new Model();
  const ua = watchUpdates(A, ma, 'A');
  const sa = watchState(A);
  await waitFor(() => ua.count >= 1, 10000, 'the first Update');
  check(ma.metas.size >= 1, 'first Update has no metadata');
  for (const name of ['demo.fixed', 'demo.selfwake', 'demo.remote', 'demo.short', 'demo.ticker', 'demo.late'])
    check(ma.byName(name).length === 1, `task ${name} missing from the initial state`);
  // Let the script finish and a few deltas arrive (one per second, with now).
  const before = ua.count;
  await waitFor(() => ua.count >= before + 3, 10000, 'three delta Updates');
  check(!ua.error, `WatchUpdates failed: ${ua.error}`);

  const fixed = ma.byName('demo.fixed')[0];
  const fs_ = fixed.stats, fps = fs_.poll_stats;
  check(Number(fps.polls) === 10, `demo.fixed polls ${fps.polls} != 10`);
  const busy = durNs(fps.busy_time);
  check(busy >= 19800000n && busy < 2000000000n, `demo.fixed busy ${busy} ns, want ~20 ms`);
  check(Number(fs_.wakes) === 10, `demo.fixed wakes ${fs_.wakes}`);
  check(!fs_.self_wakes, 'demo.fixed has self-wakes');
  check(Number(fs_.waker_clones || 0) - Number(fs_.waker_drops || 0) === 1, 'demo.fixed armed wakers');
  check(!fs_.dropped_at, 'demo.fixed must still be alive');
  check(fps.first_poll && fps.last_poll_started && fps.last_poll_ended, 'demo.fixed poll timestamps');
  check(tsNs(fps.last_poll_ended) >= tsNs(fps.last_poll_started), 'demo.fixed idle after its polls');
  const loc = fixed.task.location;
  // (relative to the source root when built in-tree; never with a leading ../)
  check(loc && /(^|\/)tests\/console\/console_demo\.c$/.test(loc.file) && !loc.file.startsWith('.') &&
    loc.line > 0, `demo.fixed location ${JSON.stringify(loc)}`);
  const meta = ma.metas.get(fixed.task.metadata.id);
  check(meta.name === 'runtime.spawn' && meta.location && meta.location.line === loc.line, 'callsite metadata');
  check(field(fixed.task, 'kind').debug_val === 'task', 'kind field');
  check(Number(field(fixed.task, 'task.id').u64_val) > 0, 'task.id field');
  check(field(fixed.task, 'peer').str_val === 'unix:/run/demo.sock', 'peer field');
  check(Number(field(fixed.task, 'attempt').u64_val) === 3, 'attempt field');

  const sw = ma.byName('demo.selfwake')[0].stats;
  check(Number(sw.poll_stats.polls) === 5 && Number(sw.self_wakes) === 5 && Number(sw.wakes) === 5,
    `demo.selfwake polls/self/wakes ${sw.poll_stats.polls}/${sw.self_wakes}/${sw.wakes}`);
  const rm = ma.byName('demo.remote')[0];
  check(Number(rm.stats.wakes) === 3 && !rm.stats.self_wakes && Number(rm.stats.poll_stats.polls) === 1,
    'demo.remote: 3 wakes from another thread, 1 poll');
  check(rm.task.kind === 'BLOCKING' && field(rm.task, 'kind').debug_val === 'blocking', 'demo.remote kind');
  check(durNs(rm.stats.scheduled_time) > 0n, 'demo.remote scheduled time');
  const sh = ma.byName('demo.short')[0];
  check(sh.stats.dropped_at, 'demo.short completed without dropped_at');
  check(Number(sh.stats.poll_stats.polls) === 3, 'demo.short polls');
  check(field(sh.task, 'kind').debug_val === 'local', 'demo.short kind');
  const tk1 = Number(ma.byName('demo.ticker')[0].stats.poll_stats.polls);
  await waitFor(() => Number(ma.byName('demo.ticker')[0].stats.poll_stats.polls) > tk1, 5000, 'ticker polls advancing');
  check(sa.states.length >= 2 && sa.states.every((s) => s === 'LIVE'), `WatchState ${sa.states}`);
  console.log('ok - names, locations, fields, polls, busy time, wakes, self-wakes, completion');

  // Task details: decodable histograms; errors as specified.
  const d = await firstDetails(A, fixed.id);
  check(d.details, `WatchTaskDetails(fixed): ${d.error}`);
  check(d.details.task_id.id === fixed.id && d.details.now, 'TaskDetails id/now');
  const ph = decodeHist(d.details.histogram.raw_histogram);
  check(ph.total === 10, `poll histogram holds ${ph.total} values, want 10`);
  check(Number(d.details.histogram.max_value) >= 2000000, 'poll histogram max_value');
  const shh = decodeHist(d.details.scheduled_times_histogram.raw_histogram);
  check(shh.total === 10, `scheduled histogram holds ${shh.total}, want 10`);
  const nf = await firstDetails(A, '987654321987');
  check(nf.error && nf.error.code === grpc.status.NOT_FOUND, `unknown id: ${nf.error && nf.error.code}`);
  const ia = await firstDetails(A, 0);
  check(ia.error && ia.error.code === grpc.status.INVALID_ARGUMENT, `id 0: ${ia.error && ia.error.code}`);
  const im = await new Promise((resolve) => {
    const c = A.WatchTaskDetails({});
    c.on('data', () => resolve({}));
    c.on('error', (e) => resolve({ error: e }));
  });
  check(im.error && im.error.code === grpc.status.INVALID_ARGUMENT, 'missing id: INVALID_ARGUMENT');
  console.log('ok - task details, histograms decode (10 polls), NOT_FOUND, INVALID_ARGUMENT');

  // A details stream ends with OK once its task is gone (demo.late ends
  // after ~3 s; retention 2 s).
  const late = ma.byName('demo.late')[0];
  check(late, 'demo.late missing');
  const lateEnd = await new Promise((resolve) => {
    const c = A.WatchTaskDetails({ id: { id: late.id } });
    let n = 0;
    c.on('data', () => { n++; });
    c.on('status', (st) => resolve({ code: st.code, n }));
    c.on('error', () => {});
    setTimeout(() => resolve({ code: 'timeout', n }), 15000);
  });
  check(lateEnd.code === grpc.status.OK, `details stream of an aged-out task ended with ${lateEnd.code}`);
  check(lateEnd.n >= 1, `details stream of demo.late carried ${lateEnd.n} messages`);
  check(ma.byName('demo.late')[0].stats.dropped_at, 'demo.late has no dropped_at');
  console.log('ok - a details stream ends with OK when its task ages out');

  // Retention (2 s in the demo): a fresh client no longer gets demo.short.
  await sleep(1500);
  const B = newClient(I, addr);
  const mb = new Model();
  const ub = watchUpdates(B, mb, 'B');
  const sb = watchState(B);
  await waitFor(() => ub.count >= 1, 10000, 'B first Update');
  check(mb.byName('demo.fixed').length === 1, 'B sees demo.fixed');
  check(mb.byName('demo.short').length === 0, 'demo.short still retained past the retention window');
  console.log('ok - completed task left after the retention window');

  // Pause on A: A's updates stop, its State says PAUSED; B is unaffected.
  await unary(A, 'Pause', {});
  await sleep(300);
  const aCount = ua.count, bCount = ub.count;
  const tkBefore = Number(ma.byName('demo.ticker')[0].stats.poll_stats.polls);
  await sleep(2600);
  check(ua.count === aCount, `A received ${ua.count - aCount} Updates while paused`);
  check(ub.count >= bCount + 2, 'B stopped receiving Updates while A was paused');
  check(sa.states[sa.states.length - 1] === 'PAUSED', `A state ${sa.states.slice(-1)}`);
  check(sb.states[sb.states.length - 1] === 'LIVE', 'B state must stay LIVE');
  await unary(A, 'Resume', {});
  await waitFor(() => ua.count > aCount, 5000, 'A Updates after Resume');
  check(Number(ma.byName('demo.ticker')[0].stats.poll_stats.polls) > tkBefore,
    'the first Update after Resume lacks the accumulated changes');
  await waitFor(() => sa.states[sa.states.length - 1] === 'LIVE', 5000, 'A LIVE after Resume');
  // A pause ends with its connection.
  const C = newClient(I, addr);
  await unary(C, 'Pause', {});
  C.close();
  await sleep(200);
  const D = newClient(I, addr);
  const sd = watchState(D);
  await waitFor(() => sd.states.length >= 1, 5000, 'D state');
  check(sd.states[0] === 'LIVE', 'a new connection starts LIVE');
  check(sb.states[sb.states.length - 1] === 'LIVE', 'B LIVE after C paused and left');
  console.log('ok - pause and resume per connection');
  check(!ua.error && !ub.error, 'update streams failed');
  check(ma.dropped === 0, `dropped events reported: ${ma.dropped}`);
  await assertProgress(progress, 'the client session');
  for (const c of [A, B, D]) c.close();
}

// --------------------------------------------------------------- split ----
async function split(addr, ntasks) {
  const I = loadService();
  const A = newClient(I, addr);
  const m = new Model();
  const u = watchUpdates(A, m, 'split');
  await waitFor(() => m.byName('demo.ticker').length === 1 && m.tasks.size >= ntasks + 5, 30000,
    `all ${ntasks + 5} tasks`);
  check(!u.error, `stream error: ${u.error}`);
  check(m.updates >= 2, 'a state over 4 MiB came in one message');
  for (const e of m.tasks.values()) check(e.stats, 'a task without stats');
  console.log(`ok - ${m.tasks.size} tasks arrived in ${m.updates} Updates, each under 4 MiB`);
  A.close();
}

// ----------------------------------------------------------------- bad ----
function rawExchange(port, bytes, ms) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let got = Buffer.alloc(0), closed = false;
    s.on('connect', () => s.write(bytes));
    s.on('data', (d) => { got = Buffer.concat([got, d]); });
    s.on('error', () => {});
    s.on('close', () => { closed = true; resolve({ closed, got }); });
    setTimeout(() => { if (!closed) { s.destroy(); resolve({ closed: false, got }); } }, ms);
  });
}

function h2Request(addr, method, body, opts) {
  return new Promise((resolve) => {
    const sess = http2.connect('http://' + addr, opts || {});
    sess.on('error', () => {});
    const req = sess.request({
      ':method': 'POST', ':path': SVC + method,
      'content-type': 'application/grpc', te: 'trailers',
    });
    let headers = null, trailers = null, data = Buffer.alloc(0);
    req.on('response', (h) => { headers = h; });
    req.on('trailers', (t) => { trailers = t; });
    req.on('data', (d) => { data = Buffer.concat([data, d]); });
    req.on('error', () => {});
    req.on('close', () => {
      sess.close();
      const st = (trailers && trailers['grpc-status']) || (headers && headers['grpc-status']);
      resolve({ status: st === undefined ? null : Number(st), data });
    });
    req.end(body);
  });
}

async function bad(addr, progress) {
  const port = Number(addr.split(':').pop());
  // Malformed HTTP/2: an HTTP/1 request, random bytes, a preface then junk.
  let r = await rawExchange(port, Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n'), 3000);
  check(r.closed, 'HTTP/1 request: connection not closed');
  r = await rawExchange(port, require('crypto').randomBytes(4096), 3000);
  check(r.closed, 'random bytes: connection not closed');
  const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
  r = await rawExchange(port, Buffer.concat([preface, Buffer.from([0, 0, 4, 0xff, 0, 0, 0, 0, 1]),
    require('crypto').randomBytes(512)]), 3000);
  check(r.closed, 'preface + junk frames: connection not closed');
  await assertProgress(progress, 'malformed HTTP/2');
  console.log('ok - malformed HTTP/2 closes the connection');

  // Garbage gRPC messages.
  let q = await h2Request(addr, 'WatchTaskDetails', Buffer.from([0, 0, 0, 0, 3, 0xff, 0xff, 0xff]));
  check(q.status === grpc.status.INVALID_ARGUMENT, `garbage protobuf: ${q.status}`);
  q = await h2Request(addr, 'WatchUpdates', Buffer.from([0, 0, 0, 9, 0]));
  check(q.status === grpc.status.INVALID_ARGUMENT, `bad length prefix: ${q.status}`);
  q = await h2Request(addr, 'WatchUpdates', Buffer.from([1, 0, 0, 0, 0]));
  check(q.status === grpc.status.UNIMPLEMENTED, `compressed flag: ${q.status}`);
  q = await h2Request(addr, 'NoSuchMethod', Buffer.from([0, 0, 0, 0, 0]));
  check(q.status === grpc.status.UNIMPLEMENTED, `unknown method: ${q.status}`);
  const big = Buffer.alloc(1 << 20);
  big.writeUInt32BE((1 << 20) - 5, 1);
  q = await h2Request(addr, 'WatchTaskDetails', big);
  check(q.status === grpc.status.RESOURCE_EXHAUSTED, `oversize request: ${q.status}`);
  q = await h2Request(addr, 'Pause', Buffer.from([0, 0, 0, 0, 0]));
  check(q.status === 0 && q.data.equals(Buffer.from([0, 0, 0, 0, 0])), 'Pause over raw HTTP/2');
  await assertProgress(progress, 'garbage gRPC');
  console.log('ok - garbage gRPC frames and an oversize request get gRPC errors');

  // Clients that never read. 'tcp': the socket is paused (TCP backpressure);
  // 'window': a zero HTTP/2 flow-control window. Both open 16 WatchUpdates
  // calls, each queueing the full state (~600 KiB): the per-connection cap
  // (4 MiB in this test) is hit and the server drops them. 'stall': one call
  // with a zero window stays under the cap, and is dropped when its queue
  // makes no progress for the stall timeout (1.5 s in this test).
  const closedBy = new Set();
  for (const mode of ['tcp', 'window', 'stall']) {
    await new Promise((resolve) => {
      let sock;
      const opts = mode !== 'tcp' ? { settings: { initialWindowSize: 0 } } : {
        createConnection: () => { sock = net.connect(port, '127.0.0.1'); return sock; },
      };
      const sess = http2.connect('http://' + addr, opts);
      sess.on('error', () => {});
      for (let i = 0; i < (mode === 'stall' ? 1 : 16); i++) {
        const req = sess.request({ ':method': 'POST', ':path': SVC + 'WatchUpdates',
          'content-type': 'application/grpc', te: 'trailers' });
        req.on('error', () => {});
        req.end(Buffer.from([0, 0, 0, 0, 0]));
        req.pause();
      }
      if (sock) setTimeout(() => sock.pause(), 50);
      const t = setTimeout(() => { sess.destroy(); resolve(); }, 8000);
      const done = () => { closedBy.add(mode); clearTimeout(t); resolve(); };
      sess.on('close', done);
      if (sock) sock.on('close', done);
    });
    await assertProgress(progress, `a client that never reads (${mode})`);
  }
  for (const mode of ['tcp', 'window', 'stall'])
    check(closedBy.has(mode), `a client that never reads (${mode}) was not dropped`);
  console.log('ok - clients that never read were dropped (queue cap: tcp, window; stall timeout)');

  // A thousand connections at once (the server accepts a bounded number).
  const socks = [];
  await new Promise((resolve) => {
    let n = 0;
    for (let i = 0; i < 1000; i++) {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => {});
      s.on('data', () => {});   // read, so the server's close is seen
      s.on('connect', () => { s.wasConnected = true; if (i % 2) s.write(preface); if (++n === 1000) resolve(); });
      s.on('close', () => { if (!s.counted) { s.counted = true; } });
      socks.push(s);
      setTimeout(resolve, 5000);
    }
  });
  await assertProgress(progress, 'a thousand connections');
  // The server keeps at most max_connections (128) and closes the others;
  // give it a few seconds to get through the accept queue.
  // (SYNs beyond the listen backlog are retried by the kernel for a while:
  // only connections that were established count.)
  const kept = () => socks.filter((s) => s.wasConnected && !(s.destroyed || s.counted)).length;
  const end = Date.now() + 15000;
  while (kept() > 128 && Date.now() < end) await sleep(100);
  const k = kept();
  check(k <= 128, `the server kept ${k} of 1000 connections (cap 128)`);
  const closedEarly = 1000 - k;
  socks.forEach((s) => s.destroy());
  await sleep(500);
  console.log(`ok - 1000 connections: ${1000 - closedEarly} kept, the rest closed`);

  // Still serving normally.
  const I = loadService();
  const A = newClient(I, addr);
  const m = new Model();
  const u = watchUpdates(A, m, 'after');
  await waitFor(() => u.count >= 2, 10000, 'Updates after the abuse');
  check(m.byName('demo.ticker').length === 1, 'ticker visible after the abuse');
  await assertProgress(progress, 'the final check');
  A.close();
  console.log('ok - server still up, app loop never blocked');
}

// ------------------------------------------------------------- generic ----
// For any console (console_demo, polytokend, polytoken): protocol invariants
// over a few Updates, the named tasks, task details with decodable
// histograms, NOT_FOUND, INVALID_ARGUMENT, pause and resume per connection.
async function generic(addr, wanted) {
  const I = loadService();
  const A = newClient(I, addr), B = newClient(I, addr);
  const ma = new Model(), mb = new Model();
  const ua = watchUpdates(A, ma, 'A'), ub = watchUpdates(B, mb, 'B');
  const sa = watchState(A), sb = watchState(B);
  await waitFor(() => ua.count >= 3 && ub.count >= 3, 15000, 'three Updates on two connections');
  check(!ua.error && !ub.error, `WatchUpdates failed: ${ua.error || ub.error}`);
  check(ma.metas.size >= 1 && ma.tasks.size >= 1, 'no metadata or no tasks');
  for (const n of wanted) check(ma.byName(n).length >= 1, `no task named ${n}`);
  for (const e of ma.tasks.values()) {
    const loc = e.task.location;
    check(loc && loc.file && loc.line > 0, `task ${e.task.id.id} without a location`);
  }
  // Details of a task that was polled (else any task).
  const polled = [...ma.tasks.entries()].find(([, e]) => Number(e.stats.poll_stats.polls || 0) > 0 && !e.stats.dropped_at);
  const [did] = polled || [...ma.tasks.entries()].find(([, e]) => !e.stats.dropped_at) || [];
  check(did, 'no live task for WatchTaskDetails');
  const d = await firstDetails(A, did);
  check(d.details, `WatchTaskDetails(${did}): ${d.error}`);
  decodeHist(d.details.histogram.raw_histogram);
  decodeHist(d.details.scheduled_times_histogram.raw_histogram);
  const nf = await firstDetails(A, '987654321987');
  check(nf.error && nf.error.code === grpc.status.NOT_FOUND, 'unknown id: NOT_FOUND');
  const ia = await firstDetails(A, 0);
  check(ia.error && ia.error.code === grpc.status.INVALID_ARGUMENT, 'id 0: INVALID_ARGUMENT');
  // Pause A only.
  await unary(A, 'Pause', {});
  await sleep(300);
  const ac = ua.count, bc = ub.count;
  await sleep(2600);
  check(ua.count === ac, 'A received Updates while paused');
  check(ub.count >= bc + 2, 'B was paused by A');
  check(sa.states[sa.states.length - 1] === 'PAUSED' && sb.states[sb.states.length - 1] === 'LIVE',
    'State per connection');
  await unary(A, 'Resume', {});
  await waitFor(() => ua.count > ac, 5000, 'A Updates after Resume');
  A.close();
  B.close();
  console.log(`ok - ${ma.tasks.size} tasks, invariants, ${wanted.length} names, details, errors, pause/resume`);
}

// --------------------------------------------------------------- flood ----
// N connections held for 2 s (the server may run out of descriptors), then
// closed: the app loop never stalls and the server serves again afterwards.
async function flood(addr, progress, n) {
  const port = Number(addr.split(':').pop());
  const socks = [];
  for (let i = 0; i < n; i++) {
    const s = net.connect(port, '127.0.0.1');
    s.on('error', () => {});
    s.on('data', () => {});
    socks.push(s);
  }
  await sleep(500);
  await assertProgress(progress, `${n} connections`);
  await sleep(1500);
  socks.forEach((s) => s.destroy());
  await sleep(500);
  const I = loadService();
  const A = newClient(I, addr);
  const m = new Model();
  const u = watchUpdates(A, m, 'after-flood');
  await waitFor(() => u.count >= 2, 10000, 'Updates after the flood');
  check(m.byName('demo.ticker').length === 1, 'ticker visible after the flood');
  await assertProgress(progress, 'after the flood');
  A.close();
  console.log(`ok - ${n} connections held and closed; server serves again`);
}

// ------------------------------------------------------------- refused ----
// A console that serves another user only: it closes our connections before
// sending a byte, so WatchUpdates fails with UNAVAILABLE and not one Update
// (not even the HTTP/2 SETTINGS) arrives.
async function refused(addr) {
  const I = loadService();
  const A = newClient(I, addr);
  const err = await new Promise((resolve) => {
    const call = A.WatchUpdates({});
    call.on('data', () => fail('an Update arrived from a console that should refuse us'));
    call.on('error', (e) => resolve(e));
    call.on('end', () => resolve(null));
  });
  A.close();
  check(err && err.code === grpc.status.UNAVAILABLE,
    `WatchUpdates ended with ${err ? err.code + ' ' + err.details : 'no error'}, not UNAVAILABLE`);
  console.log(`ok - refused: ${err.details}`);
}

// --------------------------------------------------------------- names ----
async function names(addr, wanted) {
  const I = loadService();
  const A = newClient(I, addr);
  const m = new Model();
  const u = watchUpdates(A, m, 'names');
  await waitFor(() => u.count >= 2, 10000, 'two Updates');
  for (const n of wanted) check(m.byName(n).length >= 1, `no task named ${n}`);
  A.close();
  console.log(`ok - ${wanted.length} named tasks present`);
}

// ---------------------------------------------------------------- busy ----
// The console's own numbers for the named tasks, read once each has its
// expected number of polls (tests/prof/labels_agree_test.sh compares them
// with the sampler's). id is the task.id field, the number the console shows.
async function busy(addr, wanted) {
  const I = loadService();
  const A = newClient(I, addr);
  const m = new Model();
  const u = watchUpdates(A, m, 'busy');
  const want = wanted.map((w) => { const i = w.lastIndexOf('='); return [w.slice(0, i), Number(w.slice(i + 1))]; });
  const polls = (n) => { const t = m.byName(n)[0]; return t && t.stats ? Number(t.stats.poll_stats.polls || 0) : -1; };
  await waitFor(() => u.count >= 1 && want.every(([n, p]) => polls(n) >= p), 20000,
    `the named tasks to reach their polls (${want.map(([n, p]) => `${n} ${polls(n)}/${p}`).join(', ')})`);
  const out = {};
  for (const [n, p] of want) {
    const ts = m.byName(n);
    check(ts.length === 1, `${ts.length} tasks named ${n}`);
    const idf = field(ts[0].task, 'task.id');
    check(idf && idf.u64_val !== undefined, `${n}: no task.id field`);
    check(polls(n) === p, `${n}: ${polls(n)} polls, want ${p}`);
    out[n] = { id: String(idf.u64_val), polls: polls(n), busy_ns: String(durNs(ts[0].stats.poll_stats.busy_time)) };
  }
  A.close();
  console.log(JSON.stringify(out));
}

const [, , mode, addr, arg, ...rest] = process.argv;
const run = { demo: () => demo(addr, arg), split: () => split(addr, Number(arg)),
  generic: () => generic(addr, arg ? [arg, ...rest] : []),
  bad: () => bad(addr, arg), flood: () => flood(addr, arg, Number(rest[0] || 200)), names: () => names(addr, [arg, ...rest]),
  busy: () => busy(addr, [arg, ...rest]), refused: () => refused(addr) }[mode];
if (!run) fail('usage: console_client.js demo|split|bad|flood|names|generic ADDR ...');
run().then(() => process.exit(0), (e) => fail(e.stack || String(e)));
