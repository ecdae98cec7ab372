// driver.mjs times the original implementation's parseEnvelope under node,
// for the parsevsjs benchmark (docs/performance.md). It is our code; the
// original is read at run time from the temporary copy named on the
// command line and never stored in the repository.
//
// Usage: node driver.mjs ENVELOPE_JS NAME=INPUT_FILE=BODY_FILE...
// then one request per line on standard input, "NAME MILLISECONDS", each
// answered with one JSON line {"name", "ns", "cpu", "iterations", "ok",
// "error"}: the wall and the CPU time per parseEnvelope call on that input,
// in ns, measured for about that long. A first line {"ready": true} (or {"error"}) says it has loaded.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

const [, , origPath, ...inputArgs] = process.argv;
const say = (o) => console.log(JSON.stringify(o));

let parseEnvelope;
try {
  const src = readFileSync(origPath, 'utf8');
  const start = src.indexOf('function parseEnvelope(');
  const end = start < 0 ? -1 : src.indexOf('\n}\n', start);
  if (end < 0) throw new Error(`no function parseEnvelope in ${origPath}`);
  // The function alone: the module around it is a CLI that reads stdin.
  parseEnvelope = new Function(`"use strict";\n${src.slice(start, end + 2)}\nreturn parseEnvelope;`)();
} catch (e) {
  say({ error: String(e.message || e) });
  process.exit(0);
}

const inputs = new Map();
for (const arg of inputArgs) {
  const [name, file, bodyFile] = arg.split('=');
  inputs.set(name, { text: readFileSync(file, 'utf8'), want: readFileSync(bodyFile, 'utf8'), chunk: 0 });
}

let sink = 0;
const run = (text, n) => {
  for (let i = 0; i < n; i++) sink += parseEnvelope(text).response.length;
};

// measure times parseEnvelope on one input for about ms milliseconds, in
// chunks of calls between clock reads, so that every measurement spans the
// same time whatever the load, however fast the warm-up ran: wall time per
// call, and CPU time of the whole process (the JIT and the garbage
// collector included).
function measure(name, ms) {
  const inp = inputs.get(name);
  if (!inp) return { name, error: 'unknown input' };
  const budget = BigInt(Math.round(ms * 1e6));
  try {
    const got = parseEnvelope(inp.text).response;
    if (inp.chunk === 0) {
      // Warm up (the JIT) and find a chunk that takes a hundredth of the budget.
      let n = 1;
      for (;;) {
        const t0 = process.hrtime.bigint();
        run(inp.text, n);
        if (process.hrtime.bigint() - t0 >= budget / 100n) break;
        n *= 2;
      }
      inp.chunk = n;
    }
    let n = 0;
    const c0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    let wall;
    while ((wall = process.hrtime.bigint() - t0) < budget) {
      run(inp.text, inp.chunk);
      n += inp.chunk;
    }
    const c = process.cpuUsage(c0);
    const ns = Number(wall) / n;
    const cpu = ((c.user + c.system) * 1000) / n;
    return { name, ns, cpu, iterations: n, ok: got === inp.want, error: got === inp.want ? '' : 'its body differs from ours' };
  } catch (e) {
    return { name, error: String(e.message || e) };
  }
}

say({ ready: true });
for await (const line of createInterface({ input: process.stdin })) {
  const [name, ms] = line.trim().split(/\s+/);
  if (name) say(measure(name, Number(ms)));
}
if (sink < 0) console.error(sink); // keep the results alive
