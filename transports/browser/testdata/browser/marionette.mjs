// marionette.mjs is a small Marionette client (Firefox's remote protocol,
// which geckodriver speaks too) for ff.mjs: it starts Debian's firefox-esr
// headless with a fresh profile, connects, and sends commands. The wire
// format is `length:json`; a command is [0, id, name, params] and its reply
// [1, id, error, result]. Only the standard library.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

const ELEMENT = 'element-6066-11e4-a52e-4f735466cecf';
const SHADOW = 'shadow-6066-11e4-a52e-4f735466cecf';

export class Marionette {
  // launch starts Firefox with prefs written to the profile's user.js and
  // resolves once Marionette answers.
  static async launch({ binary, profile, prefs = {} }) {
    fs.mkdirSync(profile, { recursive: true });
    const all = Object.assign({ 'marionette.port': 0, 'browser.shell.checkDefaultBrowser': false, 'datareporting.policy.dataSubmissionEnabled': false,
      'toolkit.telemetry.reportingpolicy.firstRun': false, 'browser.startup.homepage_override.mstone': 'ignore', 'app.update.disabledForTesting': true,
      'browser.aboutwelcome.enabled': false, 'extensions.autoDisableScopes': 0 }, prefs);
    fs.writeFileSync(path.join(profile, 'user.js'), Object.entries(all).map(([k, v]) => 'user_pref(' + JSON.stringify(k) + ', ' + JSON.stringify(v) + ');\n').join(''));
    const proc = spawn(binary, ['--headless', '--marionette', '-remote-allow-system-access', '--no-remote', '--profile', profile],
      { stdio: ['ignore', 'ignore', 'pipe'], env: Object.assign({}, process.env, { MOZ_HEADLESS: '1' }) });
    let stderr = '';
    proc.stderr.on('data', (d) => { stderr = (stderr + d).slice(-4000); });
    const portFile = path.join(profile, 'MarionetteActivePort');
    const deadline = Date.now() + 30000;
    while (!fs.existsSync(portFile) || !fs.readFileSync(portFile, 'utf8').trim()) {
      if (Date.now() > deadline || proc.exitCode !== null) { proc.kill(); throw new Error('Firefox did not start Marionette: ' + stderr); }
      await new Promise((r) => setTimeout(r, 50));
    }
    const m = new Marionette(proc);
    await m.connect(+fs.readFileSync(portFile, 'utf8').trim());
    await m.cmd('WebDriver:NewSession', { capabilities: { alwaysMatch: { acceptInsecureCerts: true } } });
    return m;
  }

  constructor(proc) {
    this.proc = proc;
    this.id = 0;
    this.pending = new Map();
    this.buf = Buffer.alloc(0);
  }

  connect(port) {
    return new Promise((resolve, reject) => {
      let greeted = false;
      this.sock = net.connect(port, '127.0.0.1');
      this.sock.on('error', reject);
      this.sock.on('data', (d) => {
        this.buf = Buffer.concat([this.buf, d]);
        for (;;) {
          const colon = this.buf.indexOf(':');
          if (colon < 0) { return; }
          const len = +this.buf.subarray(0, colon).toString();
          if (this.buf.length < colon + 1 + len) { return; }
          const msg = JSON.parse(this.buf.subarray(colon + 1, colon + 1 + len).toString());
          this.buf = this.buf.subarray(colon + 1 + len);
          if (!greeted) { greeted = true; resolve(); continue; }
          const [, id, err, result] = msg;
          const p = this.pending.get(id);
          if (!p) { continue; }
          this.pending.delete(id);
          if (err) { p.reject(new Error(p.name + ': ' + (err.error || '') + ': ' + (err.message || JSON.stringify(err)))); } else { p.resolve(result); }
        }
      });
    });
  }

  cmd(name, params = {}) {
    const id = ++this.id;
    const body = Buffer.from(JSON.stringify([0, id, name, params]));
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, name });
      this.sock.write(Buffer.concat([Buffer.from(body.length + ':'), body]));
    });
  }

  // script runs a function body in the current context and returns its value.
  async script(body, args = []) { return (await this.cmd('WebDriver:ExecuteScript', { script: body, args })).value; }

  async find(css, from) {
    const r = from ? await this.cmd('WebDriver:FindElementFromShadowRoot', { shadowRoot: from, using: 'css selector', value: css })
      : await this.cmd('WebDriver:FindElement', { using: 'css selector', value: css });
    return (r.value || r)[ELEMENT];
  }

  // findInShadow finds css inside the open shadow root of the element host.
  async findInShadow(hostCSS, css) {
    const host = await this.find(hostCSS);
    const r = await this.cmd('WebDriver:GetShadowRoot', { id: host });
    const root = (r.value || r)[SHADOW];
    return this.find(css, root);
  }

  click(id) { return this.cmd('WebDriver:ElementClick', { id }); }

  // waitFor polls a script until it returns a truthy value.
  async waitFor(body, args = [], timeout = 10000, what = body) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const v = await this.script(body, args).catch(() => null);
      if (v) { return v; }
      if (Date.now() > deadline) { throw new Error('timed out waiting for: ' + what); }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async quit() {
    await this.cmd('Marionette:Quit', { flags: ['eForceQuit'] }).catch(() => {});
    await new Promise((r) => { if (this.proc.exitCode !== null) { r(); } else { this.proc.on('exit', r); setTimeout(r, 10000); } });
    this.sock.destroy();
  }
}
