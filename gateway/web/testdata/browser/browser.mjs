// browser.mjs drives Debian's headless Chromium through the web inbox of a
// relay that gateway/web's TestBrowser started in-process. It is run by that
// test (node browser.mjs), never by hand. It prints one JSON object on
// stdout: {"checks":[{name, ok, detail}], "clipboard":{…}}; the Go test
// turns every check into a subtest and verifies the ledger afterwards.
//
// Environment: RELAY_URL, ATTACKER_URL, CHROMIUM, USER_DATA_DIR,
// SCREENSHOTS (a directory), SEED (JSON from the Go test).
import { chromium } from 'playwright-core';

const env = process.env;
const relay = env.RELAY_URL;
const attacker = env.ATTACKER_URL;
const shots = env.SCREENSHOTS;
const seed = JSON.parse(env.SEED || '{}');

const checks = [];
const clipboard = {};
function check(name, ok, detail) {
  checks.push({ name, ok: !!ok, detail: ok ? '' : String(detail === undefined ? '' : detail) });
}

// post sends envelopes over the relay's HTTP endpoint, as another client
// (no browser, no Origin header) would.
async function post(text) {
  const r = await fetch(relay + '/crosstalk/receive', {
    method: 'POST', headers: { 'Content-Type': 'text/plain; charset=utf-8' }, body: text,
  });
  if (r.status !== 200) { throw new Error('POST /crosstalk/receive = ' + r.status + ': ' + await r.text()); }
}

async function shot(page, name) {
  await page.screenshot({ path: shots + '/' + name + '.png', fullPage: true });
}

let current = null; // the page, for a screenshot when a step fails

async function step(name, fn) {
  try {
    await fn();
  } catch (e) {
    let where = '';
    if (current) {
      where = ' (at ' + current.url() + ', screenshot failed-' + name.replace(/\W+/g, '-') + '.png)';
      await current.screenshot({ path: shots + '/failed-' + name.replace(/\W+/g, '-') + '.png', fullPage: true }).catch(() => {});
    }
    check(name, false, ((e && e.stack) || e) + where);
  }
}

const ctx = await chromium.launchPersistentContext(env.USER_DATA_DIR, {
  executablePath: env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1280, height: 860 },
});
const started = Date.now();
try {
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: relay });
  ctx.setDefaultTimeout(10000);
  const page = ctx.pages()[0] || await ctx.newPage();
  current = page;
  const dialogs = [];
  const pageErrors = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => { pageErrors.push(String(e)); });
  const readClipboard = () => page.evaluate(() => navigator.clipboard.readText());

  // 1. Paste → preview → send → the thread view.
  let threadURL = '';
  await step('paste: preview, send, thread view', async () => {
    await page.goto(relay + '/ui/paste');
    await page.fill('#paste-text', seed.pasteText);
    await page.click('#preview-button');
    await page.waitForSelector('#preview');
    const found = await page.locator('#preview article.env.preview').count();
    const errs = await page.locator('#preview article.perr').allTextContents();
    check('paste: preview shows every envelope', found === 2, 'found ' + found);
    check('paste: preview shows the error with its line', errs.length === 1 && errs[0].includes('line ' + seed.pasteErrorLine), JSON.stringify(errs));
    await shot(page, 'paste-preview');
    await page.click('#send-button');
    await page.waitForSelector('#results');
    const ok = await page.locator('#results li.accepted').count();
    const refused = await page.locator('#results li.refused').count();
    check('paste: send records the envelopes', ok === 2 && refused === 1, ok + ' accepted, ' + refused + ' refused');
    await shot(page, 'paste-sent');
    await page.locator('#results li.accepted a').first().click();
    await page.waitForSelector('#timeline');
    threadURL = page.url();
    const body = await page.locator('article.env pre.body').first().textContent();
    check('paste: the envelope appears in the thread view', body === seed.pasteFirstBody, JSON.stringify(body));
    check('paste: the thread view is a thread', threadURL.includes('/threads/'), threadURL);
  });

  // 2. Live updates over SSE: a reply in the thread appears, another
  // thread's envelope does not.
  await step('live: thread view', async () => {
    await page.goto(threadURL);
    await page.waitForSelector('#live-indicator.on');
    await post(seed.liveOtherThread);
    await post(seed.liveReply);
    const card = page.locator('article.env.new', { hasText: seed.liveReplyBody });
    await card.waitFor();
    check('live: a new envelope arrives without reload', await card.count() === 1, 'missing');
    check('live: the reply is indented under its parent', (await card.getAttribute('class')).includes('d1'), await card.getAttribute('class'));
    const other = await page.locator('article.env', { hasText: seed.liveOtherBody }).count();
    check('live: the thread view leaves out other threads', other === 0, other + ' shown');
    // Keyboard: j focuses the first envelope, c copies it.
    await page.locator('body').press('j');
    const focused = await page.evaluate(() => document.activeElement && document.activeElement.matches('article.env'));
    check('keyboard: j moves to an envelope', focused, 'focus on ' + await page.evaluate(() => document.activeElement.outerHTML.slice(0, 80)));
    await shot(page, 'thread');
  });

  await step('live: group view', async () => {
    await page.goto(relay + '/ui/groups/' + encodeURIComponent(seed.pasteGroup));
    await page.waitForSelector('#live-indicator.on');
    await post(seed.liveGroup);
    await page.locator('article.env.new', { hasText: seed.liveGroupBody }).waitFor();
    check('live: the group view gets it too', true);
    await shot(page, 'group');
  });

  // 3. Copy buttons: the canonical envelope, and fenced.
  await step('copy: compose', async () => {
    await page.goto(relay + '/ui/compose');
    await page.fill('#c-from', 'CLAUDE');
    await page.fill('#c-to', 'CHATGPT');
    await page.selectOption('#c-intent', 'REQUEST');
    await page.fill('#c-context', 'clip');
    await page.fill('#c-body', seed.composeBody);
    await page.click('#make-button');
    await page.waitForSelector('#canonical');
    await page.click('#copy-button');
    await page.waitForFunction(() => document.getElementById('copy-button').textContent.includes('copied'));
    clipboard.canonical = await readClipboard();
    const shown = await page.locator('#canonical').textContent();
    check('copy: the clipboard holds the canonical envelope', clipboard.canonical === shown && shown.startsWith('[[CLAUDE→CHATGPT v1]]'), JSON.stringify(clipboard.canonical));
    await page.click('#copy-fenced-button');
    await page.waitForFunction(() => document.getElementById('copy-fenced-button').textContent.includes('copied'));
    clipboard.fenced = await readClipboard();
    const fenced = await page.locator('#fenced').textContent();
    check('copy: copy fenced puts the fenced envelope there', clipboard.fenced === fenced && clipboard.fenced.startsWith('```'), JSON.stringify(clipboard.fenced));
    await shot(page, 'compose');
  });

  await step('copy: thread view', async () => {
    await page.goto(threadURL);
    const first = page.locator('article.env').first();
    await first.locator('button[data-copy^="c"]').click();
    clipboard.item = await readClipboard();
    const text = await first.locator('details.raw pre').textContent();
    check('copy: an envelope of the thread view', clipboard.item === text && text.includes('[[END]]'), JSON.stringify(clipboard.item));
  });

  // 4. An agent acks an attention message from its page.
  await step('agent: ack', async () => {
    await page.goto(relay + '/ui/agents/claude');
    const card = page.locator('article.dl.pending', { hasText: seed.ackBody });
    await card.waitFor();
    await shot(page, 'agent');
    await card.locator('button[value="ack"]').click();
    await page.waitForSelector('.flash');
    const flash = await page.locator('.flash').textContent();
    check('agent: the ack is recorded', flash.includes('ack on'), flash);
    const after = page.locator('article.dl', { hasText: seed.ackBody });
    check('agent: the item shows acked', (await after.locator('.badge.ok', { hasText: 'acked' }).count()) === 1, await after.first().innerHTML());
    check('agent: no ack button any more', (await after.locator('button[value="ack"]').count()) === 0, 'still there');
    // New work appears on the agent's page without a reload.
    await post(seed.agentLive);
    await page.locator('article.dl.pending', { hasText: seed.agentLiveBody }).waitFor();
    check('agent: a new delivery appears live', true);
  });

  // 5. A body with <script> and <img onerror> is text and runs nothing,
  // loaded with the page and live.
  await step('xss', async () => {
    await page.goto(relay + '/ui/groups/xss');
    await page.waitForSelector('#live-indicator.on');
    await post(seed.xssLive);
    await page.locator('article.env.new').waitFor();
    await page.waitForTimeout(300); // give an onerror a chance to fire
    const bodies = await page.locator('article.env pre.body').allTextContents();
    check('xss: the body is shown as text', bodies.length === 2 && bodies.every((b) => b.includes('<script>window.__xss=1</script>') && b.includes('<img src=x onerror=')), JSON.stringify(bodies));
    const injected = await page.evaluate(() => document.querySelectorAll('main script, main img, main [onerror]').length);
    check('xss: no script or img element is made', injected === 0, injected + ' elements');
    const ran = await page.evaluate(() => window.__xss);
    check('xss: nothing ran', ran === undefined && dialogs.length === 0, 'window.__xss=' + ran + ' dialogs=' + JSON.stringify(dialogs));
  });

  // 6. Cross-site POST: a page on another origin posts a form to the relay.
  await step('csrf', async () => {
    const resp = page.waitForResponse((r) => r.url().startsWith(relay + '/ui/paste'));
    await page.goto(attacker + '/attack');
    const r = await resp;
    await page.waitForLoadState();
    const text = await page.locator('body').textContent();
    check('csrf: a cross-site form POST is refused', r.status() === 403 && text.includes('E-PERM'), r.status() + ' ' + text.slice(0, 200));
    // From the relay's own page, but without the CSRF token.
    await page.goto(relay + '/ui/paste');
    const [status, body] = await page.evaluate(async (t) => {
      const r = await fetch('/ui/paste', { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: 'op=send&text=' + encodeURIComponent(t) });
      return [r.status, await r.text()];
    }, seed.attackText);
    check('csrf: a same-origin POST without the token is refused', status === 403 && body.includes('E-PERM'), status + ' ' + body.slice(0, 200));
  });

  // 7. Trust page: re-pin a changed key, with the confirmation step.
  await step('trust', async () => {
    await page.goto(relay + '/ui/trust');
    await page.waitForSelector('.badge.bad');
    await shot(page, 'trust');
    await page.getByRole('button', { name: 'Re-pin to this key…' }).click();
    await page.waitForSelector('h1');
    const h1 = await page.locator('h1').textContent();
    check('trust: re-pin asks for confirmation', h1.includes('Re-pin key'), h1);
    await shot(page, 'trust-confirm');
    await page.getByRole('button', { name: /Yes, re-pin/ }).click();
    await page.waitForSelector('.flash');
    check('trust: confirmed re-pin', (await page.locator('.flash').textContent()).includes('pinned'), await page.locator('.flash').textContent());
    // Signed with the re-pinned key, an envelope now verifies: the group
    // shows first-use, key-changed and verified side by side.
    await page.goto(relay + '/ui/groups/keys');
    await page.waitForSelector('#live-indicator.on');
    await post(seed.signedAfterRepin);
    const card = page.locator('article.env.new');
    await card.waitFor();
    check('trust: after re-pin the key verifies', (await card.locator('.badge.ok').textContent()) === 'verified', await card.innerHTML());
    await card.locator('details.meta summary').click();
    await shot(page, 'group-keys');
  });

  // 8. The groups page, keyboard and phone width.
  await step('index', async () => {
    await page.goto(relay + '/');
    await page.keyboard.press('Tab');
    const first = await page.evaluate(() => document.activeElement.className);
    check('keyboard: the first Tab reaches the skip link', first === 'skip', first);
    const rows = await page.locator('table.groups tbody tr').count();
    check('index: lists the groups', rows >= 4, rows + ' rows');
    await shot(page, 'index');
  });

  await step('phone', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    for (const [name, path] of [['thread-phone', threadURL], ['agent-phone', relay + '/ui/agents/claude'], ['index-phone', relay + '/']]) {
      await page.goto(path);
      const over = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check('phone: ' + name + ' has no horizontal scrolling', over <= 1, over + 'px too wide');
      await shot(page, name);
    }
  });

  check('no script errors on any page', pageErrors.length === 0, JSON.stringify(pageErrors));
} catch (e) {
  check('browser run', false, (e && e.stack) || e);
} finally {
  await ctx.close().catch(() => {});
}
process.stdout.write(JSON.stringify({ checks, clipboard, seconds: (Date.now() - started) / 1000 }) + '\n');
