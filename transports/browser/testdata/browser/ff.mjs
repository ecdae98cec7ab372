// ff.mjs runs the scenarios of ext.mjs in Debian's headless firefox-esr,
// driven over Marionette (marionette.mjs), with the unpacked extension
// installed as a temporary add-on. It is run by transports/browser's
// TestExtensionFirefox (node ff.mjs), never by hand, with the environment
// of ext.mjs plus FIREFOX (the binary), and prints the same JSON object:
// {"checks":[{name, ok, detail}]}. The toolbar badge, the long
// conversation and the hostile page's later envelopes (a second text under
// a sent message id, a line hidden after the check, a content-visibility
// list) are checked in Chromium only.
import crypto from 'node:crypto';
import { Marionette } from './marionette.mjs';

const env = process.env;
const seed = JSON.parse(env.SEED || '{}');
const checks = [];
function check(name, ok, detail) {
  checks.push({ name, ok: !!ok, detail: ok ? '' : String(detail === undefined ? '' : detail) });
}
let m;
async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    let at = '';
    try { const u = await m.cmd('WebDriver:GetCurrentURL'); at = ' (at ' + (u.value || u) + ')'; } catch (e2) { /* no page */ }
    check(name, false, ((e && e.stack) || e) + at);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const hostOf = (u) => new URL(u).host;
const ID = 'crosstalk@crosstalk-go.github.io';
const uuid = crypto.randomUUID();
const ext = 'moz-extension://' + uuid + '/';

const sel = (id) => '[data-crosstalk-envelope="' + id + '"]';
const clickIn = async (hostCSS, css) => m.click(await m.findInShadow(hostCSS, css));
const attr = (css, name) => m.script('const e = document.querySelector(arguments[0]); return e && e.getAttribute(arguments[1]);', [css, name]);
// The controls' shadow roots are closed and the page's DOM says nothing of
// what they show; WebDriver reaches a closed root (GetShadowRoot), the
// page's scripts do not. inRoot reads an attribute or property of the
// element css inside the root of the element hostCSS; poll retries fn
// until it returns a truthy value.
const value = (r) => (r && typeof r === 'object' && 'value' in r ? r.value : r);
async function inRoot(hostCSS, css, name, property = false) {
  const id = await m.findInShadow(hostCSS, css);
  return value(await m.cmd(property ? 'WebDriver:GetElementProperty' : 'WebDriver:GetElementAttribute', { id, name }));
}
const statusOf = (hostCSS) => inRoot(hostCSS, '.bar', 'data-status');
const sentOf = (id) => inRoot(sel(id), '.bar', 'data-sent');
async function poll(fn, timeout = 10000, what = String(fn)) {
  for (const deadline = Date.now() + timeout; ; await sleep(100)) {
    const v = await fn().catch(() => null);
    if (v) { return v; }
    if (Date.now() > deadline) { throw new Error('timed out waiting for: ' + what); }
  }
}
const hostsIn = (css) => m.script('return document.querySelectorAll(arguments[0]).length', [css]);
const waiting = () => inRoot('[data-crosstalk-insert]', 'button', 'data-waiting').then((n) => (n === null || n === undefined ? null : +n));
const lastToast = () => m.script('return 0').then(() => inRoot('[data-crosstalk-toasts]', 'div:last-of-type', 'textContent', true));
const go = (url) => m.cmd('WebDriver:Navigate', { url });

// openExtensionPage opens moz-extension://…/path in a new tab and switches
// to it (Marionette's Navigate refuses moz-extension:// URLs); it returns
// the tab's handle.
async function openExtensionPage(path) {
  await m.cmd('Marionette:SetContext', { value: 'chrome' });
  await m.script('const w = Services.wm.getMostRecentWindow("navigator:browser");' +
    'w.gBrowser.selectedTab = w.gBrowser.addTab(arguments[0], { triggeringPrincipal: Services.scriptSecurityManager.getSystemPrincipal() });', [ext + path]);
  await m.cmd('Marionette:SetContext', { value: 'content' });
  const hr = await m.cmd('WebDriver:GetWindowHandles');
  const handles = Array.isArray(hr) ? hr : hr.value;
  const handle = handles[handles.length - 1];
  await m.cmd('WebDriver:SwitchToWindow', { handle });
  await m.waitFor('return location.href.endsWith(arguments[0]) && document.readyState === "complete"', [path]);
  return handle;
}
// inExtension runs an async script (its last argument is the callback) in
// an extension page opened in a new tab, closes the tab and switches back.
async function inExtension(script, args = []) {
  const back = await m.cmd('WebDriver:GetWindowHandle');
  await openExtensionPage('popup.html');
  try {
    return await asyncScript(script, args);
  } finally {
    await m.cmd('WebDriver:CloseWindow');
    await m.cmd('WebDriver:SwitchToWindow', { handle: back.value || back });
  }
}
const tabScript = 'const want = arguments[0]; const tab = () => chrome.tabs.query({}).then((ts) => { const t = ts.find((x) => (x.url || "").startsWith(want));' +
  'if (!t) { throw new Error("no tab " + want); } return t; });';
const asyncScript = (script, args = []) => m.cmd('WebDriver:ExecuteAsyncScript', { script, args }).then((r) => (r && 'value' in r ? r.value : r));

const started = Date.now();
try {
  m = await Marionette.launch({
    binary: env.FIREFOX || 'firefox-esr', profile: env.USER_DATA_DIR,
    prefs: { 'extensions.webextensions.uuids': JSON.stringify({ [ID]: uuid }), 'dom.events.testing.asyncClipboard': true,
      'network.dns.localDomains': new URL(env.PAGES_SITE).hostname },
  });
  await m.cmd('Addon:Install', { path: env.EXT, temporary: true });

  await step('options: relay, token, sites, test connection, save', async () => {
    await openExtensionPage('options.html');
    await m.waitFor('return location.href.endsWith("options.html") && document.querySelectorAll("#sites tr").length > 0');
    const type = async (css, text) => {
      const el = await m.find(css);
      await m.cmd('WebDriver:ElementClear', { id: el });
      await m.cmd('WebDriver:ElementSendKeys', { id: el, text });
    };
    await type('input[name=relay]', env.RELAY_URL);
    while (await m.script('return document.querySelectorAll("#sites .remove").length')) { await m.click(await m.find('#sites .remove')); }
    // PAGES_SITE is plain http, which a site gets only when the user says
    // so; SECURE_SITE, named without a scheme, is https only.
    for (const [site, agent, auto] of [[hostOf(env.PAGES), 'chatgpt', false], [hostOf(env.PAGES_AUTO), 'claude', true],
      ['http://' + hostOf(env.PAGES_SITE), 'gemini', false], [env.SECURE_SITE, 'claude', false]]) {
      await m.click(await m.find('#add'));
      await type('#sites tr:last-child input[name=site]', site);
      await type('#sites tr:last-child input[name=agent]', agent);
      if (auto) { await m.click(await m.find('#sites tr:last-child input[name=auto]')); }
    }
    await type('input[name=token]', 'ctk_wrong');
    await m.click(await m.find('#test'));
    await m.waitFor('return document.getElementById("test-result").dataset.ok !== undefined');
    check('test connection refuses a wrong token', await attr('#test-result', 'data-ok') === 'false', await m.script('return document.getElementById("test-result").textContent'));
    await type('input[name=token]', env.TOKEN);
    await m.click(await m.find('#test'));
    await m.waitFor('return document.getElementById("test-result").dataset.ok === "true"', [], 5000, 'Test connection to succeed');
    await m.click(await m.find('button[type=submit]'));
    await m.waitFor('return document.getElementById("saved").textContent !== ""');
    const stored = await asyncScript('const done = arguments[arguments.length - 1]; chrome.storage.local.get(["relay", "token", "sites"]).then(done, (e) => done(String(e)));').catch((e) => String(e));
    check('options saved in storage.local', stored && stored.relay === env.RELAY_URL && stored.token === env.TOKEN && stored.sites.length === 4 &&
      stored.sites[1].auto === true, JSON.stringify(stored));
  });

  await step('a site of the options that is not loopback gets the content script', async () => {
    const want = 'http://' + new URL(env.PAGES_SITE).hostname + '/*';
    const registered = await inExtension('const want = arguments[0]; const done = arguments[arguments.length - 1]; const deadline = Date.now() + 10000;' +
      'const poll = () => chrome.scripting.getRegisteredContentScripts().then((cs) => cs.some((c) => c.matches.includes(want)) ? done(true) :' +
      ' Date.now() > deadline ? done(JSON.stringify(cs)) : setTimeout(poll, 50), (e) => done(String(e)));' +
      'poll();', [want]);
    check('content script registered for the site', registered === true, registered);
    const matches = await inExtension('const done = arguments[arguments.length - 1];' +
      'chrome.scripting.getRegisteredContentScripts().then((cs) => done(cs.flatMap((c) => c.matches)), (e) => done(String(e)));');
    check('a site named without a scheme gets the content script on https only', Array.isArray(matches) &&
      matches.includes('https://' + env.SECURE_SITE + '/*') && !matches.includes('http://' + env.SECURE_SITE + '/*') &&
      !matches.includes('https://' + new URL(env.PAGES_SITE).hostname + '/*'), JSON.stringify(matches));
    await go(env.PAGES_SITE + '/strict.html');
    await m.waitFor('return document.querySelector("[data-crosstalk-envelope]")', [], 15000, 'a control on the enabled site');
    check('enabled site: status', await statusOf('[data-crosstalk-envelope]') === 'unsigned', '');
  });

  await step('detection: code block, <br> paragraph, quote, pre-wrap text; statuses', async () => {
    await go(env.PAGES + '/chat.html');
    const want = seed.chat;
    await m.waitFor('return document.querySelectorAll("[data-crosstalk-envelope]").length >= arguments[0]', [want.length], 15000, 'the controls');
    const got = await m.script('return [...document.querySelectorAll("[data-crosstalk-envelope]")].map((e) => ({' +
      'id: e.getAttribute("data-crosstalk-envelope"), message: e.closest("[data-message-id]") && e.closest("[data-message-id]").dataset.messageId }))');
    for (const g of got) {
      Object.assign(g, { status: await statusOf(sel(g.id)), sent: await sentOf(g.id), title: await inRoot(sel(g.id), '.bar', 'title') });
    }
    check('one control per envelope', got.length === want.length, JSON.stringify(got));
    for (const w of want) {
      const g = got.find((x) => x.id === w.id);
      check('status ' + w.status + ' in ' + w.message, g && g.status === w.status && g.message === w.message && g.sent === '',
        JSON.stringify(g) + ' want ' + JSON.stringify(w));
      if (w.status === 'error') { check('error title names the line from the header', g && /line 3 of the envelope/.test(g.title), g && g.title); }
    }
  });

  const byStatus = (s) => seed.chat.find((w) => w.status === s).id;
  const waitSent = (id, v) => poll(async () => await sentOf(id) === v, 5000, id + ' sent ' + v);
  await step('send → ok, again → duplicate', async () => {
    const id = byStatus('unsigned');
    await clickIn(sel(id), '[data-crosstalk-action="send"]');
    await waitSent(id, 'ok');
    await clickIn(sel(id), '[data-crosstalk-action="send"]');
    await waitSent(id, 'duplicate');
    const fu = byStatus('first-use');
    await clickIn(sel(fu), '[data-crosstalk-action="send"]');
    await waitSent(fu, 'ok');
    const tampered = byStatus('invalid');
    await clickIn(sel(tampered), '[data-crosstalk-action="send"]');
    await poll(async () => await sentOf(tampered) !== '', 5000, 'the tampered envelope answered');
    const v = await sentOf(tampered);
    check('the relay refuses the tampered envelope', v !== 'ok' && v !== 'duplicate', v);
  });

  await step("the page's own scripts cannot press Send", async () => {
    const id = byStatus('unknown-key');
    const seen = await m.script('return [...document.querySelectorAll("[data-crosstalk-envelope], [data-crosstalk-toasts], [data-crosstalk-insert]")].map((e) => ({' +
      'root: e.shadowRoot !== null, attrs: e.getAttributeNames().filter((a) => !["data-crosstalk-envelope", "data-crosstalk-toasts", "data-crosstalk-insert", "style"].includes(a)),' +
      'title: e.title, text: e.textContent }))');
    check('the page cannot reach a control\'s shadow root', seen.length >= seed.chat.length && seen.every((e) => !e.root), JSON.stringify(seen));
    check('the page cannot read a status or the relay\'s answer from the DOM', seen.every((e) => e.attrs.length === 0 && e.title === '' && e.text === ''), JSON.stringify(seen));
    await m.script('const h = document.querySelector(arguments[0]); const b = h.shadowRoot && h.shadowRoot.querySelector("[data-crosstalk-action=send]"); if (b) { b.click(); } h.click();', [sel(id)]);
    await sleep(300);
    check('a synthetic click sends nothing (yet)', await sentOf(id) === '', '');
    await clickIn(sel(id), '[data-crosstalk-action="send"]');
    await poll(async () => await sentOf(id) !== '', 5000, 'the user\'s click answered');
  });

  await step('strict CSP page: verified by the background', async () => {
    await go(env.PAGES + '/strict.html');
    await m.waitFor('return document.querySelector("[data-crosstalk-envelope]")', [], 15000, 'a control');
    check('strict page status', await statusOf('[data-crosstalk-envelope]') === 'unsigned', '');
  });

  await step('streaming message: nothing until [[END]] is there and stable', async () => {
    await go(env.PAGES + '/stream.html');
    await m.waitFor('return document.documentElement.hasAttribute("data-crosstalk-ready")');
    const text = seed.stream;
    const end = text.indexOf('[[END]]');
    for (let i = 0; i < end; i += 40) {
      await m.script('document.getElementById("stream").textContent += arguments[0]', [text.slice(i, Math.min(i + 40, end))]);
      await sleep(60);
    }
    await sleep(1200); // more than the extension's stability wait
    check('no control while [[END]] is missing', await m.script('return document.querySelectorAll("[data-crosstalk-envelope]").length') === 0, '');
    await m.script('document.getElementById("stream").textContent += arguments[0]', [text.slice(end)]);
    await m.waitFor('return document.querySelector("[data-crosstalk-envelope]")', [], 10000, 'a control');
    check('one control once complete', await m.script('return document.querySelectorAll("[data-crosstalk-envelope]").length') === 1 &&
      await statusOf('[data-crosstalk-envelope]') === 'unsigned', '');
  });

  const waitingIs = (n) => poll(async () => await waiting() === n, 10000, 'waiting ' + n);
  for (const [name, path, rich] of [['textarea', '/composer.html', false], ['contenteditable', '/composer.html?rich=1', true]]) {
    await step('insert into ' + name + ', delivered when the page sends it', async () => {
      await go(env.PAGES + path);
      const before = await poll(async () => { const n = await waiting(); return n > 0 && n; }, 10000, 'the Insert control');
      await clickIn('[data-crosstalk-insert]', '[data-crosstalk-action="insert"]');
      const want = seed.waiting[seed.waiting.length - before];
      const content = await m.waitFor('const b = document.querySelector("#prompt-textarea, #composer"); const t = b.value !== undefined ? b.value : b.innerText; return t.includes(arguments[0]) && t', [want.message], 5000, 'the inserted envelope');
      check(name + ': the oldest envelope, fenced', content.trimStart().startsWith('```') && content.includes(want.body) && content.includes('[[END]]'), content);
      check(name + ': input event fired', +(await m.script('return document.body.dataset.inputs')) > 0, '');
      await m.click(await m.find('[data-testid=send-button]'));
      await waitingIs(before - 1);
      check(name + ': marked delivered', true, '');
    });
  }

  await step('keyboard shortcut: insert and send the next envelope', async () => {
    await go(env.PAGES + '/composer.html');
    await waitingIs(1);
    // Marionette's key actions reach the page, not the browser window's
    // shortcut handling: check that Firefox registered the shortcut, then
    // deliver the command to the tab as the background does.
    const cmds = await inExtension('const done = arguments[arguments.length - 1]; chrome.commands.getAll().then(done, (e) => done(String(e)));');
    const ins = Array.isArray(cmds) && cmds.find((c) => c.name === 'insert-next');
    check('insert-next has a shortcut', ins && ins.shortcut === 'Alt+Shift+I', JSON.stringify(cmds));
    const delivered = await inExtension(tabScript + 'const done = arguments[arguments.length - 1];' +
      'tab().then((t) => chrome.tabs.sendMessage(t.id, { type: "command", command: "insert-next" })).then(() => done(true), (e) => done(String(e)));',
    [env.PAGES + '/composer.html']);
    check('the command reached the tab', delivered === true, delivered);
    await m.waitFor('return +document.body.dataset.sent > 0', [], 5000, 'the page to send');
    const sent = await m.script('const p = document.querySelectorAll(".message[data-role=user] pre"); return p.length ? p[p.length - 1].innerText : ""');
    check('insert-next inserted and sent the last waiting envelope (via command)', sent.includes(seed.waiting[2].body), sent);
    await waitingIs(0);
  });

  await step('an agent named outside Latin-1 is marked delivered', async () => {
    // From an extension page, as the options page would: the agent is the
    // message's.
    const r = await inExtension('const agent = arguments[0]; const done = arguments[arguments.length - 1]; const ask = (m) => chrome.runtime.sendMessage(m);' +
      '(async () => { const next = await ask({ type: "next", agent }); if (!next.event_id) { return { next }; }' +
      'const res = await ask({ type: "delivered", agent, group: next.group, event_id: next.event_id });' +
      'return { res, after: (await ask({ type: "waiting", agent })).count }; })().then(done, (e) => done({ error: String(e) }));', [seed.intl]);
    check('delivered for ' + seed.intl, r && r.res && r.res.ok === true && r.after === 0, JSON.stringify(r));
  });

  await step('popup: the last exchanges of the tab\'s agent', async () => {
    await go(env.PAGES + '/composer.html');
    const id = await inExtension(tabScript + 'const done = arguments[arguments.length - 1]; tab().then((t) => done(t.id), (e) => done(String(e)));', [env.PAGES + '/composer.html']);
    const back = await m.cmd('WebDriver:GetWindowHandle');
    await openExtensionPage('popup.html?tab=' + id);
    await m.waitFor('return document.querySelectorAll("#items li").length > 0', [], 10000, 'the exchanges');
    const who = await m.script('return document.getElementById("who").textContent');
    const items = await m.script('return [...document.querySelectorAll("#items li")].map((li) => li.textContent)');
    check('popup names the agent', /speaks for CHATGPT/.test(who), who);
    check('popup lists what CHATGPT received', items.length === seed.waiting.length && seed.waiting.every((w) => items.some((i) => i.includes(w.body))), JSON.stringify(items));
    await m.cmd('WebDriver:CloseWindow');
    await m.cmd('WebDriver:SwitchToWindow', { handle: back.value || back });
  });

  await step('copy the last envelope of the page, fenced (command)', async () => {
    await go(env.PAGES + '/chat.html');
    await m.waitFor('return document.querySelectorAll("[data-crosstalk-envelope]").length >= arguments[0]', [seed.chat.length], 15000, 'the controls');
    const sent = await inExtension(tabScript + 'const done = arguments[arguments.length - 1]; tab().then((t) => chrome.tabs.sendMessage(t.id, { type: "command", command: "copy-last" })).then(() => done(true), (e) => done(String(e)));', [env.PAGES + '/chat.html']);
    check('the copy-last command reached the tab', sent === true, sent);
    await poll(async () => await lastToast() === 'Copied ✓', 5000, 'Copied ✓');
    const clip = await asyncScript('const done = arguments[arguments.length - 1]; navigator.clipboard.readText().then(done, (e) => done("ERR " + e));');
    const last = seed.chat[seed.chat.length - 1].id;
    check('clipboard holds the last envelope, fenced', clip.startsWith('```\n[[') && clip.includes(last) && clip.trimEnd().endsWith('```'), clip);
  });

  await step('relay unreachable: the clipboard fallback', async () => {
    await inExtension('const done = arguments[arguments.length - 1]; chrome.storage.local.set({ relay: "http://127.0.0.1:9" }).then(() => done(true));');
    await go(env.PAGES + '/strict.html');
    await m.waitFor('return document.querySelector("[data-crosstalk-envelope]")', [], 15000, 'a control');
    await clickIn('[data-crosstalk-envelope]', '[data-crosstalk-action="send"]');
    await poll(async () => await inRoot('[data-crosstalk-envelope]', '.bar', 'data-sent') === 'offline', 10000, 'sent offline');
    const clip = await asyncScript('const done = arguments[arguments.length - 1]; navigator.clipboard.readText().then(done, (e) => done("ERR " + e));');
    check('fenced envelope on the clipboard', clip.startsWith('```\n[[') && clip.includes('[[END]]'), clip);
    await inExtension('const done = arguments[arguments.length - 1]; chrome.storage.local.set({ relay: arguments[0] }).then(() => done(true));', [env.RELAY_URL]);
  });

  await step('options: forget a sender\'s keys', async () => {
    const back = await m.cmd('WebDriver:GetWindowHandle');
    await openExtensionPage('options.html');
    await m.waitFor('return document.querySelector(\'#keys tr[data-sender="CLAUDE"]\')', [], 5000, "CLAUDE's keys");
    await m.click(await m.find('#keys tr[data-sender="CLAUDE"] button.forget'));
    await m.waitFor('return /Forgot 1 key/.test(document.getElementById("keys-result").textContent)', [], 5000, 'Forgot 1 key');
    const status = await asyncScript('const done = arguments[arguments.length - 1]; chrome.runtime.sendMessage({ type: "check", text: arguments[0] })' +
      '.then((r) => done(r.envelopes ? r.envelopes.map((e) => e.status).join() : JSON.stringify(r)), (e) => done(String(e)));', [seed.keyChanged]);
    check('the rotated key is a first use after Forget', status === 'first-use', status);
    await m.cmd('WebDriver:CloseWindow');
    await m.cmd('WebDriver:SwitchToWindow', { handle: back.value || back });
  });

  await step('auto mode sends each envelope once, also after a reload', async () => {
    await go(env.PAGES_AUTO + '/auto.html');
    const n = seed.auto.length;
    const allSent = async () => {
      const ids = await m.script('return [...document.querySelectorAll("[data-crosstalk-envelope]")].map((e) => e.getAttribute("data-crosstalk-envelope"))');
      if (ids.length !== n) { return false; }
      for (const id of ids) { if (await sentOf(id) !== 'ok') { return false; } }
      return true;
    };
    await poll(allSent, 15000, 'auto sends');
    await m.cmd('WebDriver:Refresh');
    await poll(allSent, 15000, 'auto after reload');
    check('auto mode', true, '');
  });
  await step('a hostile page: what it hides is not sent, a differing resend is not "already in the ledger"', async () => {
    await go(env.PAGES_AUTO + '/hostile.html');
    // The page's own element wearing data-crosstalk-envelope (h-ours) has
    // no shadow root: WebDriver finds none, so it is not counted.
    const got = async (msg) => {
      // Our controls sit beside the envelope's block, children of the message.
      const n = await hostsIn('[data-message-id="' + msg + '"] > [data-crosstalk-envelope]');
      const out = [];
      for (let i = 1; i <= n; i++) {
        const host = '[data-message-id="' + msg + '"] > [data-crosstalk-envelope]:nth-of-type(' + i + ')';
        const bar = await statusOf(host).catch(() => null);
        if (bar === null) { continue; }
        out.push(bar + '/' + await inRoot(host, '.bar', 'data-sent') + (await inRoot(host, '[data-crosstalk-action=send]', 'disabled', true) ? '/disabled' : ''));
      }
      return out;
    };
    await poll(async () => (await got('h-ok')).length && (await got('h-differs')).length && !(await got('h-ok'))[0].endsWith('/') &&
      !(await got('h-differs'))[0].endsWith('/'), 15000, 'hostile page sent');
    check('the envelope the page shows is sent', (await got('h-ok')).join() === 'unsigned/ok', await got('h-ok'));
    for (const id of ['h-none', 'h-faded']) {
      check('an envelope the page hides (' + id + ') gets no control', (await got(id)).length === 0, await got(id));
    }
    for (const id of ['h-tiny', 'h-clear', 'h-away', 'h-ours']) {
      check('an envelope with a line the user cannot see (' + id + ') is marked hidden, not sent', (await got(id)).join() === 'hidden//disabled', await got(id));
    }
    check('a resend under a held message id with another body says differs', (await got('h-differs')).join() === 'unsigned/differs', await got('h-differs'));
  });
} catch (e) {
  check('driver', false, (e && e.stack) || e);
} finally {
  if (m) { await m.quit(); }
}
process.stdout.write(JSON.stringify({ checks, seconds: (Date.now() - started) / 1000 }) + '\n');
