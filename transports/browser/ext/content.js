// content.js finds AI Crosstalk envelopes in the page and places a control
// beside each one (status, Send, Copy); it shows an Insert control when the
// relay holds envelopes for this site's agent, runs auto mode and the
// keyboard commands, and shows toasts. It never parses envelopes itself:
// it sends the text of each block that holds an [[END]] to the background
// (sw.js), which runs the Go parser and verifier, and places a control per
// envelope found. See transports/browser/doc.go.
(() => {
  'use strict';
  if (window.__crosstalkContent) { return; }
  window.__crosstalkContent = true;

  const STABLE_MS = 600; // a block must keep its text this long before it is checked (streaming)
  // The background checks at most 4 MiB of a block (browser.MaxText) and
  // says where it cut: more than one character past it is never sent.
  const MAX_TEXT = 4 << 20;
  const HEADER = /\[\[[^\]\n]*(?:→|->)[^\]\n]*\]\]/;
  // Message containers of the chat sites our users use; elsewhere the
  // page's own blocks are used.
  const MESSAGES = {
    'chatgpt.com': '[data-message-author-role]',
    'chat.openai.com': '[data-message-author-role]',
    'claude.ai': '[data-testid="user-message"], .font-claude-message, .font-claude-response',
    'gemini.google.com': 'message-content, user-query',
    'copilot.microsoft.com': '[data-content="ai-message"], [data-content="user-message"]',
    'chat.mistral.ai': '[data-message-author-role], .prose',
    'chat.deepseek.com': '.ds-markdown',
  };
  const GENERIC_MESSAGES = '[data-message-id], [data-message-author-role], [data-testid*="message"], .message, [role="article"], article';
  const COMPOSERS = '#prompt-textarea, .ProseMirror[contenteditable="true"], div[contenteditable="true"], textarea';
  const SEND_BUTTONS = '[data-testid="send-button"], button[aria-label*="Send" i], button[type="submit"]';

  const state = {
    site: { agent: '', auto: false, isRelay: false },
    blocks: new Map(), // block element → {text, since, done}
    keys: new Map(), // envelope key → page index, for the envelopes on the page
    nextIndex: 0, // the page index of the next new envelope key
    controls: [], // every control, in page order
    pending: null, // an inserted envelope not yet sent by the user
  };

  const ask = (msg) => chrome.runtime.sendMessage(msg).then((r) => {
    if (r && r.error && !r.sent) { throw new Error(r.error); }
    return r;
  });

  // ---- what the page cannot reach -------------------------------------------
  // The page's scripts share the DOM with this script. What the extension
  // shows (a status, the relay's answer, a toast) lives in closed shadow
  // roots known only here, never in an attribute or the text of the page's
  // DOM; the hosts carry only data-crosstalk-envelope (the message id or
  // page index, which the page's own text holds) and the markers isOurs
  // needs. See docs/web.md (the extension's security notes).
  const roots = new WeakMap(); // host → its closed shadow root

  // pin sets the host's own style inline and !important, which no style
  // sheet of the page overrides; the page's scripts can still change it,
  // and exposed checks it again at each click.
  const HOST_STYLE = {
    opacity: '1', visibility: 'visible', transform: 'none', filter: 'none', 'clip-path': 'none', 'mix-blend-mode': 'normal',
    'pointer-events': 'auto', contain: 'none',
  };
  function pin(host, style) {
    for (const [k, v] of Object.entries(Object.assign({}, HOST_STYLE, style))) { host.style.setProperty(k, v, 'important'); }
  }

  // Where the browser says whether an element is drawn unobscured
  // (IntersectionObserver v2, Chromium), seen holds its last answer for
  // each of our buttons: false while anything of the page covers it, even
  // an element that lets clicks through (pointer-events: none, which hit
  // testing, hence elementFromPoint, skips), or while an ancestor fades,
  // filters or distorts it.
  const seen = new WeakMap(); // button → drawn unobscured
  let watcher = null;
  if (typeof IntersectionObserverEntry === 'function' && 'isVisible' in IntersectionObserverEntry.prototype) {
    try {
      watcher = new IntersectionObserver((es) => { for (const e of es) { seen.set(e.target, e.isVisible); } }, { trackVisibility: true, delay: 100 });
    } catch (e) {
      watcher = null;
    }
  }
  function watch(button) { if (watcher) { watcher.observe(button); } }

  // exposed returns why a click on button, in host, is not the user's
  // choice of what they saw, or '' when it is: a click the page's scripts
  // made (isTrusted false), or one on a control the page has removed,
  // restyled, faded or covered.
  function exposed(e, host, button) {
    if (!e.isTrusted) { return 'not your click'; }
    if (!host.isConnected) { return 'the control left the page'; }
    const cs = getComputedStyle(host);
    for (const [k, v] of Object.entries(HOST_STYLE)) {
      if (k !== 'pointer-events' && k !== 'contain' && cs.getPropertyValue(k) !== v) {
        pin(host);
        return 'the page restyled the crosstalk control (' + k + ')';
      }
    }
    for (let el = host.parentElement; el; el = el.parentElement) {
      if (parseFloat(getComputedStyle(el).opacity) < 1) { return 'the page fades the crosstalk control'; }
    }
    if (watcher && seen.get(button) !== true) { return 'the page covers the crosstalk control, or it is not in view'; }
    return '';
  }

  // ---- toasts -----------------------------------------------------------
  let toastHost = null;
  let lastToast = '';
  function toast(text, bad) {
    if (!toastHost) {
      toastHost = document.createElement('div');
      toastHost.setAttribute('data-crosstalk-toasts', '');
      const root = toastHost.attachShadow({ mode: 'closed' });
      roots.set(toastHost, root);
      root.innerHTML = '<style>' +
        ':host{all:initial;position:fixed;z-index:2147483647;right:16px;bottom:16px;display:flex;flex-direction:column;gap:6px;font:13px system-ui,sans-serif}' +
        'div{background:#111827;color:#fff;padding:8px 12px;border-radius:8px;box-shadow:0 2px 8px #0004;max-width:360px}' +
        'div.bad{background:#991b1b}</style>';
      pin(toastHost, { position: 'fixed', 'z-index': '2147483647', right: '16px', bottom: '16px', display: 'flex' });
      document.documentElement.appendChild(toastHost);
    }
    const d = document.createElement('div');
    d.textContent = text;
    d.setAttribute('role', 'status');
    if (bad) { d.className = 'bad'; }
    roots.get(toastHost).appendChild(d);
    lastToast = text;
    setTimeout(() => d.remove(), 4000);
  }

  // ---- clipboard --------------------------------------------------------
  async function copy(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (e) {
      const ta = document.createElement('textarea');
      ta.value = text;
      ta.style.cssText = 'position:fixed;left:-9999px;top:0';
      document.documentElement.appendChild(ta);
      ta.select();
      const ok = document.execCommand('copy');
      ta.remove();
      return ok;
    }
  }

  // ---- finding envelopes --------------------------------------------------
  function isOurs(el) {
    return !!(el.closest && el.closest('[data-crosstalk-envelope], [data-crosstalk-insert], [data-crosstalk-toasts]'));
  }

  // blocks returns the elements that each hold whole envelopes: for every
  // text node with [[END]], its nearest ancestor whose text also holds a
  // header (a <pre> rather than its <code>), never beyond its message
  // container and never the whole page; an outer block wins over the
  // blocks inside it.
  function findBlocks() {
    const messages = MESSAGES[location.hostname] || GENERIC_MESSAGES;
    const found = new Set();
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT, {
      acceptNode: (n) => (n.nodeValue.includes('[[END]]') ? NodeFilter.FILTER_ACCEPT : NodeFilter.FILTER_REJECT),
    });
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      let el = n.parentElement;
      if (!el || isOurs(el) || el.closest('textarea, [contenteditable="true"], script, style')) { continue; }
      const stop = el.closest(messages) || document.body;
      while (el !== stop && !HEADER.test(el.innerText || '')) { el = el.parentElement; }
      if (el === document.body || !HEADER.test(el.innerText || '')) { continue; } // "[[END]]" in prose
      el = el.closest('pre') || el;
      found.add(el);
    }
    return [...found].filter((b) => ![...found].some((o) => o !== b && o.contains(b)));
  }

  // ---- what the user sees ---------------------------------------------------
  // A page may show an envelope other than the one its text holds: a block
  // it does not render (display: none, opacity: 0) still has its text in
  // the DOM, and a line in a visible block can be drawn invisibly (a tiny
  // font, a transparent colour, moved off the block) while innerText, what
  // is checked and sent, keeps it. Such envelopes are neither sent nor
  // copied: the user cannot see what they say.
  function shown(el) {
    if (typeof el.checkVisibility === 'function') {
      return el.checkVisibility({ opacityProperty: true, visibilityProperty: true });
    }
    return el.getClientRects().length > 0;
  }

  const clear = (c) => !c || c === 'transparent' || /^rgba\(.*[,/]\s*0(\.0*)?\)$/.test(c);

  // hiddenLines returns the lines of text in block that innerText keeps but
  // the page draws so that nobody sees them.
  function hiddenLines(block) {
    const out = [];
    const b = block.getBoundingClientRect();
    const left = b.left - block.scrollLeft, top = b.top - block.scrollTop;
    const right = left + Math.max(b.width, block.scrollWidth), bottom = top + Math.max(b.height, block.scrollHeight);
    const walker = document.createTreeWalker(block, NodeFilter.SHOW_TEXT);
    const range = document.createRange();
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      // No isOurs: the page can wear our attributes, and our controls hold
      // no text outside their shadow roots.
      if (!el || !n.nodeValue.trim()) { continue; }
      // Not rendered at all (display: none, visibility: hidden): not in
      // innerText either.
      if (typeof el.checkVisibility === 'function' ? !el.checkVisibility({ visibilityProperty: true }) : !el.getClientRects().length) { continue; }
      const cs = getComputedStyle(el);
      range.selectNodeContents(n);
      const rects = [...range.getClientRects()].filter((r) => r.width > 0 && r.height > 0);
      const hidden = !shown(el) || parseFloat(cs.fontSize) < 4 || clear(cs.color) || clear(cs.webkitTextFillColor || cs.color) || !rects.length ||
        rects.some((r) => r.right <= left || r.left >= right || r.bottom <= top || r.top >= bottom);
      if (hidden) { out.push(...n.nodeValue.split('\n').map((l) => l.trim()).filter(Boolean)); }
    }
    return out;
  }

  // hiddenIn returns what the page hides of an envelope's text in block:
  // the block itself, or a line of it; '' when the user sees it all.
  function hiddenIn(block, text) {
    if (!block.isConnected || !shown(block)) { return 'the page does not show this envelope'; }
    const line = hiddenLines(block).find((l) => text.includes(l));
    return line ? 'the page hides a line of it from view: "' + line.slice(0, 80) + '"' : '';
  }

  const sendable = (c) => c.__env.status !== 'error' && c.__env.status !== 'hidden';

  function messageOf(block) {
    return block.closest(MESSAGES[location.hostname] || GENERIC_MESSAGES) || block.parentElement || block;
  }

  function keyOf(env) {
    if (env.message) { return 'm:' + env.message; }
    let h = 2166136261; // FNV-1a of the envelope text
    for (let i = 0; i < env.text.length; i++) { h = Math.imul(h ^ env.text.charCodeAt(i), 16777619) >>> 0; }
    return 'h:' + h.toString(16) + ':' + env.text.length;
  }

  // prune forgets the blocks, controls and envelope keys that left the
  // page: a chat tab that streams messages for hours and drops old ones (a
  // virtualised thread, a cleared conversation) must not keep them all.
  function prune() {
    for (const el of state.blocks.keys()) {
      if (!el.isConnected) { state.blocks.delete(el); }
    }
    state.controls = state.controls.filter((c) => c.isConnected);
    if (state.keys.size > state.controls.length) {
      const live = new Set(state.controls.map((c) => c.__key));
      for (const k of state.keys.keys()) {
        if (!live.has(k)) { state.keys.delete(k); }
      }
    }
  }

  function scan() {
    const t0 = performance.now();
    const now = Date.now();
    let again = false;
    prune();
    for (const block of findBlocks()) {
      if (!shown(block)) {
        // A block the page hides (or hid since): no control beside it.
        for (const old of block.__crosstalkControls || []) { old.remove(); }
        block.__crosstalkControls = [];
        state.blocks.delete(block);
        continue;
      }
      const text = (block.innerText || '').slice(0, MAX_TEXT + 1);
      let b = state.blocks.get(block);
      if (!b || b.text !== text) {
        state.blocks.set(block, { text, since: now, done: '' });
        again = true;
        continue;
      }
      if (b.done === text) { continue; }
      if (now - b.since < STABLE_MS) { again = true; continue; }
      b.done = text;
      process(block, text).catch((e) => toast('crosstalk: ' + e.message, true));
    }
    if (again) { schedule(STABLE_MS); }
    document.documentElement.setAttribute('data-crosstalk-scan-ms', (performance.now() - t0).toFixed(1));
  }

  // schedule runs scan in ms, or sooner if a scan is due sooner: a page
  // that never stops changing (a clock, a typing indicator) must not starve
  // the scans.
  let timer = 0;
  let due = Infinity;
  function schedule(ms) {
    const at = Date.now() + ms;
    if (at >= due) { return; }
    clearTimeout(timer);
    due = at;
    timer = setTimeout(() => { due = Infinity; scan(); }, ms);
  }

  // ---- controls -----------------------------------------------------------
  const LABELS = {
    verified: '✓ verified', 'first-use': '✓ first use', unsigned: 'unsigned', 'unknown-key': '? unknown key',
    invalid: '✗ invalid signature', 'key-changed': '✗ key changed', revoked: '✗ revoked', error: '✗ not parsed',
    hidden: '✗ hidden text',
  };
  const COLORS = {
    verified: '#15803d', 'first-use': '#b45309', unsigned: '#4b5563', 'unknown-key': '#b91c1c',
    invalid: '#b91c1c', 'key-changed': '#b91c1c', revoked: '#b91c1c', error: '#b91c1c', hidden: '#b91c1c',
  };

  async function process(block, text) {
    const res = await ask({ type: 'check', text });
    for (const old of block.__crosstalkControls || []) { old.remove(); }
    state.controls = state.controls.filter((c) => c.isConnected);
    const made = [];
    let after = block;
    const message = messageOf(block);
    const hidden = hiddenLines(block);
    for (let env of res.envelopes) {
      const line = env.status === 'error' ? '' : hidden.find((l) => env.text.includes(l));
      if (line) { env = Object.assign({}, env, { status: 'hidden', reason: 'the page hides a line of it from view: "' + line.slice(0, 80) + '"' }); }
      const c = control(env);
      c.__block = block;
      if (block === message || !block.parentNode) {
        block.appendChild(c);
      } else {
        after.after(c);
        after = c;
      }
      made.push(c);
    }
    block.__crosstalkControls = made;
    state.controls.push(...made);
    if (state.site.auto) {
      for (const c of made) {
        if (sendable(c)) { doSend(c, true); }
      }
    }
  }

  function control(env) {
    const key = env.status === 'error' ? 'e:' + env.index + ':' + env.reason : keyOf(env);
    if (!state.keys.has(key)) { state.keys.set(key, state.nextIndex++); }
    const host = document.createElement('span');
    host.__env = env;
    host.__key = key;
    host.setAttribute('data-crosstalk-envelope', env.message || String(state.keys.get(key)));
    pin(host, { display: 'block', margin: '4px 0' });
    const root = host.attachShadow({ mode: 'closed' });
    roots.set(host, root);
    root.innerHTML = '<style>' +
      ':host{all:initial;display:block;font:12px system-ui,sans-serif}' +
      '.bar{display:inline-flex;align-items:center;gap:6px;border:1px solid #d1d5db;border-radius:999px;padding:2px 4px 2px 8px;background:#fff;color:#111}' +
      '.st{font-weight:600}button{font:inherit;border:1px solid #9ca3af;border-radius:999px;background:#f9fafb;padding:1px 8px;cursor:pointer}' +
      'button:disabled{opacity:.5;cursor:default}.sent{color:#374151}</style>' +
      '<span class="bar"><span class="logo">crosstalk</span><span class="st"></span><span class="sent"></span>' +
      '<button data-crosstalk-action="send" type="button">Send</button>' +
      '<button data-crosstalk-action="copy" type="button">Copy</button></span>';
    // The status, the signer and the relay's answers: inside the closed
    // root only (a title or attribute on the host is the page's to read).
    const bar = root.querySelector('.bar');
    bar.dataset.status = env.status;
    bar.dataset.sent = '';
    bar.title = env.status === 'error' ? 'Not an envelope: ' + env.reason : env.status === 'hidden' ? 'Not sent: ' + env.reason
      : env.from + ' → ' + env.to + ' ' + (env.intent || '') + (env.pkid ? ' · key ' + env.pkid : '') +
        (env.fingerprint ? ' (' + env.fingerprint + ')' : '') + (env.reason ? ' · ' + env.reason : '');
    const st = root.querySelector('.st');
    // Who it verified as: the key id, so that a lookalike sender with a
    // key of its own does not pass as "✓ verified" alone.
    const signedBy = (env.status === 'verified' || env.status === 'first-use') && env.pkid ? ' · ' + env.pkid : '';
    st.textContent = (LABELS[env.status] || env.status) + signedBy;
    st.style.color = COLORS[env.status] || '#111';
    const sendB = root.querySelector('[data-crosstalk-action="send"]');
    const copyB = root.querySelector('[data-crosstalk-action="copy"]');
    if (env.status === 'error' || env.status === 'hidden') {
      sendB.disabled = copyB.disabled = true;
    }
    watch(sendB);
    watch(copyB);
    // Only the user's own clicks on what they see count: not the page's
    // scripts' (isTrusted false), nor a click on a control the page has
    // faded, restyled or covered with an element of its own.
    const refused = (e, button) => {
      const why = exposed(e, host, button);
      if (why && e.isTrusted) { toast('Not done: ' + why, true); }
      return why;
    };
    sendB.addEventListener('click', (e) => { if (!refused(e, sendB)) { doSend(host, false); } });
    copyB.addEventListener('click', async (e) => {
      if (refused(e, copyB)) { return; }
      const why = hiddenIn(host.__block, env.text);
      if (why) { toast('Not copied: ' + why, true); return; }
      const { text } = await ask({ type: 'fence', text: env.text });
      toast((await copy(text)) ? 'Copied ✓' : 'Could not copy', false);
    });
    return host;
  }

  function showSent(host, sent) {
    const root = roots.get(host);
    root.querySelector('.bar').dataset.sent = sent;
    const words = { hidden: 'not sent: hidden text', ok: 'sent ✓', duplicate: 'already in the ledger', offline: 'copied (relay unreachable)', differs: 'not sent: the relay holds another envelope under its id' };
    root.querySelector('.sent').textContent = words[sent] || sent;
  }

  async function doSend(host, auto) {
    const env = host.__env;
    // Again now: the page may have hidden the envelope, or a line of it,
    // since it was checked.
    const why = hiddenIn(host.__block, env.text);
    if (why) {
      showSent(host, 'hidden');
      toast('Not sent: ' + why, true);
      return;
    }
    let r;
    try {
      r = await ask({ type: 'send', text: env.text, key: host.__key, auto });
    } catch (e) {
      showSent(host, 'error');
      toast('Not sent: ' + e.message, true);
      return;
    }
    if (r.sent === 'offline') {
      const copied = await copy(r.fenced);
      showSent(host, 'offline');
      toast('Relay unreachable: ' + (copied ? 'the envelope is on the clipboard, fenced' : r.error), true);
      return;
    }
    showSent(host, r.sent);
    if (r.skipped) { return; }
    if (r.sent === 'ok') { toast('Sent ✓'); } else if (r.sent === 'duplicate') { toast('Already in the ledger ✓'); } else { toast('Not sent: ' + r.sent + (r.error ? ' — ' + r.error : ''), true); }
  }

  // ---- into the page --------------------------------------------------------
  function composer() {
    const a = document.activeElement;
    if (a && !isOurs(a) && (a.tagName === 'TEXTAREA' || a.isContentEditable)) { return a; }
    const all = [...document.querySelectorAll(COMPOSERS)].filter((e) => !isOurs(e) && e.offsetParent !== null && !e.disabled && !e.readOnly);
    return all[all.length - 1] || null;
  }

  function insertInto(el, text) {
    el.focus();
    if (el.tagName === 'TEXTAREA' || el.tagName === 'INPUT') {
      const proto = el.tagName === 'TEXTAREA' ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
      const setter = Object.getOwnPropertyDescriptor(proto, 'value').set; // React tracks value through it
      const before = el.value && !el.value.endsWith('\n') ? el.value + '\n' : el.value;
      setter.call(el, before + text);
      el.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'insertText', data: text }));
      el.dispatchEvent(new Event('change', { bubbles: true }));
      return;
    }
    const sel = window.getSelection();
    const range = document.createRange();
    range.selectNodeContents(el);
    range.collapse(false);
    sel.removeAllRanges();
    sel.addRange(range);
    // Rich editors (ProseMirror, Lexical) handle insertText themselves and
    // fire input; the fallback sets the text and fires input by hand.
    if (!document.execCommand('insertText', false, text) || !(el.innerText || '').includes(text.split('\n')[1] || text)) {
      el.textContent = (el.textContent || '') + text;
      el.dispatchEvent(new InputEvent('input', { bubbles: true, inputType: 'insertText', data: text }));
    }
  }

  function textOf(el) { return el.tagName === 'TEXTAREA' || el.tagName === 'INPUT' ? el.value : el.innerText || ''; }

  async function insertNext(submit) {
    if (!state.site.agent) {
      toast('crosstalk: this site has no agent (options: site → agent)', true);
      return;
    }
    const el = composer();
    if (!el) { toast('crosstalk: no composer found on this page', true); return; }
    let r;
    try {
      r = await ask({ type: 'next', agent: state.site.agent });
    } catch (e) {
      toast('Not inserted: ' + e.message, true);
      return;
    }
    if (r.none) { toast('Nothing waits for ' + state.site.agent); return; }
    insertInto(el, r.fenced);
    state.pending = { el, group: r.group, event_id: r.event_id, marker: r.message || r.text.split('\n')[0] };
    toast('Inserted ✓');
    if (submit) {
      const btn = [...document.querySelectorAll(SEND_BUTTONS)].filter((b) => !isOurs(b) && !b.disabled).pop();
      if (btn) {
        btn.click();
      } else {
        el.dispatchEvent(new KeyboardEvent('keydown', { key: 'Enter', code: 'Enter', keyCode: 13, bubbles: true }));
      }
    }
    watchPending();
  }

  // watchPending marks the inserted envelope delivered once the user has
  // sent it: the composer no longer holds it.
  function watchPending() {
    const p = state.pending;
    if (!p) { return; }
    if (p.el.isConnected && textOf(p.el).includes(p.marker)) { return; }
    state.pending = null;
    ask({ type: 'delivered', group: p.group, event_id: p.event_id, agent: state.site.agent })
      .then(() => refreshWaiting())
      .catch((e) => toast('crosstalk: could not mark delivered: ' + e.message, true));
  }

  let insertHost = null;
  async function refreshWaiting() {
    if (!state.site.agent) { return; }
    let n = 0;
    try { n = (await ask({ type: 'waiting', agent: state.site.agent })).count || 0; } catch (e) { n = 0; }
    if (!insertHost) {
      insertHost = document.createElement('div');
      insertHost.setAttribute('data-crosstalk-insert', '');
      const root = insertHost.attachShadow({ mode: 'closed' });
      roots.set(insertHost, root);
      root.innerHTML = '<style>:host{all:initial;position:fixed;z-index:2147483646;right:16px;top:16px;font:13px system-ui,sans-serif}' +
        'button{font:inherit;border:1px solid #2563eb;color:#fff;background:#2563eb;border-radius:999px;padding:4px 12px;cursor:pointer;box-shadow:0 2px 6px #0003}' +
        'button[hidden]{display:none}</style>' +
        '<button data-crosstalk-action="insert" type="button" hidden></button>';
      pin(insertHost, { position: 'fixed', 'z-index': '2147483646', right: '16px', top: '16px', display: 'block' });
      const b = root.querySelector('button');
      watch(b);
      b.addEventListener('mousedown', (e) => e.preventDefault()); // keep the composer's focus
      b.addEventListener('click', (e) => {
        const why = exposed(e, insertHost, b);
        if (why) {
          if (e.isTrusted) { toast('Not inserted: ' + why, true); }
          return;
        }
        insertNext(false);
      });
      document.documentElement.appendChild(insertHost);
    }
    // How many wait, and whether any: inside the closed root only.
    const b = roots.get(insertHost).querySelector('button');
    b.dataset.waiting = String(n);
    b.hidden = n === 0;
    b.textContent = 'Insert for ' + state.site.agent + ' (' + n + ')';
  }

  // view describes our controls for the extension's tests (see the 'view'
  // message): what each shows, and where its buttons are, in the
  // viewport, for a driver's real (trusted) clicks.
  function view(within) {
    const at = (b) => {
      const r = b.getBoundingClientRect();
      return { x: r.left + r.width / 2, y: r.top + r.height / 2, visible: watcher ? seen.get(b) === true : null };
    };
    const controls = state.controls.filter((c) => c.isConnected && (!within || c.closest(within)))
      .sort((a, b) => (a.compareDocumentPosition(b) & Node.DOCUMENT_POSITION_FOLLOWING ? -1 : 1))
      .map((c) => {
        const root = roots.get(c);
        const bar = root.querySelector('.bar');
        const send = root.querySelector('[data-crosstalk-action="send"]');
        const message = c.closest('[data-message-id]');
        return {
          id: c.getAttribute('data-crosstalk-envelope'), message: message ? message.getAttribute('data-message-id') : null,
          status: bar.dataset.status, sent: bar.dataset.sent, title: bar.title, label: root.querySelector('.st').textContent,
          disabled: send.disabled, send: at(send), copy: at(root.querySelector('[data-crosstalk-action="copy"]')),
        };
      });
    const ins = insertHost && roots.get(insertHost).querySelector('button');
    return { controls, toast: lastToast, waiting: ins ? +ins.dataset.waiting : null, insert: ins && !ins.hidden ? at(ins) : null };
  }

  // ---- commands from the background (keyboard shortcuts) --------------------
  chrome.runtime.onMessage.addListener((msg, sender, sendResponse) => {
    // What this script holds, for the extension's tests: only the
    // extension itself can message a content script, never the page.
    if (msg && msg.type === 'stats') {
      sendResponse({ blocks: state.blocks.size, keys: state.keys.size, controls: state.controls.length });
      return false;
    }
    if (msg && msg.type === 'view') {
      sendResponse(view(msg.within));
      return false;
    }
    if (!msg || msg.type !== 'command') { return false; }
    if (msg.command === 'insert-next') { insertNext(true); }
    if (msg.command === 'copy-last') {
      const last = state.controls.filter((c) => c.isConnected && sendable(c) && !hiddenIn(c.__block, c.__env.text)).pop();
      if (!last) { toast('No envelope on this page', true); return false; }
      ask({ type: 'fence', text: last.__env.text }).then(async (r) => toast((await copy(r.text)) ? 'Copied ✓' : 'Could not copy', false));
    }
    if (msg.command === 'send-all') {
      for (const c of state.controls) { if (c.isConnected && sendable(c)) { doSend(c, false); } }
    }
    return false;
  });

  async function start() {
    try {
      state.site = await ask({ type: 'site', host: location.host });
    } catch (e) {
      return; // the extension was reloaded; this script is orphaned
    }
    if (state.site.isRelay) { return; } // the relay's own web inbox shows envelopes itself
    document.documentElement.setAttribute('data-crosstalk-ready', '');
    const ours = (n) => n.nodeType === 1 && isOurs(n);
    new MutationObserver((muts) => {
      if (muts.every((m) => isOurs(m.target.nodeType === 1 ? m.target : m.target.parentElement || document.body) ||
        (m.type === 'childList' && [...m.addedNodes, ...m.removedNodes].every(ours) && m.addedNodes.length + m.removedNodes.length > 0))) { return; }
      schedule(100);
      if (state.pending) { watchPending(); }
    }).observe(document.body, { childList: true, subtree: true, characterData: true });
    document.addEventListener('input', () => { if (state.pending) { watchPending(); } }, true);
    // A message off screen in a content-visibility: auto list has no
    // layout, hence no innerText, until it is drawn, which changes no DOM:
    // look again when it is.
    document.addEventListener('contentvisibilityautostatechange', (e) => { if (!e.skipped) { schedule(100); } }, true);
    scan();
    refreshWaiting();
    setInterval(refreshWaiting, 15000);
  }
  start();
})();
