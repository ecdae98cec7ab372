// options.js: the relay URL, the token and the site → agent map, kept in
// storage.local. Save asks for the host permission of every site that is
// not loopback (loopback is granted at install).
'use strict';
const DEFAULTS = [
  { site: 'chatgpt.com', agent: 'CHATGPT', auto: false },
  { site: 'claude.ai', agent: 'CLAUDE', auto: false },
  { site: 'gemini.google.com', agent: 'GEMINI', auto: false },
  { site: 'copilot.microsoft.com', agent: 'COPILOT', auto: false },
];
const form = document.getElementById('options');
const rows = document.getElementById('sites');

function addRow(s) {
  const tr = document.getElementById('row').content.firstElementChild.cloneNode(true);
  tr.querySelector('[name=site]').value = s.site || '';
  tr.querySelector('[name=agent]').value = s.agent || '';
  tr.querySelector('[name=auto]').checked = !!s.auto;
  tr.querySelector('.remove').addEventListener('click', () => tr.remove());
  rows.appendChild(tr);
  return tr;
}

function read() {
  const sites = [...rows.querySelectorAll('tr')].map((tr) => ({
    site: siteOf(tr.querySelector('[name=site]').value),
    agent: tr.querySelector('[name=agent]').value.trim().toUpperCase(),
    auto: tr.querySelector('[name=auto]').checked,
  })).filter((s) => s.site && s.agent);
  return { relay: form.relay.value.trim().replace(/\/+$/, ''), token: form.token.value.trim(), sites };
}

async function load() {
  const s = await chrome.storage.local.get(['relay', 'token', 'sites']);
  form.relay.value = s.relay || 'http://127.0.0.1:7777';
  form.token.value = s.token || '';
  (s.sites || DEFAULTS).forEach(addRow);
}

// siteOf normalises a site as typed: "host[:port]" means the site over
// https, and plain http only when written out, "http://host[:port]" (a site
// granted on http could be driven by anyone on the network path). sw.js
// reads them the same way (siteParts).
function siteOf(typed) {
  const s = typed.trim().toLowerCase().replace(/\/+$/, '');
  return s.startsWith('https://') ? s.slice(8) : s;
}

// origins returns the host permissions the sites and the relay need: each
// on its own scheme only.
function origins(v) {
  const out = [];
  const add = (scheme, host) => {
    const h = host.split(':')[0];
    if (h && h !== '127.0.0.1' && h !== 'localhost' && !h.startsWith('[')) { out.push(scheme + '//' + h + '/*'); }
  };
  v.sites.forEach((s) => (s.site.startsWith('http://') ? add('http:', s.site.slice(7)) : add('https:', s.site)));
  try {
    const u = new URL(v.relay);
    add(u.protocol, u.host);
  } catch (e) { /* checked on save */ }
  return out;
}

document.getElementById('add').addEventListener('click', () => addRow({}).querySelector('[name=site]').focus());

document.getElementById('test').addEventListener('click', async () => {
  const out = document.getElementById('test-result');
  out.textContent = 'Testing…';
  const v = read();
  const r = await chrome.runtime.sendMessage({ type: 'test', relay: v.relay, token: v.token });
  out.textContent = r.message;
  out.dataset.ok = r.ok ? 'true' : 'false';
});

form.addEventListener('submit', async (e) => {
  e.preventDefault();
  const out = document.getElementById('saved');
  const v = read();
  try {
    const u = new URL(v.relay || 'http://127.0.0.1:7777');
    if (u.protocol !== 'http:' && u.protocol !== 'https:') { throw new Error('not http(s)'); }
  } catch (err) {
    out.textContent = 'The relay URL must be an http:// or https:// URL.';
    out.dataset.ok = 'false';
    return;
  }
  // Ask for the sites' host permissions (a user gesture: this click).
  let granted = true;
  const want = origins(v);
  if (want.length) {
    try { granted = await chrome.permissions.request({ origins: want }); } catch (err) { granted = false; }
  }
  await chrome.storage.local.set(v);
  out.textContent = granted ? 'Saved.' : 'Saved; some sites were not allowed: the extension stays off there.';
  out.dataset.ok = 'true';
});

// loadKeys lists the trust store's keys by the sender they were first seen
// from, each sender with a Forget button.
async function loadKeys() {
  const body = document.getElementById('keys');
  const r = await chrome.runtime.sendMessage({ type: 'keys' });
  body.textContent = '';
  const out = document.getElementById('keys-result');
  if (r.error) {
    out.textContent = 'The trust store cannot be read: ' + r.error;
    out.dataset.ok = 'false';
    return;
  }
  const bySender = new Map();
  for (const k of r.keys) {
    if (!bySender.has(k.sender)) { bySender.set(k.sender, []); }
    bySender.get(k.sender).push(k);
  }
  if (!bySender.size) {
    const tr = body.insertRow();
    tr.insertCell().textContent = 'No keys pinned yet.';
    return;
  }
  for (const [sender, keys] of bySender) {
    const tr = body.insertRow();
    tr.dataset.sender = sender;
    tr.insertCell().textContent = sender || '(no sender)';
    tr.insertCell().textContent = keys.map((k) => k.pkid + ' (' + k.fingerprint + ')' + (k.revoked ? ', revoked' : '') +
      (k.first_seen ? ', first seen ' + k.first_seen : '')).join('; ');
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'forget';
    b.textContent = 'Forget';
    b.disabled = keys.every((k) => k.revoked);
    b.setAttribute('aria-label', 'Forget the keys first seen from ' + (sender || 'no sender'));
    b.addEventListener('click', async () => {
      const res = await chrome.runtime.sendMessage({ type: 'forget', sender });
      out.textContent = res.error ? 'Not forgotten: ' + res.error
        : 'Forgot ' + res.forgotten + ' key' + (res.forgotten === 1 ? '' : 's') + ' of ' + (sender || 'no sender') + '.';
      out.dataset.ok = res.error ? 'false' : 'true';
      await loadKeys();
    });
    tr.insertCell().appendChild(b);
  }
}

load();
loadKeys();
