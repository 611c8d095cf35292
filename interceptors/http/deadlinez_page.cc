// Copyright hopbudget authors.
#include "deadlinez_page.h"

namespace hopbudget::internal {
namespace {

// Kept in one literal so that the page is one response with nothing else to
// load; the renderer builds the DOM with textContent/setAttribute only, so
// hop and method names from the JSON can never inject markup.
constexpr char kPage[] = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>/deadlinez</title>
<style>
  :root { --ok: #3b7dd8; --bad: #c9302c; --muted: #888; --line: #e3e3e3; }
  * { box-sizing: border-box; }
  body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; padding: 16px 24px; color: #222; background: #fff; }
  h1 { font-size: 20px; margin: 0 0 4px; }
  h1 .hop-name { color: var(--ok); font-family: ui-monospace, Menlo, Consolas, monospace; }
  h2 { font-size: 16px; margin: 24px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
  .meta, .legend, .empty { color: var(--muted); margin: 0 0 8px; }
  body[data-state="error"] #status { color: var(--bad); font-weight: 600; }
  .count { color: var(--muted); font-weight: normal; }
  .call-row { border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; margin: 0 0 6px; }
  .call-row.failed { border-color: var(--bad); background: #fdf1f0; }
  .call-head { display: flex; flex-wrap: wrap; gap: 12px; margin-bottom: 4px; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
  .call-code { font-weight: 600; color: #2d7d32; }
  .call-row.failed .call-code, .call-row.failed .call-source { color: var(--bad); font-weight: 600; }
  .call-retry { color: var(--bad); }
  .call-age, .call-budget { color: var(--muted); }
  .hop-line { display: flex; align-items: center; gap: 8px; font-size: 12px; margin: 2px 0; }
  .hop-label { flex: 0 0 9em; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; font-family: ui-monospace, Menlo, Consolas, monospace; }
  .track { position: relative; flex: 1 1 auto; height: 14px; background: #f3f3f3; border-radius: 2px; }
  .hop-bar { position: absolute; left: 0; top: 0; bottom: 0; min-width: 2px; background: var(--ok); border-radius: 2px; }
  .hop-bar.failed { background: var(--bad); }
  .budget-mark { position: absolute; top: -3px; bottom: -3px; width: 2px; margin-left: -1px; background: #222; }
  .hop-numbers { flex: 0 0 22em; color: #555; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
  .no-trace { color: var(--muted); font-size: 12px; }
  table { border-collapse: collapse; font-size: 13px; }
  th, td { border: 1px solid var(--line); padding: 3px 10px; text-align: right; }
  th { background: #fafafa; font-weight: 600; }
  th:first-child { text-align: left; }
  td.zero { color: #bbb; }
  td.nonzero { color: var(--bad); font-weight: 600; }
  #shield-in-flight { font-size: 18px; }
</style>
</head>
<body data-state="loading" data-refreshes="0">
<header>
  <h1>/deadlinez <span id="hop" class="hop-name"></span></h1>
  <p class="meta"><span id="status">loading&hellip;</span> &middot; refreshes every 2 s &middot;
    <a href="metrics">metrics</a> &middot; <a id="json-link" href="deadlinez.json">json</a></p>
</header>

<section>
  <h2>Timeouts by source</h2>
  <p class="legend">DEADLINE_EXCEEDED counted at this hop, by the budget that fired: server side
    (calls this hop answered) and client side (calls it made).</p>
  <table id="timeouts">
    <thead><tr><th>source</th><th>server</th><th>client</th></tr></thead>
    <tbody></tbody>
  </table>
</section>

<section>
  <h2>Shielded work</h2>
  <p>in flight: <strong id="shield-in-flight">0</strong></p>
  <table id="shield">
    <thead><tr><th>started</th><th>completed</th><th>failed</th><th>exceeded bound</th><th>refused</th><th>unobserved</th></tr></thead>
    <tbody><tr>
      <td data-outcome="started">0</td><td data-outcome="completed">0</td><td data-outcome="failed">0</td>
      <td data-outcome="exceeded_bound">0</td><td data-outcome="refused">0</td><td data-outcome="unobserved">0</td>
    </tr></tbody>
  </table>
</section>

<section>
  <h2>Retries</h2>
  <p class="legend">Calls this hop made through a retrying channel or RetryLoop, since start:
    retries started, logical calls a retry saved, and failed attempts not retried, by reason
    (no_room: no budget left for another attempt; throttled: the retry throttle).</p>
  <p>started: <strong id="retries-started">0</strong> &middot; saved calls:
    <strong id="retries-saved">0</strong></p>
  <table id="retries-skipped">
    <thead><tr><th>not retried because</th><th>attempts</th></tr></thead>
    <tbody></tbody>
  </table>
</section>

<section id="recent">
  <h2>Recent calls <span id="recent-count" class="count"></span></h2>
  <p class="legend">Newest finished first (the age is since the call started). One line per hop
    of the call's trace (caller first): the bar is the time spent at that hop, the black mark the
    budget it had on arrival (scale per call). Failed calls are red, with their code and the budget
    that fired.</p>
  <div id="calls"><p id="no-calls" class="empty">no calls yet</p></div>
</section>

<script>
(function () {
  'use strict';
  var SOURCES = ['client', 'request', 'attempt', 'idle', 'downstream', 'exhausted-before-call',
                 'arrived-expired', 'shield', 'slot-wait'];
  var OUTCOMES = ['started', 'completed', 'failed', 'exceeded_bound', 'refused', 'unobserved'];
  var REFRESH_MS = 2000;
  // "/deadlinez" -> "/deadlinez.json", also behind a path prefix.
  var jsonUrl = (location.pathname.replace(/\/+$/, '') || '/deadlinez') + '.json';
  var body = document.body;
  var refreshes = 0;

  function $(id) { return document.getElementById(id); }
  function num(v) { return (typeof v === 'number' && isFinite(v)) ? v : null; }
  function str(v, dflt) { return (typeof v === 'string' && v !== '') ? v : dflt; }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function fmtMs(ms) {
    if (ms === null) return '-';
    if (Math.abs(ms) >= 1000) return (ms / 1000).toFixed(2) + ' s';
    return ms.toFixed(Math.abs(ms) < 10 ? 2 : 1) + ' ms';
  }
  function fmtCount(v) { v = num(v); return v === null ? '0' : String(Math.round(v)); }
  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }

  function renderHopLine(entry, scale) {
    var hop = str(entry.hop, '?');
    var spent = num(entry.spent_ms);
    var budget = num(entry.budget_ms);
    var code = str(entry.code, 'OK');
    var source = str(entry.source, 'none');
    var line = el('div', 'hop-line');
    line.setAttribute('data-hop', hop);
    line.appendChild(el('span', 'hop-label', hop));
    var track = el('div', 'track');
    var bar = el('div', 'hop-bar' + (code !== 'OK' ? ' failed' : ''));
    bar.setAttribute('data-hop', hop);
    bar.setAttribute('data-spent-ms', spent === null ? 'none' : String(spent));
    bar.setAttribute('data-budget-ms', budget === null ? 'none' : String(budget));
    bar.setAttribute('data-code', code);
    bar.style.width = (spent === null ? 0 : Math.min(100, Math.max(0, spent / scale * 100))) + '%';
    bar.title = hop + ': spent ' + fmtMs(spent) + ' of ' + (budget === null ? 'no deadline' : fmtMs(budget));
    track.appendChild(bar);
    if (budget !== null) {
      var mark = el('div', 'budget-mark');
      mark.setAttribute('data-hop', hop);
      mark.style.left = Math.min(100, Math.max(0, budget / scale * 100)) + '%';
      mark.title = hop + ': budget on arrival ' + fmtMs(budget);
      track.appendChild(mark);
    }
    line.appendChild(track);
    var attempts = num(entry.attempts);
    var text = fmtMs(spent) + ' of ' + (budget === null ? 'no deadline' : fmtMs(budget));
    if (attempts !== null && attempts > 0) text += ' \u00b7 ' + plural(attempts, 'attempt');
    text += ' \u00b7 ' + code;
    if (source !== 'none') text += ' (' + source + ')';
    line.appendChild(el('span', 'hop-numbers', text));
    return line;
  }

  function renderCall(call, now) {
    var code = str(call.code, 'OK');
    var source = str(call.source, 'none');
    var method = str(call.method, 'other');
    var trace = Array.isArray(call.trace) ? call.trace : [];
    var row = el('div', 'call-row' + (code !== 'OK' ? ' failed' : ''));
    row.setAttribute('data-method', method);
    row.setAttribute('data-code', code);
    row.setAttribute('data-source', source);
    var head = el('div', 'call-head');
    head.appendChild(el('span', 'call-method', method));
    head.appendChild(el('span', 'call-code', code));
    if (code !== 'OK' || source !== 'none') head.appendChild(el('span', 'call-source', 'source=' + source));
    // Why a failed attempt below was not retried (throttled, no_room, ...).
    var skipped = str(call.retry_skipped, '');
    if (skipped !== '') {
      row.setAttribute('data-retry-skipped', skipped);
      head.appendChild(el('span', 'call-retry', 'not retried: ' + skipped));
    }
    var start = num(call.start_unix_ms);
    if (start !== null && now !== null) {
      head.appendChild(el('span', 'call-age', fmtMs(Math.max(0, now - start)) + ' ago'));
    }
    row.appendChild(head);
    var wf = el('div', 'waterfall');
    // One scale per call: the largest of what any hop spent or was given.
    var scale = 0;
    trace.forEach(function (e) {
      var s = num(e && e.spent_ms), b = num(e && e.budget_ms);
      if (s !== null) scale = Math.max(scale, s);
      if (b !== null) scale = Math.max(scale, b);
    });
    if (!(scale > 0)) scale = 1;
    trace.forEach(function (e) { if (e && typeof e === 'object') wf.appendChild(renderHopLine(e, scale)); });
    if (trace.length === 0) wf.appendChild(el('div', 'no-trace', 'no trace'));
    row.appendChild(wf);
    return row;
  }

  function renderTimeouts(bySource) {
    bySource = (bySource && typeof bySource === 'object') ? bySource : {};
    var sides = ['server', 'client'];
    var names = SOURCES.slice();
    sides.forEach(function (side) {
      var m = bySource[side];
      if (m && typeof m === 'object') {
        Object.keys(m).forEach(function (k) { if (names.indexOf(k) < 0) names.push(k); });
      }
    });
    var tbody = $('timeouts').tBodies[0];
    var rows = names.map(function (source) {
      var tr = el('tr');
      tr.setAttribute('data-source', source);
      tr.appendChild(el('th', null, source));
      sides.forEach(function (side) {
        var m = bySource[side] || {};
        var v = num(m[source]) || 0;
        var td = el('td', v > 0 ? 'nonzero' : 'zero', fmtCount(v));
        td.setAttribute('data-source', source);
        td.setAttribute('data-side', side);
        tr.appendChild(td);
      });
      return tr;
    });
    tbody.replaceChildren.apply(tbody, rows);
  }

  function renderShield(shield) {
    shield = (shield && typeof shield === 'object') ? shield : {};
    $('shield-in-flight').textContent = fmtCount(shield.in_flight);
    OUTCOMES.forEach(function (o) {
      var td = document.querySelector('#shield td[data-outcome="' + o + '"]');
      if (td) td.textContent = fmtCount(shield[o]);
    });
  }

  function renderRetries(retries) {
    retries = (retries && typeof retries === 'object') ? retries : {};
    $('retries-started').textContent = fmtCount(retries.started);
    $('retries-saved').textContent = fmtCount(retries.succeeded_after_retry);
    var skipped = (retries.skipped && typeof retries.skipped === 'object') ? retries.skipped : {};
    var tbody = $('retries-skipped').tBodies[0];
    tbody.replaceChildren.apply(tbody, Object.keys(skipped).sort().map(function (reason) {
      var tr = el('tr');
      tr.appendChild(el('th', null, reason));
      var v = num(skipped[reason]) || 0;
      var td = el('td', v > 0 ? 'nonzero' : 'zero', fmtCount(v));
      td.setAttribute('data-reason', reason);
      tr.appendChild(td);
      return tr;
    }));
  }

  function render(data) {
    if (!data || typeof data !== 'object') throw new Error('not a JSON object');
    var hop = str(data.hop, '(no hop name)');
    $('hop').textContent = hop;
    document.title = '/deadlinez \u00b7 ' + hop;
    var now = num(data.now_unix_ms);
    var recent = Array.isArray(data.recent) ? data.recent : [];
    var calls = $('calls');
    if (recent.length === 0) {
      calls.replaceChildren(el('p', 'empty', 'no calls yet'));
      calls.firstChild.id = 'no-calls';
    } else {
      calls.replaceChildren.apply(calls, recent.filter(function (c) {
        return c && typeof c === 'object';
      }).map(function (c) { return renderCall(c, now); }));
    }
    var failed = recent.filter(function (c) { return c && c.code !== 'OK'; }).length;
    $('recent-count').textContent = '(' + recent.length + ', ' + failed + ' failed)';
    renderTimeouts(data.timeouts_by_source);
    renderShield(data.shield);
    renderRetries(data.retries);
  }

  function refresh() {
    fetch(jsonUrl, { cache: 'no-store', headers: { 'Accept': 'application/json' } })
      .then(function (r) {
        if (!r.ok) throw new Error('HTTP ' + r.status);
        return r.json();
      })
      .then(function (data) {
        render(data);
        refreshes += 1;
        body.setAttribute('data-state', 'ok');
        body.setAttribute('data-refreshes', String(refreshes));
        $('status').textContent = 'updated ' + new Date().toLocaleTimeString();
      })
      .catch(function (e) {
        body.setAttribute('data-state', 'error');
        $('status').textContent = 'could not load ' + jsonUrl + ': ' + (e && e.message ? e.message : e) +
          (refreshes > 0 ? ' (showing the last data)' : '');
      })
      .then(function () { setTimeout(refresh, REFRESH_MS); });
  }

  $('json-link').setAttribute('href', jsonUrl);
  renderTimeouts({});
  refresh();
})();
</script>
</body>
</html>
)HTML";

}  // namespace

absl::string_view DeadlinezPageHtml() { return absl::string_view(kPage, sizeof(kPage) - 1); }

}  // namespace hopbudget::internal
