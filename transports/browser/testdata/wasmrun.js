// wasmrun.js runs the extension's WebAssembly parser under Node.js for
// transports/browser's TestWasmParseMatchesCLI: node wasmrun.js
// wasm_exec.js crosstalk.wasm < cases.json, where cases.json is
// [{"b64": base64 of the text, "strict":bool}, …] or [{"check":…,
// "known":…}]; it prints a
// JSON array of what crosstalk.parse (or crosstalk.check) returned for each.
'use strict';
const fs = require('fs');
require(process.argv[2]); // defines globalThis.Go
(async () => {
  const go = new Go();
  const { instance } = await WebAssembly.instantiate(fs.readFileSync(process.argv[3]), go.importObject);
  go.run(instance);
  const cases = JSON.parse(fs.readFileSync(0, 'utf8'));
  const out = cases.map((c) => ('check' in c ? globalThis.crosstalk.check(c.check, c.known || '') : globalThis.crosstalk.parse(new Uint8Array(Buffer.from(c.b64, 'base64')), !!c.strict)));
  // Go's runtime keeps the event loop alive: exit once stdout is flushed.
  process.stdout.write(JSON.stringify(out), () => process.exit(0));
})().catch((e) => { console.error(e); process.exit(1); });
