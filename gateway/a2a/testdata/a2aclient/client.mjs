// client.mjs drives crosstalk's A2A bridge with the A2A JS SDK client
// (@a2a-js/sdk), as gateway/a2a's TestJSClient runs it:
//
//   A2A_URL=http://127.0.0.1:PORT/a2a/claude/ A2A_TOKEN=… node client.mjs
//
// (The trailing slash matters: the SDK resolves the card's path against
// the URL, as a relative URL.)
//
// It resolves the agent card, then runs each step against the relay and
// prints one JSON line per step; the Go test plays the agent (it answers
// through the relay's API) and checks the lines. A step that throws prints
// {"step": …, "error": …}; a broken setup exits 1.
import { randomUUID } from 'node:crypto';
import { TaskState } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory } from '@a2a-js/sdk/client';

const base = process.env.A2A_URL;
const token = process.env.A2A_TOKEN;
if (!base || !token) {
  console.error('client.mjs: set A2A_URL and A2A_TOKEN');
  process.exit(1);
}

// Every request carries the relay's bearer token.
const authFetch = (url, init = {}) => {
  const headers = new Headers(init.headers);
  headers.set('Authorization', `Bearer ${token}`);
  return fetch(url, { ...init, headers });
};

const stateName = (s) => TaskState[s] ?? String(s);
const text = (parts) => (parts ?? []).map((p) => (p.content?.$case === 'text' ? p.content.value : '')).join('');
const message = (contextId, body, taskId = '') => ({
  messageId: randomUUID(),
  contextId,
  taskId,
  role: 1, // ROLE_USER
  parts: [{ content: { $case: 'text', value: body }, metadata: undefined, filename: '', mediaType: 'text/plain' }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});
const request = (msg, configuration) => ({ tenant: '', message: msg, configuration, metadata: undefined });
const summary = (task) => ({
  id: task.id,
  contextId: task.contextId,
  state: stateName(task.status?.state),
  status: text(task.status?.message?.parts),
  artifacts: (task.artifacts ?? []).map((a) => ({ name: a.name, text: text(a.parts) })),
  crosstalk: task.metadata?.crosstalk,
});
const print = (step, value) => console.log(JSON.stringify({ step, ...value }));

async function step(name, fn) {
  try {
    print(name, await fn());
  } catch (err) {
    print(name, { error: String(err?.message ?? err), code: err?.code });
  }
}

const factory = new ClientFactory({
  transports: [new JsonRpcTransportFactory({ fetchImpl: authFetch })],
  cardResolver: new DefaultAgentCardResolver({ fetchImpl: authFetch }),
});
const client = await factory.createFromUrl(base);
const card = await client.getAgentCard();
print('card', { name: card.name, streaming: card.capabilities?.streaming, interfaces: card.supportedInterfaces?.map((i) => i.url) });

// A blocking SendMessage: the agent's reply settles the task.
let sent;
await step('send', async () => {
  const res = await client.sendMessage(request(message('js-send', 'Is the deploy blocked?')));
  sent = res;
  return 'status' in res ? summary(res) : { message: text(res.parts) };
});

await step('get', async () => summary(await client.getTask({ tenant: '', id: sent.id })));

// SendStreamingMessage over SSE: every event as kind:state[:text].
await step('stream', async () => {
  const events = [];
  for await (const ev of client.sendMessageStream(request(message('js-stream', 'Deploy please')))) {
    const p = ev.payload ?? ev;
    switch (p.$case ?? p.kind) {
      case 'task':
        events.push(`task:${stateName(p.value.status?.state)}`);
        break;
      case 'statusUpdate': {
        const t = text(p.value.status?.message?.parts);
        events.push(`status:${stateName(p.value.status?.state)}${t ? ':' + t : ''}`);
        break;
      }
      case 'artifactUpdate':
        events.push(`artifact:${text(p.value.artifact?.parts)}`);
        break;
      default:
        events.push(`other:${JSON.stringify(ev)}`);
    }
  }
  return { events };
});

// returnImmediately, then CancelTask.
await step('cancel', async () => {
  const res = await client.sendMessage(request(message('js-cancel', 'A long job'), {
    acceptedOutputModes: [], taskPushNotificationConfig: undefined, returnImmediately: true,
  }));
  const canceled = await client.cancelTask({ tenant: '', id: res.id, metadata: undefined });
  return { before: stateName(res.status?.state), after: stateName(canceled.status?.state) };
});

await step('notfound', async () => summary(await client.getTask({ tenant: '', id: randomUUID() })));
