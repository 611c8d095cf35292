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
  :root { --ok: #3b7dd8; --bad: #c9302c; --muted: #777; --line: #e3e3e3; }
  * { box-sizing: border-box; }
  body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; padding: 16px 24px; color: #222; background: #fff; }
  h1 { font-size: 20px; margin: 0 0 4px; overflow-wrap: anywhere; }
  h1 .hop-name { color: var(--ok); font-family: ui-monospace, Menlo, Consolas, monospace; }
  h2 { font-size: 16px; margin: 20px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
  h3 { font-size: 14px; margin: 0 0 6px; }
  a { color: var(--ok); }
  .meta, .legend, .empty, .note { color: var(--muted); margin: 0 0 8px; }
  .note { font-size: 12px; }
  body[data-state="error"] #status { color: var(--bad); font-weight: 600; }
  .count { color: var(--muted); font-weight: normal; }
  .peers { margin: 0 0 4px; overflow-wrap: anywhere; }
  .peers a { margin-right: 12px; font-family: ui-monospace, Menlo, Consolas, monospace; }
  /* The summary: cards of their natural width that wrap, never cut. */
  .cards { display: flex; flex-wrap: wrap; gap: 12px 16px; align-items: flex-start; }
  .card { flex: 0 1 auto; max-width: 100%; border: 1px solid var(--line); border-radius: 4px; padding: 6px 10px 8px; }
  .card[hidden] { display: none; }
  .card .note { max-width: 26em; margin: 4px 0 0; }
  .card p { margin: 0 0 4px; }
  table { border-collapse: collapse; font-size: 12px; }
  th, td { border: 1px solid var(--line); padding: 1px 6px; text-align: right; white-space: nowrap; }
  tbody th.sub { padding-left: 16px; font-weight: normal; }
  tbody tr.group th { background: none; color: var(--muted); font-weight: normal; border-left: 0; border-right: 0; }
  th { background: #fafafa; font-weight: 600; }
  tbody th, thead th:first-child { text-align: left; }
  td.zero { color: #bbb; }
  td.nonzero { color: var(--bad); font-weight: 600; }
  td.plain { color: #222; }
  #shield-in-flight { font-size: 16px; }
  dl.policy { display: grid; grid-template-columns: max-content minmax(0, 24em); gap: 1px 12px; margin: 0; font-size: 12px; }
  dl.policy dt { color: var(--muted); }
  dl.policy dd { margin: 0; font-family: ui-monospace, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
  dl.policy dd.unfit { color: var(--bad); font-family: inherit; }
  /* Filters */
  #filters { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 0 0 8px; font-size: 13px; }
  #filters .group { display: flex; flex-wrap: wrap; gap: 4px 8px; align-items: baseline; min-width: 0; }
  #filters .group-label { color: var(--muted); }
  #filters a { overflow-wrap: anywhere; }
  #filters a.active { font-weight: 700; color: #222; text-decoration: none; background: #eef3fb; padding: 0 4px; border-radius: 3px; }
  /* Recent calls */
  .call-row { border: 1px solid var(--line); border-radius: 4px; padding: 6px 8px; margin: 0 0 6px; }
  .call-row.failed { border-color: var(--bad); background: #fdf1f0; }
  .call-head { display: flex; flex-wrap: wrap; gap: 2px 12px; margin-bottom: 4px; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
  .call-head > span { min-width: 0; overflow-wrap: anywhere; }
  .call-code { font-weight: 600; color: #2d7d32; }
  .call-row.failed .call-code, .call-row.failed .call-source { color: var(--bad); font-weight: 600; }
  .call-retry { color: var(--bad); }
  .call-age { color: var(--muted); }
  .hop-line { display: flex; align-items: center; gap: 8px; font-size: 12px; margin: 2px 0; }
  .hop-label { flex: 0 0 9em; min-width: 0; overflow-wrap: anywhere; font-family: ui-monospace, Menlo, Consolas, monospace; }
  .track { position: relative; flex: 1 1 auto; min-width: 80px; height: 14px; background: #f3f3f3; border-radius: 2px; }
  .hop-bar { position: absolute; left: 0; top: 0; bottom: 0; min-width: 2px; background: var(--ok); border-radius: 2px; }
  .hop-bar.failed { background: var(--bad); }
  .budget-mark { position: absolute; top: -3px; bottom: -3px; width: 2px; margin-left: -1px; background: #222; }
  .hop-numbers { flex: 0 1 26em; min-width: 0; color: #555; overflow-wrap: anywhere; }
  .no-trace { color: var(--muted); font-size: 12px; }
</style>
</head>
<body data-state="loading" data-refreshes="0">
<header>
  <h1>/deadlinez <span id="hop" class="hop-name"></span></h1>
  <p class="meta"><span id="status">loading&hellip;</span> &middot; refreshes every 2 s &middot;
    <a href="metrics">metrics</a> &middot; <a id="json-link" href="deadlinez.json">json</a></p>
  <nav id="peers" class="peers"><span class="count">other hops:</span> <span id="no-peers" class="count">none given</span></nav>
</header>

<section id="summary">
  <h2>Summary <span id="windows-note" class="count"></span></h2>
  <p class="legend">Counted at this hop. Timeouts: DEADLINE_EXCEEDED by the budget that fired, on
    calls this hop answered (server) and calls it made (client). Retries: calls it made through a
    retrying channel or RetryLoop.</p>
  <div class="cards">
    <div class="card" id="card-timeouts">
      <h3>Timeouts by source</h3>
      <table id="timeouts">
        <thead>
          <tr><th rowspan="2">source</th><th colspan="3">server</th><th colspan="3">client</th></tr>
          <tr><th>total</th><th>1 min</th><th>10 min</th><th>total</th><th>1 min</th><th>10 min</th></tr>
        </thead>
        <tbody></tbody>
      </table>
    </div>
    <div class="card" id="card-retries">
      <h3>Retries</h3>
      <table id="retries">
        <thead><tr><th></th><th>total</th><th>1 min</th><th>10 min</th></tr></thead>
        <tbody></tbody>
      </table>
    </div>
    <div class="card" id="card-shield">
      <h3>Shielded work</h3>
      <p>in flight: <strong id="shield-in-flight">0</strong></p>
      <table id="shield">
        <thead><tr><th></th><th>total</th><th>1 min</th><th>10 min</th></tr></thead>
        <tbody></tbody>
      </table>
    </div>
    <div class="card" id="card-shadow" hidden>
      <h3>Shadow mode</h3>
      <p class="note">Methods in shadow mode: what hopbudget would have done, and did not.</p>
      <table id="shadow">
        <thead><tr><th></th><th>total</th><th>1 min</th><th>10 min</th></tr></thead>
        <tbody></tbody>
      </table>
    </div>
    <div class="card" id="card-calls">
      <h3>Calls</h3>
      <table id="calls-table">
        <thead><tr><th></th><th>total</th><th>1 min</th><th>10 min</th></tr></thead>
        <tbody></tbody>
      </table>
      <p class="note" id="call-rates"></p>
    </div>
    <div class="card" id="card-policy">
      <h3>Policy in force</h3>
      <dl id="policy" class="policy"></dl>
      <p id="no-policy" class="note">not given to the exporter (HttpExporterOptions::policy)</p>
    </div>
  </div>
</section>

<section id="recent">
  <h2>Recent calls <span id="recent-count" class="count"></span></h2>
  <nav id="filters"></nav>
  <p class="legend">Newest first by start time (the age is since the call started). One line per
    hop of the call's trace (caller first): the bar is the time spent at that hop, the black mark
    the budget it had on arrival (scale per call). Failed calls are red, with their code, the
    budget that fired, and why a failed attempt was not retried.</p>
  <div id="calls"><p id="no-calls" class="empty">no calls yet</p></div>
</section>

<script>
(function () {
  'use strict';
  var SOURCES = ['client', 'request', 'attempt', 'idle', 'downstream', 'exhausted-before-call',
                 'arrived-expired', 'shield', 'slot-wait', 'queue-wait', 'cannot-finish'];
  var OUTCOMES = ['started', 'completed', 'failed', 'exceeded_bound', 'refused', 'unobserved'];
  var WINDOWS = ['1m', '10m'];
  // Why a failed attempt was not retried (RetryOutcomeName), in words.
  var SKIP_WHY = {
    no_room: 'no room left in the deadline for another attempt',
    throttled: 'the retry throttle: too many recent failures',
    attempts_exhausted: 'max_attempts reached',
    pushback_do_not_retry: 'the server said not to retry (grpc-retry-pushback-ms)',
    budget_fired: 'a request or client budget fired, not the attempt\u2019s',
    committed: 'a response had already been delivered',
    not_retryable_code: 'the code is not in retryable_codes'
  };
  var FILTER_KEYS = ['failed', 'method', 'source'];
  var REFRESH_MS = 2000;
  // "/deadlinez" -> "/deadlinez.json", also behind a path prefix; the page's
  // filters (its query) go to the JSON.
  var jsonUrl = (location.pathname.replace(/\/+$/, '') || '/deadlinez') + '.json';
  var query = new URLSearchParams(location.search);
  var body = document.body;
  var refreshes = 0;

  function $(id) { return document.getElementById(id); }
  function num(v) { return (typeof v === 'number' && isFinite(v)) ? v : null; }
  function str(v, dflt) { return (typeof v === 'string' && v !== '') ? v : dflt; }
  function obj(v) { return (v && typeof v === 'object') ? v : {}; }
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
  function fmtSpan(s) {
    if (s === null) return '-';
    return s >= 120 ? (s / 60).toFixed(1) + ' min' : Math.round(s) + ' s';
  }
  function fmtCount(v) { v = num(v); return v === null ? '0' : String(Math.round(v)); }
  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }

  // The windows by name ('1m', '10m'), each {span_s, complete, counts}.
  function windowsOf(data) {
    var out = {};
    (Array.isArray(data.windows) ? data.windows : []).forEach(function (w) {
      if (w && typeof w.name === 'string') out[w.name] = w;
    });
    return out;
  }

  // One table row: a label, then the counter's total and its deltas over
  // the windows; `alarm` colours non-zero counts red.
  function counterRow(label, key, totals, windows, alarm, attrs) {
    var tr = el('tr');
    Object.keys(attrs || {}).forEach(function (k) { tr.setAttribute(k, attrs[k]); });
    tr.appendChild(el('th', null, label));
    ['total'].concat(WINDOWS).forEach(function (name) {
      var v;
      if (name === 'total') {
        v = num(totals[key]) || 0;
      } else {
        var w = windows[name];
        v = (w && num(w.span_s) > 0) ? (num(obj(w.counts)[key]) || 0) : null;
      }
      var td = el('td', v === null ? 'zero' : (alarm ? (v > 0 ? 'nonzero' : 'zero') : 'plain'),
                  v === null ? '-' : fmtCount(v));
      td.setAttribute('data-key', key);
      td.setAttribute('data-window', name);
      Object.keys(attrs || {}).forEach(function (k) { td.setAttribute(k, attrs[k]); });
      tr.appendChild(td);
    });
    return tr;
  }

  function fill(tbody, rows) { tbody.replaceChildren.apply(tbody, rows); }

  function renderWindowsNote(windows) {
    var parts = WINDOWS.map(function (name) {
      var w = windows[name];
      if (!w || !(num(w.span_s) > 0)) return name.replace('m', ' min') + ': no sample yet';
      return name.replace('m', ' min') + ' = the last ' + fmtSpan(num(w.span_s)) +
        (w.complete ? '' : ' (all there is so far)');
    });
    $('windows-note').textContent = '(total since start; ' + parts.join(', ') + ')';
  }

  function renderCalls(totals, windows) {
    fill($('calls-table').tBodies[0], [
      counterRow('served', 'calls.server', totals, windows, false),
      counterRow('served, failed', 'failed.server', totals, windows, true),
      counterRow('made', 'calls.client', totals, windows, false),
      counterRow('made, failed', 'failed.client', totals, windows, true)
    ]);
    var rates = WINDOWS.map(function (name) {
      var w = windows[name];
      var span = w ? num(w.span_s) : null;
      if (!(span > 0)) return null;
      var c = obj(w.counts);
      return name.replace('m', ' min') + ': ' + ((num(c['calls.server']) || 0) / span).toFixed(2) +
        ' served/s, ' + ((num(c['failed.server']) || 0) / span).toFixed(2) + ' failed/s';
    }).filter(function (x) { return x !== null; });
    $('call-rates').textContent = rates.length ? rates.join(' \u00b7 ') : 'rates: no sample yet';
  }

  function renderTimeouts(totals, windows) {
    var tbody = $('timeouts').tBodies[0];
    fill(tbody, SOURCES.map(function (source) {
      var tr = el('tr');
      tr.setAttribute('data-source', source);
      tr.appendChild(el('th', null, source));
      ['server', 'client'].forEach(function (side) {
        var key = 'timeouts.' + side + '.' + source;
        var row = counterRow('', key, totals, windows, true, { 'data-source': source, 'data-side': side });
        Array.prototype.slice.call(row.children, 1).forEach(function (td) { tr.appendChild(td); });
      });
      return tr;
    }));
  }

  function renderRetries(totals, windows) {
    var rows = [counterRow('started', 'retries.started', totals, windows, false, { 'data-row': 'started' }),
                counterRow('saved calls', 'retries.succeeded_after_retry', totals, windows, false,
                           { 'data-row': 'saved' })];
    var group = el('tr', 'group');
    var label = el('th', null, 'failed attempts not retried, because:');
    label.setAttribute('colspan', '4');
    group.appendChild(label);
    rows.push(group);
    Object.keys(totals).filter(function (k) { return k.indexOf('retries.skipped.') === 0; }).sort()
      .forEach(function (key) {
        var reason = key.substring('retries.skipped.'.length);
        var tr = counterRow(reason, key, totals, windows, true, { 'data-reason': reason });
        tr.firstChild.className = 'sub';
        if (SKIP_WHY[reason]) tr.firstChild.title = SKIP_WHY[reason];
        rows.push(tr);
      });
    fill($('retries').tBodies[0], rows);
  }

  // Shown once a method in shadow mode has had a call hopbudget would have
  // changed.
  function renderShadow(totals, windows) {
    var actions = [['refuse', 'would refuse'], ['cut', 'would cut at the cap'],
                   ['fail_fast', 'would fail fast']];
    var any = actions.some(function (a) { return (num(totals['shadow.' + a[0]]) || 0) > 0; });
    $('card-shadow').hidden = !any;
    fill($('shadow').tBodies[0], actions.map(function (a) {
      return counterRow(a[1], 'shadow.' + a[0], totals, windows, false, { 'data-action': a[0] });
    }));
  }

  function renderShield(shield, totals, windows) {
    $('shield-in-flight').textContent = fmtCount(obj(shield).in_flight);
    fill($('shield').tBodies[0], OUTCOMES.map(function (o) {
      return counterRow(o.replace('_', ' '), 'shield.' + o, totals, windows, o !== 'started' && o !== 'completed',
                        { 'data-outcome': o });
    }));
  }

  function renderPolicy(policy, retry) {
    var dl = $('policy');
    var items = [];
    function add(label, field, text, cls) {
      var dt = el('dt', null, label);
      var dd = el('dd', cls || null, text);
      dd.setAttribute('data-field', field);
      items.push(dt, dd);
    }
    function ms(v) { return v === null ? 'none' : fmtMs(v); }
    if (policy && typeof policy === 'object') {
      add('request cap', 'request_cap', ms(num(policy.request_cap_ms)));
      add('attempt cap', 'attempt_cap', ms(num(policy.attempt_cap_ms)));
      add('hop reserve', 'hop_reserve', ms(num(policy.hop_reserve_ms)));
      add('min attempt budget', 'min_attempt_budget', ms(num(policy.min_attempt_budget_ms)));
      add('max inbound budget', 'max_inbound_budget', ms(num(policy.max_inbound_budget_ms)));
    }
    if (retry && typeof retry === 'object') {
      var codes = Array.isArray(retry.retryable_codes) ? retry.retryable_codes.join(', ') : '';
      add('retry attempts', 'max_attempts', fmtCount(retry.max_attempts) + ' at most, on ' + (codes || 'attempt timeouts only'));
      add('retry backoff', 'backoff', fmtMs(num(retry.initial_backoff_ms)) + ' .. ' + fmtMs(num(retry.max_backoff_ms)) +
          ', \u00d7' + (num(retry.backoff_multiplier) === null ? '?' : retry.backoff_multiplier));
      if (retry.fit && typeof retry.fit === 'object') {
        add('attempts that fit', 'fit', fmtCount(retry.fit.attempts_if_all_time_out) + ' if each times out, ' +
            fmtCount(retry.fit.attempts_if_fast_failures) + ' if each fails at once; a retry after an attempt timeout ' +
            (retry.fit.timeout_retry_possible ? 'fits' : 'never fits'));
      } else if (typeof retry.unfit === 'string') {
        add('attempts that fit', 'fit', retry.unfit, 'unfit');
      }
    }
    dl.replaceChildren.apply(dl, items);
    $('no-policy').hidden = items.length > 0;
  }

  function renderPeers(peers) {
    var nav = $('peers');
    var links = (Array.isArray(peers) ? peers : []).filter(function (p) {
      return p && typeof p.name === 'string' && typeof p.url === 'string' && /^https?:\/\//.test(p.url);
    }).map(function (p) {
      var a = el('a', 'peer', p.name);
      a.setAttribute('href', p.url);
      a.setAttribute('data-peer', p.name);
      return a;
    });
    var label = nav.firstElementChild;
    if (links.length === 0) {
      var none = el('span', 'count', 'none given');
      none.id = 'no-peers';
      links = [none];
    }
    nav.replaceChildren.apply(nav, [label, document.createTextNode(' ')].concat(links));
  }

  // A link to this page with `key` set to `value` (null: removed), the other
  // filters kept.
  function filterHref(key, value) {
    var q = new URLSearchParams();
    FILTER_KEYS.forEach(function (k) {
      var v = k === key ? value : query.get(k);
      if (v !== null && v !== '') q.set(k, v);
    });
    var s = q.toString();
    return s ? '?' + s : location.pathname;
  }

  function renderFilters(data) {
    var filter = obj(data.filter);
    var groups = [];
    function group(label, key, options) {
      var g = el('span', 'group');
      g.setAttribute('data-group', key);
      g.appendChild(el('span', 'group-label', label));
      options.forEach(function (o) {
        var a = el('a', 'filter' + (o.active ? ' active' : ''), o.text);
        a.setAttribute('href', filterHref(key, o.value));
        a.setAttribute('data-filter', key);
        a.setAttribute('data-value', o.value === null ? '' : o.value);
        g.appendChild(a);
      });
      groups.push(g);
    }
    group('show:', 'failed', [{ text: 'all', value: null, active: !filter.failed },
                              { text: 'failed only', value: '1', active: !!filter.failed }]);
    var methods = (Array.isArray(data.methods_seen) ? data.methods_seen : []).filter(function (m) { return typeof m === 'string'; });
    var method = str(filter.method, '');
    if (method && methods.indexOf(method) < 0) methods.push(method);
    group('method:', 'method', [{ text: 'any', value: null, active: !method }].concat(methods.map(function (m) {
      return { text: m, value: m, active: m === method };
    })));
    var sources = (Array.isArray(data.sources_seen) ? data.sources_seen : []).filter(function (m) { return typeof m === 'string'; });
    var source = str(filter.source, '');
    if (source && sources.indexOf(source) < 0) sources.push(source);
    group('budget that fired:', 'source', [{ text: 'any', value: null, active: !source }].concat(sources.map(function (m) {
      return { text: m, value: m, active: m === source };
    })));
    var nav = $('filters');
    nav.replaceChildren.apply(nav, groups);
  }

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
      head.appendChild(el('span', 'call-retry', 'not retried: ' + skipped +
                          (SKIP_WHY[skipped] ? ' (' + SKIP_WHY[skipped] + ')' : '')));
    }
    var start = num(call.start_unix_ms);
    if (start !== null && now !== null) {
      var age = Math.max(0, now - start);
      row.setAttribute('data-age-ms', String(Math.round(age)));
      head.appendChild(el('span', 'call-age', 'started ' + fmtMs(age) + ' ago'));
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

  function render(data) {
    if (!data || typeof data !== 'object') throw new Error('not a JSON object');
    var hop = str(data.hop, '(no hop name)');
    $('hop').textContent = hop;
    document.title = '/deadlinez \u00b7 ' + hop;
    var now = num(data.now_unix_ms);
    var totals = obj(data.totals);
    var windows = windowsOf(data);
    renderWindowsNote(windows);
    renderCalls(totals, windows);
    renderTimeouts(totals, windows);
    renderRetries(totals, windows);
    renderShield(data.shield, totals, windows);
    renderShadow(totals, windows);
    renderPolicy(data.policy, data.retry_policy);
    renderPeers(data.peers);
    renderFilters(data);
    var recent = (Array.isArray(data.recent) ? data.recent : []).filter(function (c) {
      return c && typeof c === 'object';
    });
    var calls = $('calls');
    if (recent.length === 0) {
      var filtered = num(data.recent_total) > 0;
      calls.replaceChildren(el('p', 'empty', filtered ? 'no call matches the filters' : 'no calls yet'));
      calls.firstChild.id = 'no-calls';
    } else {
      calls.replaceChildren.apply(calls, recent.map(function (c) { return renderCall(c, now); }));
    }
    var failed = recent.filter(function (c) { return c.code !== 'OK'; }).length;
    var total = num(data.recent_total);
    $('recent-count').textContent = '(' + recent.length +
      (total !== null && total !== recent.length ? ' shown of ' + total : '') + ', ' + failed + ' failed)';
    if (now !== null) {
      $('status').textContent = 'data of ' + new Date(now).toISOString().replace('T', ' ').substring(0, 19) + ' UTC';
    }
  }

  function refresh() {
    fetch(jsonUrl + location.search, { cache: 'no-store', headers: { 'Accept': 'application/json' } })
      .then(function (r) {
        if (!r.ok) {
          return r.text().then(function (t) {
            throw new Error('HTTP ' + r.status + (t && t.length < 500 ? ': ' + t : ''));
          });
        }
        return r.json();
      })
      .then(function (data) {
        render(data);
        refreshes += 1;
        body.setAttribute('data-state', 'ok');
        body.setAttribute('data-refreshes', String(refreshes));
      })
      .catch(function (e) {
        body.setAttribute('data-state', 'error');
        $('status').textContent = 'could not load ' + jsonUrl + ': ' + (e && e.message ? e.message : e) +
          (refreshes > 0 ? ' (showing the last data)' : '');
      })
      .then(function () { setTimeout(refresh, REFRESH_MS); });
  }

  $('json-link').setAttribute('href', jsonUrl + location.search);
  renderTimeouts({}, {});
  refresh();
})();
</script>
</body>
</html>
)HTML";

}  // namespace

absl::string_view DeadlinezPageHtml() { return absl::string_view(kPage, sizeof(kPage) - 1); }

}  // namespace hopbudget::internal
