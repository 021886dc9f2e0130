// The theme: the system's, unless the header's toggle chose one (remembered in this browser).
(function () {
  'use strict';
  var root = document.documentElement, key = 'liqo-theme', stored = null;
  try { stored = localStorage.getItem(key); } catch (e) {}
  if (stored === 'light' || stored === 'dark') root.setAttribute('data-theme', stored);
  var header = document.querySelector('header');
  if (!header || !window.matchMedia) return;
  function dark() {
    var chosen = root.getAttribute('data-theme');
    return chosen ? chosen === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
  }
  var toggle = document.createElement('button');
  toggle.type = 'button';
  toggle.id = 'theme';
  toggle.textContent = 'Dark theme';
  function show() { toggle.setAttribute('aria-pressed', String(dark())); }
  toggle.addEventListener('click', function () {
    var next = dark() ? 'light' : 'dark';
    root.setAttribute('data-theme', next);
    try { localStorage.setItem(key, next); } catch (e) {}
    show();
  });
  show();
  header.appendChild(toggle);
})();

// Live pages: when the shared watches see a change, fetch this page again and swap its live
// sections whose markup changed (never the forms, so what the user types stays). Refreshes are
// paced: the next starts no sooner than a second, or four times as long as the last one took,
// after it; a hidden page waits until it is shown. The page works without this.
(function () {
  'use strict';
  if (!window.EventSource || !window.fetch) return;
  var busy = false, due = false, last = {}, notBefore = 0, timer = null;
  document.querySelectorAll('[data-live]').forEach(function (section) { last[section.id] = section.innerHTML; });
  function swap(html) {
    var next = new DOMParser().parseFromString(html, 'text/html');
    document.querySelectorAll('[data-live]').forEach(function (section) {
      var fresh = next.getElementById(section.id);
      if (!fresh || fresh.innerHTML === last[section.id]) return;
      last[section.id] = fresh.innerHTML;
      var focused = document.activeElement && section.contains(document.activeElement) ? document.activeElement.getAttribute('aria-label') : null;
      section.replaceWith(fresh);
      if (focused) {
        var again = fresh.querySelector('[aria-label="' + focused.replace(/"/g, '\\"') + '"]');
        if (again) again.focus();
      }
    });
    document.body.setAttribute('data-version', next.body.getAttribute('data-version') || '');
  }
  function refresh() {
    due = true;
    if (busy || timer || document.hidden) return;
    var wait = notBefore - Date.now();
    if (wait > 0) { timer = setTimeout(function () { timer = null; refresh(); }, wait); return; }
    busy = true; due = false;
    var started = Date.now();
    fetch(location.pathname + location.search, { credentials: 'same-origin', headers: { Accept: 'text/html' } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) { if (html) swap(html); })
      .catch(function () {})
      .then(function () {
        busy = false;
        notBefore = Date.now() + Math.max(1000, 4 * (Date.now() - started));
        if (due) refresh();
      });
  }
  new EventSource('/events').addEventListener('change', refresh);
  document.addEventListener('visibilitychange', function () { if (!document.hidden && due) refresh(); });
})();

// "3 min ago" and "within 20 s" stay true while the page is open: each <time data-ago> or
// <time data-within> is said again from its instant every 15 s (as the server says it: s, min,
// h, d).
(function () {
  'use strict';
  function say(s) {
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min';
    if (s < 86400) return Math.floor(s / 3600) + ' h';
    return Math.floor(s / 86400) + ' d';
  }
  function tick() {
    var now = Date.now();
    document.querySelectorAll('time[data-ago], time[data-within]').forEach(function (t) {
      var then = Date.parse(t.getAttribute('datetime'));
      if (isNaN(then)) return;
      var said = say(Math.max(0, Math.floor((now - then) / 1000)));
      t.textContent = t.hasAttribute('data-ago') ? said + ' ago' : said;
    });
  }
  setInterval(tick, 15000);
})();
