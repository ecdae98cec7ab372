// popup.js: the last exchanges of this tab's agent, from the relay:
// newest first, each with sender, receivers, intent, C2A policy and the
// start of its text.
'use strict';
(async () => {
  const who = document.getElementById('who');
  const list = document.getElementById('items');
  // The toolbar popup shows the active tab; popup.html?tab=ID (the popup
  // opened as a page) shows tab ID.
  const id = +new URLSearchParams(location.search).get('tab');
  const tab = id ? await chrome.tabs.get(id) : (await chrome.tabs.query({ active: true, currentWindow: true }))[0];
  let host = '';
  try { host = new URL(tab.url).host; } catch (e) { /* not a web page */ }
  const site = await chrome.runtime.sendMessage({ type: 'site', host, url: tab.url });
  if (!site.agent) {
    who.textContent = host ? host + ' has no agent: map it in the options.' : 'Not a web page.';
    return;
  }
  who.textContent = host + ' speaks for ' + site.agent + ' · relay ' + site.relay;
  const r = await chrome.runtime.sendMessage({ type: 'exchanges', agent: site.agent });
  if (r.code) { who.textContent += ' — ' + r.code + ': ' + (r.message || ''); }
  if (!r.items || !r.items.length) {
    const li = document.createElement('li');
    li.textContent = 'No exchanges yet.';
    list.appendChild(li);
    return;
  }
  for (const d of r.items) {
    const li = document.createElement('li');
    const head = document.createElement('strong');
    head.textContent = d.from + ' → ' + (d.to || []).join(', ') + ' ' + (d.intent || '') + ' · ' + d.policy;
    const body = document.createElement('div');
    body.textContent = (d.content || '').slice(0, 240);
    li.append(head, body);
    list.appendChild(li);
  }
})();
