// sw.js is the extension's background: the service worker in Chromium, an
// event page in Firefox (manifest "background.scripts"). It runs the Go
// parser and verifier (crosstalk.wasm, transports/browser/wasm), answers the
// content scripts' messages, talks to the relay with the token from the
// options page, keeps the trust store and what was sent in storage.local,
// and sets the toolbar badge. Content scripts never run the WebAssembly
// themselves: Chromium refuses it on pages whose CSP lacks
// 'wasm-unsafe-eval'.
'use strict';
if (typeof importScripts === 'function' && typeof Go === 'undefined') {
  importScripts('wasm_exec.js');
}

const DEFAULT_RELAY = 'http://127.0.0.1:7777';
const MAX_SENT = 2000; // remembered sends (auto mode sends each envelope once)
const MAX_TEXT = 4 << 20; // what the parser reads of a text (browser.MaxText); one character more tells it was cut

// The Go runtime: crosstalk.parse / check / fence once it has started.
const wasmReady = (async () => {
  const go = new Go();
  const resp = await fetch(chrome.runtime.getURL('crosstalk.wasm'));
  const { instance } = await WebAssembly.instantiate(await resp.arrayBuffer(), go.importObject);
  go.run(instance); // never resolves: Go's main blocks so its functions stay callable
  return globalThis.crosstalk;
})();

async function settings() {
  const s = await chrome.storage.local.get(['relay', 'token', 'sites']);
  return { relay: (s.relay || DEFAULT_RELAY).replace(/\/+$/, ''), token: s.token || '', sites: s.sites || [] };
}

// siteParts splits a site of the options' site map: "host[:port]" is the
// site over https, "http://host[:port]" over plain http, which the user
// must write out (options.js requests the same origins): a site granted on
// http could be driven by anyone on the network path.
function siteParts(site) {
  const s = String(site || '').toLowerCase();
  if (s.startsWith('http://')) { return { scheme: 'http:', host: s.slice(7) }; }
  return { scheme: 'https:', host: s.startsWith('https://') ? s.slice(8) : s };
}

const isLoopback = (host) => /^(127\.0\.0\.1|localhost)(:|$)/.test(host);

// siteFor returns the site map's entry for a page at url: the same host
// and port, over the entry's scheme (a loopback host over either).
function siteFor(sites, url) {
  let u;
  try { u = new URL(url); } catch (e) { return null; }
  const host = u.host.toLowerCase();
  return sites.find((s) => {
    const p = siteParts(s.site);
    return s.site && p.host === host && (p.scheme === u.protocol || isLoopback(host));
  }) || null;
}

// One use of the trust store text at a time: a check reads and writes it,
// and so does forgetting a sender's keys. fn gets the Go functions and the
// text, and returns {result, known}: known, when it changed, is stored.
let checking = Promise.resolve();
function withKnown(fn) {
  const run = checking.then(async () => {
    const ct = await wasmReady;
    const { known = '' } = await chrome.storage.local.get('known');
    const out = fn(ct, known);
    if (out.known !== undefined && out.known !== known) { await chrome.storage.local.set({ known: out.known }); }
    return out.result;
  });
  checking = run.catch(() => {});
  return run;
}

function goJSON(s) {
  const r = JSON.parse(s);
  if (r.error) { throw new Error(r.error); }
  return r;
}

function check(text) {
  return withKnown((ct, known) => {
    const res = goJSON(ct.check(text, known));
    return { result: res.envelopes, known: res.known };
  });
}

// relayFetch calls the relay with the token. It returns {status, body}
// (body parsed as JSON when it is), or throws when the relay is unreachable.
async function relayFetch(path, init = {}) {
  const s = await settings();
  const headers = Object.assign({ Accept: 'application/json' }, init.headers || {});
  if (s.token) { headers.Authorization = 'Bearer ' + s.token; }
  const r = await fetch(s.relay + path, Object.assign({}, init, { headers }));
  const text = await r.text();
  let body = text;
  try { body = JSON.parse(text); } catch (e) { /* not JSON */ }
  return { status: r.status, body };
}

function relayError(res) {
  const e = res.body && res.body.error;
  if (e && e.code) { return { code: e.code, message: e.message || '' }; }
  return { code: 'HTTP-' + res.status, message: typeof res.body === 'string' ? res.body.slice(0, 200) : '' };
}

// remember records a send in storage.local, one write at a time (each
// reads, changes and writes the whole map).
let remembering = Promise.resolve();
function remember(key, out) {
  const run = remembering.then(async () => {
    const { sent = {} } = await chrome.storage.local.get('sent');
    sent[key] = { sent: out.sent, event_id: out.event_id, group: out.group, at: Date.now() };
    const keys = Object.keys(sent);
    if (keys.length > MAX_SENT) {
      keys.sort((a, b) => sent[a].at - sent[b].at).slice(0, keys.length - MAX_SENT).forEach((k) => delete sent[k]);
    }
    await chrome.storage.local.set({ sent });
  });
  remembering = run.catch(() => {});
  return run;
}

// sentKey is what a send is remembered under: the page's key for the
// envelope (its message id, when it has one) and the SHA-256 of its text.
// Another envelope under the same message id is another send: the relay
// answers it "differs", never the first one's "sent".
async function sentKey(msg) {
  const d = new Uint8Array(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(String(msg.text))));
  return String(msg.key) + ' ' + Array.from(d.subarray(0, 16), (b) => b.toString(16).padStart(2, '0')).join('');
}

// send posts one envelope to the relay. auto: skip it when it was sent
// before, or is being sent now (auto mode sends each envelope once, even
// with the page open in two tabs).
const inflight = new Map(); // sentKey → the auto send under way
async function send(msg) {
  const key = await sentKey(msg);
  if (msg.auto) {
    if (inflight.has(key)) { return Object.assign({ skipped: true }, await inflight.get(key)); }
    // In inflight before the first await: a second tab's send of the same
    // envelope, arriving meanwhile, waits for this one.
    const p = (async () => {
      await remembering;
      const { sent = {} } = await chrome.storage.local.get('sent');
      if (sent[key]) { return Object.assign({ skipped: true }, sent[key]); }
      return post(msg, key);
    })();
    inflight.set(key, p);
    try { return await p; } finally { inflight.delete(key); }
  }
  return post(msg, key);
}

async function post(msg, key) {
  let res;
  try {
    res = await relayFetch('/crosstalk/receive', {
      method: 'POST',
      // encodeURIComponent: a header value is Latin-1 (fetch throws on
      // anything else, which read as an unreachable relay), and a message
      // id read leniently may be any text. The relay hashes a long key.
      headers: { 'Content-Type': 'text/plain; charset=utf-8', 'Idempotency-Key': 'crosstalk-ext-' + encodeURIComponent(msg.key) },
      body: msg.text,
    });
  } catch (e) {
    const ct = await wasmReady;
    return { sent: 'offline', error: 'the relay is not reachable (' + e.message + ')', fenced: ct.fence(msg.text) };
  }
  let out;
  if (res.status === 200 && res.body && Array.isArray(res.body.results)) {
    const r0 = res.body.results[0] || {};
    out = { sent: r0.duplicate ? 'duplicate' : 'ok', event_id: r0.event_id, group: r0.group_id, seq: r0.seq, status: r0.status };
    if (r0.differs) {
      // The relay holds another envelope under this message id: this one
      // was not recorded (docs/design.md §5.3), which "already in the
      // ledger" would hide.
      out = { sent: 'differs', error: 'the relay holds another envelope under message id ' + (r0.message || '') + '; this one was not recorded and needs a new message id' };
    }
  } else {
    const e = relayError(res);
    out = { sent: e.code, error: e.message };
  }
  if (out.sent === 'ok' || out.sent === 'duplicate') { await remember(key, out); }
  return out;
}

// WAITING_PAGES bounds how many pages of the relay's newest ledger events
// (GET …/deliveries?before_pos=, at most 2000 events a page) waiting reads:
// every chat tab asks every 15 s, so its cost must not grow with the
// relay's history. An envelope left unread behind more than that is on the
// web inbox's agent page.
const WAITING_PAGES = 3;

// pathSegment is a group or agent name as one segment of a relay API path
// (docs/agents.md, "Names in paths"): percent-encoded, and a name of one or
// two dots after any number of tildes gets one more tilde in front, since
// fetch drops or climbs "." and ".." segments (also written %2E).
function pathSegment(name) {
  return (/^~*\.\.?$/.test(name) ? '~' : '') + encodeURIComponent(name);
}

// newestDeliveries returns agent's deliveries among the newest ledger
// events, at most pages pages of them, in log order, and the agent's id.
async function newestDeliveries(agent, pages, limit) {
  const a = pathSegment(agent);
  let out = [], before = 0, me = agent;
  for (let i = 0; i < pages; i++) {
    const d = await relayFetch('/v1/agents/' + a + '/deliveries?before_pos=' + before + '&limit=' + limit);
    if (d.status !== 200) { throw Object.assign(new Error('deliveries: ' + relayError(d).message), { code: relayError(d).code }); }
    me = d.body.agent;
    out = (d.body.deliveries || []).concat(out);
    if (!d.body.older_pos) { break; }
    before = d.body.older_pos;
  }
  return { agent: me, deliveries: out };
}

// waiting returns the envelopes the relay holds for agent and it has not
// seen yet: chat messages addressed to it, past its read cursor in their
// group, oldest first, among the newest ledger events (WAITING_PAGES).
async function waiting(agent) {
  const [d, c] = await Promise.all([
    newestDeliveries(agent, WAITING_PAGES, 1000),
    relayFetch('/v1/agents/' + pathSegment(agent) + '/cursors'),
  ]);
  const cursors = (c.status === 200 && c.body.cursors) || {};
  const me = d.agent;
  return d.deliveries.filter((x) => x.kind === 'chat.message' && x.directedness === 'to_me' &&
    x.from !== me && x.seq > (cursors[x.group] || 0)).sort((x, y) => (x.ts < y.ts ? -1 : x.ts > y.ts ? 1 : x.seq - y.seq));
}

// rawEnvelope returns the envelope text of the event at seq in group.
async function rawEnvelope(group, seq) {
  const r = await relayFetch('/v1/groups/' + pathSegment(group) + '/events?since_seq=' + (seq - 1) + '&limit=1');
  const ev = r.status === 200 && r.body.events && r.body.events[0];
  const x = ev && ev.data && ev.data.x_crosstalk;
  if (!x || !x.raw) { throw new Error('event ' + seq + ' of ' + group + ' has no envelope text'); }
  return x.raw;
}

// agentHeader is an agent name as an X-Crosstalk-Agent value: printable
// ASCII as it is, anything else in RFC 8187's UTF-8''percent-encoded form,
// which the relay decodes (docs/web.md): fetch refuses a header value
// outside Latin-1 and would send a Latin-1 one as single bytes.
function agentHeader(agent) {
  const a = String(agent);
  return /^[\x20-\x7e]*$/.test(a) && !/^utf-8''/i.test(a) ? a : "UTF-8''" + encodeURIComponent(a);
}

async function setBadge(tabId, n) {
  if (tabId === undefined) { return; }
  await chrome.action.setBadgeText({ tabId, text: n > 0 ? String(n) : '' });
  await chrome.action.setBadgeBackgroundColor({ tabId, color: '#2563eb' });
}

const handlers = {
  async check(msg) { return { envelopes: await check(String(msg.text).slice(0, MAX_TEXT + 1)) }; },
  async send(msg) { return send(msg); },
  async fence(msg) { return { text: (await wasmReady).fence(msg.text) }; },
  async site(msg, sender) {
    const s = await settings();
    const site = siteFor(s.sites, msg.url);
    // The relay's own pages, also by its other loopback name.
    const loop = (h) => String(h).toLowerCase().replace(/^localhost(?=:|$)/, '127.0.0.1');
    const isRelay = loop(hostOf(s.relay)) === loop(msg.host);
    const out = { agent: site ? site.agent : '', auto: !!(site && site.auto), isRelay };
    // The relay's URL for the popup only: a content script has no use for
    // it, and its page's renderer must not learn where the relay is.
    if (fromExtension(sender)) { out.relay = s.relay; }
    return out;
  },
  async waiting(msg, sender) {
    try {
      const list = await waiting(msg.agent);
      await setBadge(sender.tab && sender.tab.id, list.length);
      return { count: list.length };
    } catch (e) {
      await setBadge(sender.tab && sender.tab.id, 0);
      return { count: 0, error: e.message };
    }
  },
  async next(msg) {
    const list = await waiting(msg.agent);
    if (!list.length) { return { none: true }; }
    const d = list[0];
    const text = await rawEnvelope(d.group, d.seq);
    return { text, fenced: (await wasmReady).fence(text), group: d.group, event_id: d.event_id, seq: d.seq, message: d.message || '' };
  },
  async delivered(msg) {
    const r = await relayFetch('/v1/groups/' + pathSegment(msg.group) + '/events/' + encodeURIComponent(msg.event_id) + '/read', {
      method: 'POST', headers: { 'X-Crosstalk-Agent': agentHeader(msg.agent) },
    });
    return r.status === 200 ? { ok: true } : Object.assign({ ok: false }, relayError(r));
  },
  async exchanges(msg) {
    // The newest page of the agent's deliveries, not its whole history.
    const r = await relayFetch('/v1/agents/' + pathSegment(msg.agent) + '/deliveries?before_pos=0&limit=200');
    if (r.status !== 200) { return Object.assign({ items: [] }, relayError(r)); }
    // Its exchanges: what it sent and what was addressed to it (or its role).
    const me = r.body.agent;
    const items = (r.body.deliveries || []).filter((x) => x.kind === 'chat.message' &&
      (x.from === me || x.directedness === 'to_me' || x.directedness === 'to_my_role')).slice(-10).reverse();
    return { items };
  },
  // The trust store's keys, and forgetting those first seen from a sender
  // (a wrong first-use pin, a rotated key): the options page's Keys.
  async keys() { return withKnown((ct, known) => ({ result: goJSON(ct.keys(known)) })); },
  async forget(msg) {
    return withKnown((ct, known) => {
      const r = goJSON(ct.forget(known, String(msg.sender || '')));
      return { result: { forgotten: r.forgotten }, known: r.known };
    });
  },
  async test(msg) {
    const relay = (msg.relay || DEFAULT_RELAY).replace(/\/+$/, '');
    const headers = { Accept: 'application/json' };
    if (msg.token) { headers.Authorization = 'Bearer ' + msg.token; }
    try {
      const r = await fetch(relay + '/v1/groups', { headers });
      if (r.status === 200) { return { ok: true, message: 'Connected to ' + relay }; }
      let why = r.status + '';
      try { const b = await r.json(); why = (b.error && (b.error.code + ': ' + b.error.message)) || why; } catch (e) { /* keep status */ }
      return { ok: false, message: 'The relay refused: ' + why };
    } catch (e) {
      return { ok: false, message: 'The relay is not reachable at ' + relay + ' (' + e.message + ')' };
    }
  },
};

// A content script speaks for a page that may be hostile, and a renderer
// that page compromised can send any message: only sender.url, which the
// browser sets, is trusted. A page may ask only what the content script
// needs, for its own site's host and agent, whatever the message names;
// the extension's own pages (options, popup) may ask anything.
const PAGE_TYPES = new Set(['check', 'send', 'fence', 'site', 'waiting', 'next', 'delivered']);
const AGENT_TYPES = new Set(['waiting', 'next', 'delivered']);

function fromExtension(sender) {
  return !!sender && sender.id === chrome.runtime.id && typeof sender.url === 'string' && sender.url.startsWith(chrome.runtime.getURL(''));
}

function hostOf(url) {
  try { return new URL(url).host; } catch (e) { return ''; }
}

// dispatch answers one message: the handler's answer, or {error, code}.
async function dispatch(msg, sender) {
  try {
    if (!fromExtension(sender)) {
      if (!PAGE_TYPES.has(msg.type)) { throw new Error(msg.type + ': not for a page'); }
      msg = Object.assign({}, msg, { host: hostOf(sender && sender.url), url: sender && sender.url });
      if (AGENT_TYPES.has(msg.type)) {
        const site = siteFor((await settings()).sites, msg.url);
        if (!site || !site.agent) { throw new Error(msg.host + ' has no agent'); }
        msg.agent = site.agent;
      }
    }
    return await handlers[msg.type](msg, sender);
  } catch (e) {
    return { error: String((e && e.message) || e), code: e && e.code };
  }
}

chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
  if (!msg || !Object.hasOwn(handlers, msg.type)) { return false; }
  dispatch(msg, sender).then(sendResponse);
  return true;
});

// Keyboard commands (remappable in the browser): the content script of
// the active tab does the work.
async function runCommand(command) {
  const [tab] = await chrome.tabs.query({ active: true, lastFocusedWindow: true });
  if (tab && tab.id !== undefined) {
    await chrome.tabs.sendMessage(tab.id, { type: 'command', command }).catch(() => {});
  }
}
chrome.commands.onCommand.addListener((command) => { runCommand(command); });

// Sites the user enabled beyond loopback: register the content script for
// those whose host permission was granted (options page asks for it).
async function registerSites() {
  const { sites = [] } = await chrome.storage.local.get('sites');
  const matches = [];
  for (const s of sites) {
    const { scheme, host: hostPort } = siteParts(s.site);
    const host = hostPort.split(':')[0];
    if (!host || host === '127.0.0.1' || host === 'localhost') { continue; }
    // The site's own scheme only: https unless the options say http://.
    const origin = scheme + '//' + host + '/*';
    if (await chrome.permissions.contains({ origins: [origin] })) { matches.push(origin); }
  }
  try { await chrome.scripting.unregisterContentScripts({ ids: ['sites'] }); } catch (e) { /* none yet */ }
  if (matches.length) {
    await chrome.scripting.registerContentScripts([{ id: 'sites', matches, js: ['content.js'], runAt: 'document_idle' }]);
  }
}
chrome.storage.onChanged.addListener((changes, area) => { if (area === 'local' && changes.sites) { registerSites().catch(() => {}); } });
chrome.permissions.onAdded.addListener(() => { registerSites().catch(() => {}); });
chrome.runtime.onInstalled.addListener(() => { registerSites().catch(() => {}); });
