// crosstalk web inbox: copy buttons, live updates over Server-Sent Events,
// and keyboard shortcuts. Plain JavaScript, no dependencies, no build step.
// The page works without it; this only adds what HTML cannot do.
(function () {
  'use strict';

  var status = document.getElementById('live-status');
  function say(msg) { if (status) { status.textContent = msg; } }

  // Copy: navigator.clipboard where the page is a secure context
  // (http://127.0.0.1 and http://localhost are), else the old
  // select-and-copy fallback.
  function copyText(text) {
    if (navigator.clipboard && window.isSecureContext) {
      return navigator.clipboard.writeText(text);
    }
    return new Promise(function (resolve, reject) {
      var ta = document.createElement('textarea');
      ta.value = text;
      ta.setAttribute('readonly', '');
      ta.style.position = 'fixed';
      ta.style.opacity = '0';
      document.body.appendChild(ta);
      ta.select();
      var ok = false;
      try { ok = document.execCommand('copy'); } catch (e) { ok = false; }
      ta.remove();
      if (ok) { resolve(); } else { reject(new Error('the browser refused to copy')); }
    });
  }

  function copyFrom(button) {
    var src = document.getElementById(button.getAttribute('data-copy'));
    if (!src) { return; }
    var label = button.getAttribute('data-label') || button.textContent;
    button.setAttribute('data-label', label);
    copyText(src.textContent).then(function () {
      button.textContent = 'copied ✓';
      say('Copied ' + label.replace('copy', '').trim() + ' envelope to the clipboard');
    }, function (err) {
      button.textContent = 'copy failed';
      say('Copy failed: ' + err.message + '. Select the text and copy it by hand.');
    });
    setTimeout(function () { button.textContent = label; }, 1500);
  }

  document.addEventListener('click', function (e) {
    var b = e.target.closest && e.target.closest('button[data-copy]');
    if (b) { e.preventDefault(); copyFrom(b); }
  });

  // Paste: what is sent must be what was previewed.
  var pasteText = document.getElementById('paste-text');
  var sendButton = document.getElementById('send-button');
  if (pasteText && sendButton) {
    pasteText.addEventListener('input', function () {
      sendButton.disabled = true;
      sendButton.textContent = 'Preview again before sending';
    });
  }

  // Live updates: the group's stream sends each new item rendered by the
  // server (escaped by html/template like the page itself). EventSource
  // reconnects by itself and sends Last-Event-ID, so nothing is missed.
  var tl = document.getElementById('timeline');
  var indicator = document.getElementById('live-indicator');
  function live(on, text) {
    if (!indicator) { return; }
    indicator.textContent = text;
    indicator.classList.toggle('on', on);
  }
  if (tl && window.EventSource) {
    var thread = tl.getAttribute('data-thread') || '';
    // data-stream is the path the server wrote (a group "." or ".." has
    // its own escape there, which encodeURIComponent would not make).
    var url = tl.getAttribute('data-stream') +
      '?since_seq=' + encodeURIComponent(tl.getAttribute('data-since') || '0');
    var es = new EventSource(url);
    es.addEventListener('open', function () { live(true, 'live'); });
    es.addEventListener('error', function () { live(false, 'reconnecting…'); });
    es.addEventListener('item', function (ev) {
      var d;
      try { d = JSON.parse(ev.data); } catch (e) { return; }
      if (document.getElementById('e' + d.seq)) { return; }
      tl.setAttribute('data-since', String(d.seq));
      if (thread && d.thread !== thread) { return; }
      var tpl = document.createElement('template');
      tpl.innerHTML = d.html;
      var node = tpl.content.firstElementChild;
      if (!node) { return; }
      node.classList.add('new');
      tl.appendChild(node);
      var route = node.querySelector('.route');
      say('New: #' + d.seq + (route ? ' ' + route.textContent : ''));
    });
  }

  // The groups and agent pages: when the ledger changes, fetch the page
  // again and swap its content, unless the user is typing in it.
  var changes = document.getElementById('changes');
  if (changes && window.EventSource && window.fetch && window.DOMParser) {
    var pending = false;
    var refresh = function () {
      var main = document.getElementById('main');
      var active = document.activeElement;
      if (main && active && main.contains(active) && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) {
        pending = true; // after the user leaves the field
        return;
      }
      pending = false;
      fetch(location.href, { credentials: 'same-origin' }).then(function (r) {
        if (!r.ok) { throw new Error('status ' + r.status); }
        return r.text();
      }).then(function (text) {
        var doc = new DOMParser().parseFromString(text, 'text/html');
        var next = doc.getElementById('main');
        if (!next || !main) { return; }
        var focusId = active && active.id;
        main.innerHTML = next.innerHTML;
        if (focusId && document.getElementById(focusId)) { document.getElementById(focusId).focus(); }
        say('Updated');
      }).catch(function (err) { say('Could not refresh: ' + err.message); });
    };
    document.addEventListener('focusout', function () { if (pending) { setTimeout(refresh, 0); } });
    var src = new EventSource('/ui/changes?v=' + encodeURIComponent(changes.getAttribute('data-version') || ''));
    src.addEventListener('changed', refresh);
  }

  // Keyboard: j/k move between envelopes, c copies the focused one,
  // r replies to it. Ignored while typing in a field.
  function cards() { return Array.prototype.slice.call(document.querySelectorAll('article.env[id], article.dl[id]')); }
  document.addEventListener('keydown', function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) { return; }
    var t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) { return; }
    var list = cards();
    if (!list.length) { return; }
    var cur = document.activeElement && document.activeElement.closest ? document.activeElement.closest('article') : null;
    var i = list.indexOf(cur);
    if (e.key === 'j' || e.key === 'k') {
      var n = e.key === 'j' ? Math.min(list.length - 1, i + 1) : Math.max(0, i < 0 ? 0 : i - 1);
      list[n].focus();
      list[n].scrollIntoView({ block: 'nearest' });
      e.preventDefault();
    } else if (e.key === 'c' && cur) {
      var b = cur.querySelector('button[data-copy]');
      if (b) { copyFrom(b); e.preventDefault(); }
    } else if (e.key === 'r' && cur) {
      var a = cur.querySelector('a[data-key="reply"]');
      if (a) { a.click(); e.preventDefault(); }
    }
  });
})();
