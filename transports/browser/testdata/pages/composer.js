// composer.js imitates a chat site's composer: it counts input events (as
// React and ProseMirror need them) and, on Send, moves the composer's text
// into a new user message and clears the composer.
'use strict';
const box = document.querySelector('#prompt-textarea, #composer');
box.addEventListener('input', () => { document.body.dataset.inputs = String(+document.body.dataset.inputs + 1); });
document.querySelector('[data-testid=send-button]').addEventListener('click', () => {
  const text = box.tagName === 'TEXTAREA' ? box.value : box.innerText;
  if (!text.trim()) { return; }
  const m = document.createElement('div');
  m.className = 'message';
  m.dataset.role = 'user';
  const pre = document.createElement('pre');
  pre.textContent = text;
  m.appendChild(pre);
  document.querySelector('.thread').appendChild(m);
  if (box.tagName === 'TEXTAREA') { box.value = ''; } else { box.innerHTML = '<p><br></p>'; }
  document.body.dataset.sent = String(+document.body.dataset.sent + 1);
});
