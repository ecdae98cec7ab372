// ext.mjs drives Debian's headless Chromium with the unpacked crosstalk
// extension against fixture chat pages and a relay that transports/browser's
// TestExtension started in-process. It is run by that test (node ext.mjs),
// never by hand. It prints one JSON object on stdout: {"checks":[{name, ok,
// detail}]}; the Go test turns every check into a subtest and then checks
// the relay's ledger.
//
// Environment: EXT (the unpacked extension), RELAY_URL, TOKEN, PAGES (the
// fixture pages on 127.0.0.1, mapped to CHATGPT), PAGES_AUTO (the same pages
// on localhost, mapped to CLAUDE with auto mode on), CHROMIUM,
// USER_DATA_DIR, SCREENSHOTS (a directory), SEED (JSON from the Go test).
import { chromium } from 'playwright-core';

const env = process.env;
const seed = JSON.parse(env.SEED || '{}');
const checks = [];
const metrics = {};
function check(name, ok, detail) {
  checks.push({ name, ok: !!ok, detail: ok ? '' : String(detail === undefined ? '' : detail) });
}
let current = null;
async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    const file = 'failed-' + name.replace(/\W+/g, '-') + '.png';
    if (current) { await current.screenshot({ path: env.SCREENSHOTS + '/' + file, fullPage: true }).catch(() => {}); }
    check(name, false, ((e && e.stack) || e) + (current ? ' (at ' + current.url() + ', ' + file + ')' : ''));
  }
}
const hostOf = (u) => new URL(u).host;

const ctx = await chromium.launchPersistentContext(env.USER_DATA_DIR, {
  executablePath: env.CHROMIUM || '/usr/lib/chromium/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update',
    '--disable-sync', '--disable-extensions-except=' + env.EXT, '--load-extension=' + env.EXT, '--host-resolver-rules=' + env.RESOLVE],
  viewport: { width: 1100, height: 900 },
});
const started = Date.now();
try {
  const sw = ctx.serviceWorkers()[0] ?? await ctx.waitForEvent('serviceworker', { timeout: 20000 });
  const extId = sw.url().split('/')[2];
  // The controls live in closed shadow roots and say nothing in the
  // page's DOM: the driver asks the content script (the 'view' message,
  // which only the extension can send) what they show and where their
  // buttons are, and clicks there with the mouse, as the user does.
  const tabs = new WeakMap();
  async function tabOf(page) {
    if (!tabs.has(page)) { tabs.set(page, await sw.evaluate(async (u) => (await chrome.tabs.query({})).find((t) => t.url === u).id, page.url())); }
    return tabs.get(page);
  }
  const view = async (page, within) => sw.evaluate(({ id, within }) => chrome.tabs.sendMessage(id, { type: 'view', within }), { id: await tabOf(page), within });
  // until returns the first view for which ok holds.
  async function until(page, ok, { within, timeout = 10000, what = String(ok) } = {}) {
    let v;
    for (const deadline = Date.now() + timeout; Date.now() < deadline; await page.waitForTimeout(100)) {
      v = await view(page, within).catch((e) => ({ error: String(e), controls: [] }));
      if (!v.error && ok(v)) { return v; }
    }
    throw new Error('timed out waiting for ' + what + ': ' + JSON.stringify(v).slice(0, 2000));
  }
  const controlIn = (v, id) => v.controls.find((c) => c.id === id);
  // press scrolls the control pick chooses into view, waits until the
  // browser reports its button drawn unobscured, and clicks it.
  // With force, it clicks where the button is, drawn or not.
  async function press(page, pick, action = 'send', within, force = false) {
    let c = pick(await until(page, (v) => !!pick(v), { within, what: 'the control' }));
    if (c[action].y < 40 || c[action].y > 860) {
      await page.evaluate((y) => window.scrollBy(0, y - 450), c[action].y);
    }
    c = pick(await until(page, (v) => { const x = pick(v); return x && (force || x[action].visible !== false); }, { within, what: action + ' drawn unobscured' }));
    await page.mouse.click(c[action].x, c[action].y);
  }
  const pressId = (page, id, action = 'send') => press(page, (v) => controlIn(v, id), action);
  const sentOf = async (page, id) => (controlIn(await view(page), id) || {}).sent;
  const waitSent = (page, id, sent) => until(page, (v) => (controlIn(v, id) || {}).sent === sent, { what: id + ' ' + sent });

  await step('options: relay, token, sites, test connection, save', async () => {
    const page = current = await ctx.newPage();
    await page.goto('chrome-extension://' + extId + '/options.html');
    await page.fill('input[name=relay]', env.RELAY_URL);
    // The default sites need host permissions (a prompt); these tests use loopback only.
    while (await page.locator('#sites .remove').count()) { await page.locator('#sites .remove').first().click(); }
    // PAGES_SITE is plain http, which a site gets only when the user says
    // so; SECURE_SITE, named without a scheme, is https only.
    const rows = [[hostOf(env.PAGES), 'chatgpt', false], [hostOf(env.PAGES_AUTO), 'claude', true], ['http://' + hostOf(env.PAGES_SITE), 'gemini', false],
      [env.SECURE_SITE, 'claude', false]];
    for (const [site, agent, auto] of rows) {
      await page.click('#add');
      const row = page.locator('#sites tr').last();
      await row.locator('input[name=site]').fill(site);
      await row.locator('input[name=agent]').fill(agent);
      if (auto) { await row.locator('input[name=auto]').check(); }
    }
    await page.fill('input[name=token]', 'ctk_wrong');
    await page.click('#test');
    await page.waitForFunction(() => document.getElementById('test-result').dataset.ok !== undefined);
    check('test connection refuses a wrong token', await page.locator('#test-result').getAttribute('data-ok') === 'false',
      await page.locator('#test-result').textContent());
    await page.fill('input[name=token]', env.TOKEN);
    await page.click('#test');
    await page.waitForFunction(() => document.getElementById('test-result').dataset.ok === 'true', null, { timeout: 5000 });
    await page.evaluate(() => {
      window.__asked = [];
      const request = chrome.permissions.request.bind(chrome.permissions);
      chrome.permissions.request = (p) => { window.__asked.push(...(p.origins || [])); return request(p); };
    });
    await page.click('button[type=submit]');
    await page.waitForFunction(() => document.getElementById('saved').textContent !== '');
    const asked = await page.evaluate(() => window.__asked);
    const secure = env.SECURE_SITE, plain = new URL(env.PAGES_SITE).hostname;
    check('save asks for https only, plain http where the site says http://',
      asked.includes('https://' + secure + '/*') && !asked.includes('http://' + secure + '/*') &&
      asked.includes('http://' + plain + '/*') && !asked.includes('https://' + plain + '/*'), JSON.stringify(asked));
    const stored = await sw.evaluate(() => chrome.storage.local.get(['relay', 'token', 'sites']));
    check('options saved in storage.local', stored.relay === env.RELAY_URL && stored.token === env.TOKEN && stored.sites.length === 4 &&
      stored.sites[0].agent === 'CHATGPT' && stored.sites[1].auto === true, JSON.stringify(stored));
    await page.screenshot({ path: env.SCREENSHOTS + '/extension-options.png' }); // docs/extension-options.png
    await page.close();
  });

  await step('a site of the options that is not loopback gets the content script', async () => {
    const want = 'http://' + new URL(env.PAGES_SITE).hostname + '/*';
    const registered = await sw.evaluate(async (want) => {
      for (const deadline = Date.now() + 10000; Date.now() < deadline;) {
        const cs = await chrome.scripting.getRegisteredContentScripts();
        if (cs.some((c) => c.matches.includes(want))) { return true; }
        await new Promise((r) => setTimeout(r, 50));
      }
      return JSON.stringify(await chrome.scripting.getRegisteredContentScripts());
    }, want);
    check('content script registered for the site', registered === true, registered);
    const matches = (await sw.evaluate(() => chrome.scripting.getRegisteredContentScripts())).flatMap((c) => c.matches);
    check('a site named without a scheme gets the content script on https only',
      matches.includes('https://' + env.SECURE_SITE + '/*') && !matches.includes('http://' + env.SECURE_SITE + '/*') &&
      !matches.includes('https://' + new URL(env.PAGES_SITE).hostname + '/*'), JSON.stringify(matches));
    const agents = await sw.evaluate(async (host) => {
      const site = (url) => dispatch({ type: 'site', host }, { id: chrome.runtime.id, url, tab: { id: -1 } }).then((r) => r.agent);
      return { https: await site('https://' + host + '/c/1'), http: await site('http://' + host + '/c/1') };
    }, env.SECURE_SITE);
    check('a page on the plain-http origin of an https site has no agent', agents.https === 'CLAUDE' && agents.http === '', JSON.stringify(agents));
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES_SITE + '/strict.html');
    await page.waitForSelector('[data-crosstalk-envelope]', { timeout: 15000 });
    check('enabled site: status', (await until(page, (v) => v.controls.length === 1)).controls[0].status === 'unsigned', '');
    await page.close();
  });

  const chat = current = await ctx.newPage();
  await step('detection: code block, <br> paragraph, quote, pre-wrap text; statuses', async () => {
    await chat.goto(env.PAGES + '/chat.html');
    const want = seed.chat; // [{id, status, message}] in page order
    await chat.waitForFunction((n) => document.querySelectorAll('[data-crosstalk-envelope]').length >= n, want.length, { timeout: 15000 });
    const got = (await until(chat, (v) => v.controls.length >= want.length)).controls;
    check('one control per envelope', got.length === want.length, JSON.stringify(got));
    for (const w of want) {
      const g = got.find((x) => x.id === w.id);
      check('status ' + w.status + ' in ' + w.message, g && g.status === w.status && g.message === w.message && g.sent === '',
        JSON.stringify(g) + ' want ' + JSON.stringify(w));
      if (w.status === 'error') {
        check('error title names the line from the header', g && /line 3 of the envelope/.test(g.title), g && g.title);
      }
      if (w.status === 'verified' || w.status === 'first-use') {
        const pkid = g && (/· key (\S+)/.exec(g.title) || [])[1];
        check(w.status + ' bar names the key id', !!pkid && g.label.endsWith(' · ' + pkid), g && g.label + ' / ' + g.title);
      }
    }
    await chat.screenshot({ path: env.SCREENSHOTS + '/chat.png', fullPage: true });
  });

  const byStatus = (s) => seed.chat.find((w) => w.status === s).id;
  await step('send → ok, again → duplicate', async () => {
    const id = byStatus('unsigned');
    await pressId(chat, id);
    await waitSent(chat, id, 'ok');
    await pressId(chat, id);
    await waitSent(chat, id, 'duplicate');
    check('toast after send', /Already in the ledger|Sent/.test((await view(chat)).toast), '');
    const fu = byStatus('first-use');
    await pressId(chat, fu);
    await waitSent(chat, fu, 'ok');
    const tampered = byStatus('invalid');
    await pressId(chat, tampered);
    const v = controlIn(await until(chat, (v) => (controlIn(v, tampered) || {}).sent !== ''), tampered).sent;
    check('the relay refuses the tampered envelope', v !== 'ok' && v !== 'duplicate', v);
    await chat.evaluate(() => window.scrollTo(0, 0));
    await chat.screenshot({ path: env.SCREENSHOTS + '/extension-chat.png' }); // docs/extension-chat.png
    check('an unparsable envelope has no Send', controlIn(await view(chat), byStatus('error')).disabled === true, '');
  });

  await step("the page's own scripts cannot press Send", async () => {
    const id = byStatus('unknown-key');
    // What the page's scripts see of the controls: hosts with closed
    // shadow roots, no status, no relay answer, no title, no text.
    const seen = await chat.evaluate(() => [...document.querySelectorAll('[data-crosstalk-envelope], [data-crosstalk-toasts], [data-crosstalk-insert]')].map((e) => ({
      root: e.shadowRoot !== null, attrs: e.getAttributeNames().filter((a) => a !== 'data-crosstalk-envelope' && a !== 'data-crosstalk-toasts' && a !== 'data-crosstalk-insert' && a !== 'style'),
      title: e.title, text: e.textContent,
    })));
    check('the page cannot reach a control\'s shadow root', seen.length >= seed.chat.length && seen.every((e) => !e.root), JSON.stringify(seen));
    check('the page cannot read a status or the relay\'s answer from the DOM', seen.every((e) => e.attrs.length === 0 && e.title === '' && e.text === ''), JSON.stringify(seen));
    // Nor click through a shadow root: the page finds none, and a click it
    // makes on the host reaches no button.
    const synthetic = await chat.evaluate((id) => {
      const host = document.querySelector('[data-crosstalk-envelope="' + id + '"]');
      const b = host.shadowRoot && host.shadowRoot.querySelector('[data-crosstalk-action="send"]');
      if (b) { b.click(); }
      host.click();
      return !!b;
    }, id);
    check('the page finds no Send button to click', !synthetic, '');
    await chat.waitForTimeout(300);
    check('a synthetic click sends nothing (yet)', await sentOf(chat, id) === '', await sentOf(chat, id));
    // Then the user's click: the Go test checks that the relay saw one POST.
    await pressId(chat, id);
    await until(chat, (v) => controlIn(v, id).sent !== '');
  });

  await step('the page cannot fade, restyle or cover a control and have the user click it', async () => {
    // The verified envelope (m7), never sent before: each click below
    // lands on its Send button, which the page has made invisible or
    // covered; none sends. Then, uncovered, the click sends (the Go test
    // checks that the relay saw exactly one POST of it).
    const id = byStatus('verified');
    await pressId(chat, id, 'copy'); // scrolls it into view; a copy sends nothing
    const tricks = {
      'host opacity 0 (inline, !important)': (id) => document.querySelector('[data-crosstalk-envelope="' + id + '"]').style.setProperty('opacity', '0', 'important'),
      'host scaled away': (id) => document.querySelector('[data-crosstalk-envelope="' + id + '"]').style.setProperty('transform', 'scale(0.01)', 'important'),
      'a faded message': (id) => document.querySelector('[data-crosstalk-envelope="' + id + '"]').closest('[data-message-id]').style.opacity = '0.02',
      'an overlay that lets clicks through': (id) => {
        const r = document.querySelector('[data-crosstalk-envelope="' + id + '"]').getBoundingClientRect();
        const o = document.createElement('div');
        o.id = 'overlay';
        o.textContent = 'Click to continue';
        o.style.cssText = 'position:fixed;z-index:2147483647;pointer-events:none;background:#fff;left:' + (r.left - 4) + 'px;top:' + (r.top - 4) + 'px;width:' + (r.width + 8) + 'px;height:' + (r.height + 8) + 'px';
        document.body.appendChild(o);
      },
    };
    const undo = (id) => {
      const host = document.querySelector('[data-crosstalk-envelope="' + id + '"]');
      host.style.removeProperty('opacity');
      host.style.removeProperty('transform');
      host.style.setProperty('opacity', '1', 'important');
      host.style.setProperty('transform', 'none', 'important');
      host.closest('[data-message-id]').style.opacity = '';
      const o = document.getElementById('overlay');
      if (o) { o.remove(); }
    };
    for (const [name, trick] of Object.entries(tricks)) {
      await chat.evaluate(trick, id);
      await chat.waitForTimeout(300); // the browser's next visibility report
      await press(chat, (v) => controlIn(v, id), 'send', undefined, true);
      await chat.waitForTimeout(500);
      const v = await view(chat);
      check(name + ': the click sends nothing', controlIn(v, id).sent === '' && /^Not done: /.test(v.toast), controlIn(v, id).sent + ' / ' + v.toast);
      await chat.evaluate(undo, id);
    }
    await pressId(chat, id);
    await until(chat, (v) => controlIn(v, id).sent === 'ok', { what: 'sent once uncovered' });
  });

  await step('the background answers a tab for its own site only', async () => {
    // What a content script's messages arrive with: the browser sets
    // sender.url and sender.tab, the message itself is whatever the
    // content script's process says (a compromised renderer says anything).
    const url = env.PAGES + '/chat.html'; // CHATGPT's
    const r = await sw.evaluate(async ({ url, relay }) => {
      const tab = (await chrome.tabs.query({})).find((t) => t.url === url);
      const sender = { id: chrome.runtime.id, url, tab };
      const ask = (msg, s = sender) => dispatch(msg, s);
      const localRelay = relay.replace('127.0.0.1', 'localhost');
      return {
        site: await ask({ type: 'site', host: 'chat.example' }),
        next: await ask({ type: 'next', agent: 'GEMINI' }),
        exchanges: await ask({ type: 'exchanges', agent: 'GEMINI' }),
        test: await ask({ type: 'test', relay: 'http://127.0.0.1:9', token: 'x' }),
        relayPage: await ask({ type: 'site', host: new URL(localRelay).host }, { id: chrome.runtime.id, url: localRelay + '/', tab }),
      };
    }, { url, relay: env.RELAY_URL });
    check('site: the sender\'s own host, not the one it names', r.site.agent === 'CHATGPT', JSON.stringify(r.site));
    check('next: the sender\'s agent, not the one it names', !r.next.error && !(r.next.text || '').includes('→GEMINI'), JSON.stringify(r.next));
    check('exchanges: refused to a page', !!r.exchanges.error && !r.exchanges.items, JSON.stringify(r.exchanges));
    check('test: refused to a page', !!r.test.error && r.test.ok === undefined, JSON.stringify(r.test));
    check('the relay by its other loopback name is the relay', r.relayPage.isRelay === true, JSON.stringify(r.relayPage));
    check('site: a page is not told the relay URL', r.site.relay === undefined && r.relayPage.relay === undefined, JSON.stringify(r.site));
  });

  await step('copy the last envelope of the page, fenced (command)', async () => {
    await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: env.PAGES });
    await chat.bringToFront();
    await sw.evaluate(() => runCommand('copy-last'));
    await until(chat, (v) => v.toast === 'Copied ✓', { timeout: 5000 });
    const clip = await chat.evaluate(() => navigator.clipboard.readText());
    const last = seed.chat[seed.chat.length - 1].id;
    check('clipboard holds the last envelope, fenced', clip.startsWith('```\n[[') && clip.includes(last) && clip.trimEnd().endsWith('```'), clip);
  });

  await step('strict CSP page: verified by the background', async () => {
    const page = current = await ctx.newPage();
    const resp = await page.goto(env.PAGES + '/strict.html');
    check('strict page sends its CSP', /script-src 'self'/.test(resp.headers()['content-security-policy'] || ''), JSON.stringify(resp.headers()));
    await page.waitForSelector('[data-crosstalk-envelope]', { timeout: 15000 });
    check('strict page status', (await until(page, (v) => v.controls.length === 1)).controls[0].status === 'unsigned', '');
    await page.close();
  });

  await step('streaming message: nothing until [[END]] is there and stable', async () => {
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES + '/stream.html');
    await page.waitForFunction(() => document.documentElement.hasAttribute('data-crosstalk-ready'));
    const text = seed.stream;
    const end = text.indexOf('[[END]]');
    for (let i = 0; i < end; i += 40) {
      await page.evaluate((t) => { document.getElementById('stream').textContent += t; }, text.slice(i, Math.min(i + 40, end)));
      await page.waitForTimeout(60);
    }
    await page.waitForTimeout(1200); // more than the extension's stability wait
    check('no control while [[END]] is missing', await page.locator('[data-crosstalk-envelope]').count() === 0, '');
    await page.evaluate((t) => { document.getElementById('stream').textContent += t; }, text.slice(end));
    await page.waitForSelector('[data-crosstalk-envelope]', { timeout: 10000 });
    check('one control once complete', await page.locator('[data-crosstalk-envelope]').count() === 1 &&
      (await view(page)).controls[0].status === 'unsigned', '');
    await page.close();
  });

  await step('a huge message: the background gets the part it checks', async () => {
    await sw.evaluate(() => {
      globalThis.__checked = [];
      const orig = handlers.check;
      handlers.check = (msg, sender) => { globalThis.__checked.push(msg.text.length); return orig(msg, sender); };
      globalThis.__restoreCheck = () => { handlers.check = orig; };
    });
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES + '/stream.html');
    await page.waitForFunction(() => document.documentElement.hasAttribute('data-crosstalk-ready'));
    await page.evaluate((t) => { document.getElementById('stream').textContent = t + ('chat '.repeat(200) + '\n').repeat(5 << 10); }, seed.stream);
    await page.waitForFunction(() => document.querySelectorAll('[data-crosstalk-envelope]').length === 2, null, { timeout: 20000 })
      .catch(async (e) => { throw new Error(e.message + ' toast: ' + (await view(page)).toast +
        ' controls: ' + await page.locator('[data-crosstalk-envelope]').count() + ' checked: ' + JSON.stringify(await sw.evaluate(() => globalThis.__checked))); });
    const lens = await sw.evaluate(() => { globalThis.__restoreCheck(); return globalThis.__checked; });
    const statuses = (await view(page)).controls.map((c) => c.status + ' ' + c.title);
    check('huge message: the envelope, then the cut', /^unsigned/.test(statuses[0]) && /E-TOO-LARGE/.test(statuses[1]), JSON.stringify(statuses));
    check('huge message: at most 4 MiB + 1 characters sent to the background', lens.length > 0 && lens.every((n) => n <= (4 << 20) + 1), JSON.stringify(lens));
    await page.close();
  });

  async function badge(url) {
    return sw.evaluate(async (u) => {
      const tabs = await chrome.tabs.query({});
      const t = tabs.find((x) => x.url === u);
      return t ? chrome.action.getBadgeText({ tabId: t.id }) : 'no tab';
    }, url);
  }

  for (const [name, path, rich] of [['textarea', '/composer.html', false], ['contenteditable', '/composer.html?rich=1', true]]) {
    await step('insert into ' + name + ', delivered when the page sends it', async () => {
      const page = current = await ctx.newPage();
      await page.goto(env.PAGES + path);
      await page.waitForSelector('[data-crosstalk-insert]', { state: 'attached', timeout: 10000 });
      const v = await until(page, (v) => v.waiting > 0 && v.insert && v.insert.visible !== false, { what: 'the Insert control' });
      const before = v.waiting;
      check(name + ': badge shows the waiting count', await badge(page.url()) === String(before), await badge(page.url()) + ' vs ' + before);
      await page.locator('#prompt-textarea, #composer').first().focus();
      await page.mouse.click(v.insert.x, v.insert.y);
      const box = page.locator(rich ? '#composer' : '#prompt-textarea');
      const want = seed.waiting[seed.waiting.length - before];
      await page.waitForFunction((w) => {
        const b = document.querySelector('#prompt-textarea, #composer');
        return (b.value !== undefined ? b.value : b.innerText).includes(w);
      }, want.message, { timeout: 5000 });
      const content = rich ? await box.innerText() : await box.inputValue();
      check(name + ': the oldest envelope, fenced', content.trimStart().startsWith('```') && content.includes(want.body) && content.includes('[[END]]'), content);
      check(name + ': input event fired', +(await page.evaluate(() => document.body.dataset.inputs)) > 0, '');
      await page.click('[data-testid=send-button]');
      await until(page, (v) => v.waiting === before - 1, { what: 'waiting ' + (before - 1) });
      check(name + ': marked delivered', true, '');
      await page.close();
    });
  }

  await step('an agent named outside Latin-1 is marked delivered', async () => {
    // From an extension page, as the options page would: the agent is the
    // message's.
    const r = await sw.evaluate(async (agent) => {
      const ask = (m) => dispatch(m, { id: chrome.runtime.id, url: chrome.runtime.getURL('popup.html') });
      const next = await ask({ type: 'next', agent });
      if (!next.event_id) { return { next }; }
      const res = await ask({ type: 'delivered', agent, group: next.group, event_id: next.event_id });
      return { res, after: (await ask({ type: 'waiting', agent })).count };
    }, seed.intl);
    check('delivered for ' + seed.intl, r && r.res && r.res.ok === true && r.after === 0, JSON.stringify(r));
  });

  await step('popup: the last exchanges of the tab\'s agent', async () => {
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES + '/composer.html');
    const tabId = await sw.evaluate(async (u) => (await chrome.tabs.query({})).find((t) => t.url === u).id, page.url());
    const popup = await ctx.newPage();
    await popup.goto('chrome-extension://' + extId + '/popup.html?tab=' + tabId);
    await popup.waitForFunction(() => document.querySelectorAll('#items li').length > 0);
    const who = await popup.locator('#who').textContent();
    const items = await popup.locator('#items li').allTextContents();
    check('popup names the agent', /speaks for CHATGPT/.test(who), who);
    check('popup lists what CHATGPT received', items.length === seed.waiting.length && seed.waiting.every((w) => items.some((i) => i.includes(w.body))), JSON.stringify(items));
    await popup.close();
    await page.close();
  });

  await step('keyboard shortcut: insert and send the next envelope', async () => {
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES + '/composer.html');
    await page.waitForSelector('[data-crosstalk-insert]', { state: 'attached', timeout: 10000 });
    await until(page, (v) => v.waiting > 0, { what: 'something waiting' });
    const cmds = await sw.evaluate(() => chrome.commands.getAll());
    const ins = cmds.find((c) => c.name === 'insert-next');
    check('insert-next has a shortcut', ins && ins.shortcut === 'Alt+Shift+I', JSON.stringify(cmds));
    // Chromium does not route a driver's synthetic keys to extension
    // shortcuts (headless or headed under Xvfb, tried): run the command as
    // the browser does when the shortcut is pressed.
    await page.bringToFront();
    await sw.evaluate(() => runCommand('insert-next'));
    await page.waitForFunction(() => +document.body.dataset.sent > 0, null, { timeout: 5000 });
    const sentText = await page.locator('.message[data-role=user] pre').last().innerText();
    check('insert-next inserted and sent the last waiting envelope (via command)', sentText.includes(seed.waiting[2].body), sentText);
    await until(page, (v) => v.waiting === 0, { what: 'none waiting' });
    await page.close();
  });

  await step('auto mode sends each envelope once, also after a reload', async () => {
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES_AUTO + '/auto.html');
    const n = seed.auto.length;
    await page.waitForSelector('[data-crosstalk-envelope]', { timeout: 15000 });
    await until(page, (v) => v.controls.filter((c) => c.sent === 'ok').length === n, { timeout: 15000, what: n + ' sent' });
    await page.reload();
    await page.waitForSelector('[data-crosstalk-envelope]', { timeout: 15000 });
    await until(page, (v) => v.controls.length === n && v.controls.every((c) => c.sent === 'ok'), { timeout: 15000, what: 'all sent after the reload' });
    check('auto mode', true, '');
    await page.close();
  });

  await step('a hostile page: what it hides is not sent, a differing resend is not "already in the ledger"', async () => {
    // hostile.html, on the auto-mode site: auto mode sends what the page
    // shows, and only that.
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES_AUTO + '/hostile.html');
    await page.waitForFunction(() => document.documentElement.hasAttribute('data-crosstalk-ready'));
    const inMsg = (m) => '[data-message-id="' + m + '"]';
    const sentIn = async (m) => (await view(page, inMsg(m))).controls.map((c) => c.status + '/' + c.sent);
    const settled = (ms) => until(page, (v) => ms.every((m) => v.controls.some((c) => c.message === m && c.sent !== '')), { timeout: 15000, what: ms.join() + ' settled' });
    await settled(['h-ok', 'h-differs', 'h-twice-1']);
    // Then the page shows another envelope under the message id it sent.
    await page.evaluate((text) => {
      const m = document.createElement('div');
      m.className = 'message';
      m.dataset.messageId = 'h-twice-2';
      m.appendChild(document.createElement('pre')).textContent = text;
      document.querySelector('.thread').appendChild(m);
    }, seed.twiceSecond);
    await settled(['h-twice-2']);
    check('the envelope the page shows is sent', (await sentIn('h-ok')).join() === 'unsigned/ok', await sentIn('h-ok'));
    for (const m of ['h-none', 'h-faded']) {
      check('an envelope the page hides (' + m + ') gets no control', (await sentIn(m)).length === 0, await sentIn(m));
    }
    for (const m of ['h-tiny', 'h-clear', 'h-away', 'h-ours']) {
      const got = await sentIn(m);
      check('an envelope with a line the user cannot see (' + m + ') is marked hidden, not sent', got.join() === 'hidden/', got);
      const disabled = (await view(page, inMsg(m))).controls.map((c) => c.disabled);
      check('no Send for ' + m, disabled.length === 1 && disabled[0] === true, JSON.stringify(disabled));
    }
    check('a resend under a held message id with another body says differs', (await sentIn('h-differs')).join() === 'unsigned/differs', await sentIn('h-differs'));
    // Not hiding: a message of a content-visibility: auto list, sent once scrolled to.
    await page.locator('[data-message-id="h-lazy"]').scrollIntoViewIfNeeded();
    await settled(['h-lazy']);
    check('a message drawn when scrolled to (content-visibility: auto) is not hidden', (await sentIn('h-lazy')).join() === 'unsigned/ok', await sentIn('h-lazy'));
    const twice = [...await sentIn('h-twice-1'), ...await sentIn('h-twice-2')];
    check('another envelope under a message id auto mode sent is posted, and differs', twice.join() === 'unsigned/ok,unsigned/differs', JSON.stringify(twice));
    await page.close();

    // Without auto mode: the page hides a line, or the whole envelope,
    // after the check placed the controls; the user's click sends nothing.
    const manual = current = await ctx.newPage();
    await manual.goto(env.PAGES + '/hostile.html');
    await manual.waitForSelector('[data-message-id="h-ok"] [data-crosstalk-envelope]', { timeout: 15000 });
    await manual.waitForSelector('[data-message-id="h-differs"] [data-crosstalk-envelope]', { timeout: 15000 });
    const first = async (m) => (await view(manual, '[data-message-id="' + m + '"]')).controls[0] || {};
    const hide = {
      // A class only: no mutation the content script watches, so the control stays.
      'h-differs': () => document.querySelector('[data-message-id="h-differs"] pre').classList.add('gone'),
      'h-ok': () => {
        const code = document.querySelector('[data-message-id="h-ok"] code');
        code.innerHTML = code.innerHTML.replace('Shown plainly.', '<span class="tiny">Shown plainly.</span>');
      },
    };
    for (const m of ['h-differs', 'h-ok']) {
      await manual.evaluate(hide[m]);
      await press(manual, (v) => v.controls[0], 'send', '[data-message-id="' + m + '"]');
      await until(manual, (v) => v.controls[0].sent !== '', { within: '[data-message-id="' + m + '"]' });
      check('hidden after the check (' + m + '): the click sends nothing', (await first(m)).sent === 'hidden', (await first(m)).sent);
    }
    await manual.close();
  });

  await step('a long conversation: every envelope found', async () => {
    const page = current = await ctx.newPage();
    const t0 = Date.now();
    await page.goto(env.PAGES + '/long.html');
    const n = seed.longEnvelopes;
    await page.waitForFunction((n) => document.querySelectorAll('[data-crosstalk-envelope]').length === n, n, { timeout: 60000 });
    metrics.long_messages = seed.longMessages;
    metrics.long_envelopes = n;
    metrics.long_ms_to_all_controls = Date.now() - t0;
    // A scan once everything is checked: what each mutation of the page costs.
    await page.evaluate(() => {
      document.documentElement.removeAttribute('data-crosstalk-scan-ms');
      document.querySelector('.thread').appendChild(document.createElement('div'));
    });
    await page.waitForFunction(() => document.documentElement.hasAttribute('data-crosstalk-scan-ms'));
    metrics.long_scan_ms = +(await page.evaluate(() => document.documentElement.getAttribute('data-crosstalk-scan-ms')));
    check('all controls unsigned', (await view(page)).controls.every((c) => c.status === 'unsigned'), '');
    await page.close();
  });

  await step('a long-lived tab: what the content script keeps stays bounded', async () => {
    // A chat page that adds messages and drops old ones (a virtualised
    // thread) for hours: the content script must forget the blocks,
    // controls and envelope keys that left the page.
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES + '/stream.html');
    await page.waitForFunction(() => document.documentElement.hasAttribute('data-crosstalk-ready'));
    const tabId = await sw.evaluate(async (u) => (await chrome.tabs.query({})).find((t) => t.url === u).id, page.url());
    const ROUNDS = 10, PER = 100;
    for (let r = 0; r < ROUNDS; r++) {
      await page.evaluate(({ r, per }) => {
        const thread = document.querySelector('.thread');
        for (const old of thread.querySelectorAll('[data-round]')) { old.remove(); }
        for (let i = 0; i < per; i++) {
          const m = document.createElement('div');
          m.className = 'message';
          m.dataset.round = String(r);
          m.dataset.messageId = 'r' + r + '-' + i;
          const pre = document.createElement('pre');
          pre.textContent = '[[CHATGPT→GEMINI v1]]\nintent: REQUEST\n\nbody: |\n  Round ' + r + ', message ' + i + '.\n[[END]]';
          m.appendChild(pre);
          thread.appendChild(m);
        }
      }, { r, per: PER });
      await page.waitForFunction((per) => document.querySelectorAll('[data-round] [data-crosstalk-envelope]').length === per, PER, { timeout: 20000 });
    }
    await page.evaluate(() => { for (const old of document.querySelectorAll('[data-round]')) { old.remove(); } });
    // A scan after the removal: wait for it to have run.
    await page.evaluate(() => document.documentElement.removeAttribute('data-crosstalk-scan-ms'));
    await page.evaluate(() => document.querySelector('.thread').appendChild(document.createElement('div')));
    await page.waitForFunction(() => document.documentElement.hasAttribute('data-crosstalk-scan-ms'));
    const stats = await sw.evaluate((id) => chrome.tabs.sendMessage(id, { type: 'stats' }), tabId).catch((e) => ({ error: String(e) }));
    check('after ' + ROUNDS * PER + ' envelopes added and removed, the content script holds at most one round',
      stats && stats.blocks <= PER && stats.keys <= PER && stats.controls <= PER, JSON.stringify(stats));
    await page.close();
  });

  await step('send every envelope of the page (command)', async () => {
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES + '/strict.html');
    await page.waitForSelector('[data-crosstalk-envelope]', { timeout: 15000 });
    await sw.evaluate(() => runCommand('send-all'));
    await until(page, (v) => v.controls.some((c) => c.sent === 'ok'), { timeout: 5000, what: 'sent ok' });
    check('send-all sent the page\'s envelope', true, '');
    await page.close();
  });

  await step('options: forget a sender\'s keys', async () => {
    const checkStatus = () => sw.evaluate(async (text) => {
      const r = await dispatch({ type: 'check', text }, { id: chrome.runtime.id, url: chrome.runtime.getURL('options.html') });
      return r.envelopes ? r.envelopes.map((e) => e.status).join() : JSON.stringify(r);
    }, seed.keyChanged);
    check('a rotated key is key-changed before', await checkStatus() === 'key-changed', await checkStatus());
    // A page can neither list the keys nor forget them.
    const fromPage = await sw.evaluate(async (url) => {
      const tab = (await chrome.tabs.query({}))[0];
      const sender = { id: chrome.runtime.id, url, tab };
      return { keys: await dispatch({ type: 'keys' }, sender), forget: await dispatch({ type: 'forget', sender: 'CLAUDE' }, sender) };
    }, env.PAGES + '/chat.html');
    check('keys and forget: refused to a page', !!fromPage.keys.error && !fromPage.keys.keys && !!fromPage.forget.error && fromPage.forget.forgotten === undefined,
      JSON.stringify(fromPage));
    const page = current = await ctx.newPage();
    await page.goto('chrome-extension://' + extId + '/options.html');
    const row = page.locator('#keys tr[data-sender="CLAUDE"]');
    await row.waitFor({ timeout: 5000 });
    check('options list CLAUDE\'s key', /claude@example\.com/.test(await row.textContent()), await row.textContent());
    await row.locator('button.forget').click();
    await page.waitForFunction(() => /Forgot 1 key/.test(document.getElementById('keys-result').textContent), null, { timeout: 5000 });
    check('CLAUDE is gone from the list', await page.locator('#keys tr[data-sender="CLAUDE"]').count() === 0 &&
      await page.locator('#keys tr[data-sender="OLD"]').count() === 1, await page.locator('#keys').textContent());
    const known = await sw.evaluate(async () => (await chrome.storage.local.get('known')).known || '');
    check('the key left the trust store', !/^claude@example\.com /m.test(known) && /^old@example\.com .* revoked/m.test(known), known);
    check('the rotated key is a first use after', await checkStatus() === 'first-use', await checkStatus());
    await page.close();
  });

  await step('relay unreachable: the clipboard fallback', async () => {
    await sw.evaluate(() => chrome.storage.local.set({ relay: 'http://127.0.0.1:9' }));
    const page = current = await ctx.newPage();
    await page.goto(env.PAGES + '/strict.html');
    await page.waitForSelector('[data-crosstalk-envelope]', { timeout: 15000 });
    await press(page, (v) => v.controls[0]);
    await until(page, (v) => v.controls[0].sent === 'offline', { what: 'sent offline' });
    const clip = await page.evaluate(() => navigator.clipboard.readText());
    check('fenced envelope on the clipboard', clip.startsWith('```\n[[') && clip.includes('[[END]]'), clip);
    await sw.evaluate((u) => chrome.storage.local.set({ relay: u }), env.RELAY_URL);
    await page.close();
  });
} catch (e) {
  check('driver', false, (e && e.stack) || e);
} finally {
  await ctx.close();
}
process.stdout.write(JSON.stringify({ checks, metrics, seconds: (Date.now() - started) / 1000 }) + '\n');
