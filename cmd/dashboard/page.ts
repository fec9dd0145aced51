// The dashboard's static page: HTML, CSS and the script, as constants so that they ship in dist
// with the service (no CDN, no build step, nothing fetched from anywhere but this server). The page
// carries no data: the script reads the state from `events` with the bearer token (and posts an
// approval to `api/approve` with the same header, never a cookie), and builds
// every element with createElement/textContent (the CSP's Trusted Types rule makes an
// `innerHTML = string` throw, so peer text can never become markup).

/**
 * Headers of every dashboard answer. The policy allows scripts, styles, images and fetches from
 * this origin only, no inline code, no plugins, no framing, no form posts; `require-trusted-types-for`
 * turns every HTML-parsing sink (innerHTML, outerHTML, insertAdjacentHTML, document.write) into an
 * error, and `trusted-types 'none'` forbids creating a policy that would re-open them.
 */
export const securityHeaders: Readonly<Record<string, string>> = Object.freeze({
  'content-security-policy': [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self'",
    "connect-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
    "require-trusted-types-for 'script'",
    "trusted-types 'none'",
  ].join('; '),
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
});

// Every URL is relative, so the page also works under a path prefix (kubectl proxy, an ingress).
export const pageHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>fleetcache dashboard</title>
<link rel="icon" href="favicon.svg" type="image/svg+xml">
<link rel="stylesheet" href="app.css">
<script src="app.js" defer></script>
</head>
<body>
<header>
  <h1><img src="favicon.svg" alt="" width="22" height="22"> fleetcache</h1>
  <span id="connection" class="pill" data-state="connecting">connecting</span>
  <span id="updated" class="muted"></span>
  <span class="spacer"></span>
  <button id="forget" type="button" hidden>Forget token</button>
</header>
<form id="login" hidden>
  <p id="login-reason" class="warn"></p>
  <label for="token">Bearer token</label>
  <input id="token" type="password" autocomplete="off" spellcheck="false" required>
  <button type="submit">Connect</button>
  <p class="muted">A token that may <code>get</code> the non-resource URL <code>/dashboard/events</code> on the
  management cluster (ClusterRole <code>fleetcache-metrics-reader</code>), e.g. from <code>kubectl create token</code>.
  It is kept in this tab only and sent in the Authorization header, never in a URL. Approving a
  promotion also needs the verb <code>approve</code> on that Pipeline (ClusterRole <code>fleetcache-pipeline-approver</code>).</p>
</form>
<main>
  <section>
    <h2>Pipelines</h2>
    <div id="pipelines"><p class="muted">Waiting for the service…</p></div>
  </section>
  <section id="shards-section" hidden>
    <h2>Shards</h2>
    <div id="shards"></div>
  </section>
  <section>
    <h2>Clusters</h2>
    <div id="clusters"></div>
  </section>
  <section>
    <h2>Caches</h2>
    <div id="caches"></div>
  </section>
</main>
</body>
</html>
`;

export const faviconSvg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect width="32" height="32" rx="7" fill="#326ce5"/><circle cx="9" cy="16" r="4" fill="#fff"/><circle cx="23" cy="9" r="4" fill="#fff"/><circle cx="23" cy="23" r="4" fill="#fff"/><path d="M12.5 14.5 19.5 10.5M12.5 17.5l7 4" stroke="#fff" stroke-width="2"/></svg>
`;

export const styleCss = `:root {
  color-scheme: light dark;
  --bg: #f6f7f9; --fg: #1d2330; --muted: #667085; --card: #fff; --line: #e3e6ec;
  --ok: #12805c; --ok-bg: #e3f6ee; --bad: #c4320a; --bad-bg: #fdebe6; --wait: #9a6700; --wait-bg: #fff4d6;
  --accent: #326ce5;
}
@media (prefers-color-scheme: dark) {
  :root { --bg: #12151b; --fg: #e6e9ef; --muted: #98a2b3; --card: #1b2029; --line: #2c3340;
    --ok: #4cc38a; --ok-bg: #113326; --bad: #ff8a65; --bad-bg: #3a1d14; --wait: #f5c451; --wait-bg: #382c0d; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg); color: var(--fg); }
header { display: flex; align-items: center; gap: 12px; padding: 10px 20px; background: var(--card); border-bottom: 1px solid var(--line); position: sticky; top: 0; z-index: 1; }
header h1 { font-size: 18px; margin: 0; display: flex; align-items: center; gap: 8px; }
.spacer { flex: 1; }
main { padding: 8px 20px 40px; max-width: 1400px; }
h2 { font-size: 15px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); margin: 22px 0 10px; }
h3 { font-size: 16px; margin: 0; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
.muted { color: var(--muted); }
.warn { color: var(--bad); font-weight: 600; }
.pill { display: inline-block; padding: 1px 9px; border-radius: 999px; font-size: 12px; font-weight: 600; background: var(--line); color: var(--fg); white-space: nowrap; }
.pill.ok, .pill[data-state="live"] { background: var(--ok-bg); color: var(--ok); }
.pill.bad, .pill[data-state="refused"], .pill[data-state="disconnected"] { background: var(--bad-bg); color: var(--bad); }
.pill.wait, .pill[data-state="connecting"] { background: var(--wait-bg); color: var(--wait); }
form#login { margin: 16px 20px; padding: 16px; background: var(--card); border: 1px solid var(--line); border-radius: 10px; max-width: 760px; }
form#login input { width: 420px; max-width: 100%; padding: 6px 8px; margin: 0 8px; font: inherit; }
button { font: inherit; padding: 5px 12px; border-radius: 6px; border: 1px solid var(--line); background: var(--card); color: var(--fg); cursor: pointer; }
.pipeline { background: var(--card); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; margin-bottom: 14px; }
.pipeline-head { display: flex; align-items: center; gap: 10px; flex-wrap: wrap; }
.pipeline-head .message { flex-basis: 100%; }
.envs { display: flex; align-items: stretch; gap: 0; margin: 14px 0 6px; flex-wrap: wrap; }
.env { flex: 1 1 200px; min-width: 180px; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; border-top: 4px solid var(--wait); }
.env[data-ready="true"] { border-top-color: var(--ok); }
.env .name { font-weight: 700; text-transform: uppercase; letter-spacing: .04em; font-size: 12px; color: var(--muted); }
.env .revision { font: 600 22px/1.3 ui-monospace, SFMono-Regular, Menlo, monospace; margin: 2px 0; }
.arrow { align-self: center; padding: 0 8px; color: var(--muted); font-size: 20px; }
.targets { list-style: none; margin: 6px 0 0; padding: 0; font-size: 12px; }
.targets li { margin: 2px 0; overflow-wrap: anywhere; }
.inflight { margin: 10px 0 4px; }
.inflight .pill { margin-right: 6px; }
table { border-collapse: collapse; width: 100%; background: var(--card); border: 1px solid var(--line); border-radius: 8px; overflow: hidden; }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-size: 12px; color: var(--muted); font-weight: 600; background: var(--bg); }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.error { color: var(--bad); overflow-wrap: anywhere; max-width: 420px; }
td[data-at] { white-space: nowrap; }
details { margin-top: 8px; }
summary { cursor: pointer; color: var(--muted); }
details table { margin-top: 6px; }
.scroll { overflow-x: auto; max-width: 100%; }
.pipeline-head .message, .inflight span { overflow-wrap: anywhere; }
.inflight > div { display: flex; align-items: center; gap: 6px; flex-wrap: wrap; margin: 4px 0; }
button.approve { background: var(--accent); border-color: var(--accent); color: #fff; font-weight: 600; }
button.approve:disabled { opacity: .6; cursor: progress; }
.notice { margin: 6px 0 0; overflow-wrap: anywhere; }
.notice[data-kind="ok"] { color: var(--ok); }
.notice[data-kind="bad"] { color: var(--bad); }
/* Phones: one column, nothing wider than the screen (tables scroll inside their box). */
@media (max-width: 600px) {
  header { flex-wrap: wrap; gap: 6px 10px; padding: 8px 12px; }
  main { padding: 4px 12px 32px; }
  form#login { margin: 12px; }
  form#login input { width: 100%; margin: 6px 0; }
  .envs { flex-direction: column; }
  .env { flex-basis: auto; min-width: 0; }
  .arrow { transform: rotate(90deg); padding: 2px 0; }
  .inflight button.approve { width: 100%; padding: 10px 12px; }
  .scroll td.muted { min-width: 16em; }
}

.truncated { background: var(--wait-bg); color: var(--wait); border-radius: 8px; padding: 8px 12px; margin-bottom: 14px; overflow-wrap: anywhere; }
.targets li.omitted { color: var(--wait); font-style: italic; }
.fleet { font-size: 12px; margin: 6px 0 0; overflow-wrap: anywhere; }
.waves { margin: 6px 0 0; padding-left: 18px; font-size: 12px; }
.waves li { margin: 3px 0; overflow-wrap: anywhere; }
.waves li > span { margin-right: 6px; }
.waves .wave-name { font-weight: 600; }
.shard-keys { overflow-wrap: anywhere; font-size: 12px; }
tr[data-self="true"] td:first-child { font-weight: 600; }
`;

// Plain ES2020 for any current browser, written without template literals so that it sits in this
// TypeScript file unchanged.
export const appJs = String.raw`'use strict';
(function () {
  var TOKEN_KEY = 'fleetcache.dashboard.token';
  var current = null;
  var skewMs = 0;
  var reading = null;
  var retryMs = 1000;
  var retryTimer = null;
  // The last action's outcome per Pipeline, shown until the next one: a re-render keeps it.
  var notices = {};

  var reconnectAsked = false;

  function byId(id) { return document.getElementById(id); }

  // The only way text reaches the page: textContent, and attributes with fixed names.
  function el(tag, props, children) {
    var node = document.createElement(tag);
    if (props) {
      Object.keys(props).forEach(function (key) {
        var value = props[key];
        if (value === undefined || value === null) return;
        if (key === 'text') node.textContent = String(value);
        else if (key === 'class') node.className = value;
        else node.setAttribute(key, String(value));
      });
    }
    (children || []).forEach(function (child) { if (child) node.appendChild(child); });
    return node;
  }
  function replace(container, children) {
    while (container.firstChild) container.removeChild(container.firstChild);
    children.forEach(function (child) { if (child) container.appendChild(child); });
  }
  function pill(text, kind) { return el('span', { class: 'pill ' + (kind || ''), text: text }); }

  function storedToken() { try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; } }
  function storeToken(token) { try { if (token) sessionStorage.setItem(TOKEN_KEY, token); else sessionStorage.removeItem(TOKEN_KEY); } catch (e) { /* private mode */ } }

  function setConnection(state, text) {
    var node = byId('connection');
    node.setAttribute('data-state', state);
    node.textContent = text;
    byId('forget').hidden = storedToken() === '';
  }

  function relative(at) {
    var seconds = Math.round((at - (Date.now() + skewMs)) / 1000);
    var abs = Math.abs(seconds);
    var text = abs < 90 ? abs + ' s' : abs < 5400 ? Math.round(abs / 60) + ' min' : Math.round(abs / 3600) + ' h';
    return seconds >= 0 ? 'in ' + text : text + ' ago';
  }
  function timeCell(at) {
    if (at === undefined || at === null || at === '') return el('td', { class: 'muted', text: '—' });
    var ms = typeof at === 'number' ? at : Date.parse(at);
    if (!isFinite(ms)) return el('td', { text: String(at) });
    return el('td', { 'data-at': ms, title: new Date(ms).toISOString(), text: relative(ms) });
  }
  function refreshTimes() {
    var nodes = document.querySelectorAll('[data-at]');
    for (var i = 0; i < nodes.length; i++) nodes[i].textContent = relative(Number(nodes[i].getAttribute('data-at')));
  }

  function table(headers, rows, emptyText) {
    if (rows.length === 0) return el('p', { class: 'muted', text: emptyText });
    return el('div', { class: 'scroll' }, [el('table', null, [
      el('thead', null, [el('tr', null, headers.map(function (h) { return el('th', { class: h.num ? 'num' : '', text: h.text }); }))]),
      el('tbody', null, rows),
    ])]);
  }

  // An approval, with the same bearer header as the stream (no cookie: nothing for another site to ride on).
  // A retry of a stopped wave is the same request with "action": "retry" (and the same right).
  function approve(p, r, button) {
    var id = p.namespace + '/' + p.name;
    var token = storedToken();
    var retry = r.action === 'retry';
    button.disabled = true;
    notices[id] = { kind: 'wait', text: (retry ? 'Retrying ' : 'Approving ') + r.revision + ' for ' + r.environment + '…' };
    if (current) render(current);
    fetch('api/approve', {
      method: 'POST',
      headers: { authorization: 'Bearer ' + token, 'content-type': 'application/json' },
      body: JSON.stringify(retry ? { namespace: p.namespace, pipeline: p.name, environment: r.environment, revision: r.revision, action: 'retry' } : { namespace: p.namespace, pipeline: p.name, environment: r.environment, revision: r.revision }),
      cache: 'no-store',
      credentials: 'omit',
    }).then(function (res) {
      return res.json().then(function (body) { return { status: res.status, body: body }; }, function () { return { status: res.status, body: {} }; });
    }).then(function (answer) {
      var a = answer.body && answer.body.approval;
      var t = answer.body && answer.body.retry;
      if (retry) {
        notices[id] = answer.status === 200 && t
          ? { kind: 'ok', text: 'Retry of ' + t.environment + '/' + t.wave + ' at ' + t.revision + ' asked by ' + t.requestedBy.username + ' at ' + t.requestedAt + (answer.body.created ? '' : ' (already on record)') }
          : { kind: 'bad', text: 'Not retried (HTTP ' + answer.status + '): ' + ((answer.body && answer.body.error) || 'no reason given') };
        return;
      }
      notices[id] = answer.status === 200 && a
        ? { kind: 'ok', text: 'Approved ' + a.revision + ' for ' + a.environment + ' by ' + a.approver.username + ' at ' + a.approvedAt + (answer.body.created ? '' : ' (already on record)') }
        : { kind: 'bad', text: 'Not approved (HTTP ' + answer.status + '): ' + ((answer.body && answer.body.error) || 'no reason given') };
    }, function (err) {
      notices[id] = { kind: 'bad', text: 'Not approved: ' + (err && err.message ? err.message : String(err)) };
    }).then(function () { if (current) render(current); });
  }
  function num(value) { return el('td', { class: 'num', text: String(value) }); }
  function bytesText(n) { return n >= 1048576 ? (n / 1048576).toFixed(1) + ' MiB' : Math.round(n / 1024) + ' KiB'; }
  function cell(text, cls) { return el('td', { class: cls || '', text: text === undefined || text === '' ? '—' : text }); }
  function stateKind(state) { return state === 'Succeeded' ? 'ok' : state === 'Failed' ? 'bad' : 'wait'; }

  // The approve button of a promotion awaiting approval, in the in-flight list (as for environments;
  // a wave's record is approved as "<environment>/<wave>", the wave's row only says it waits).
  function approveButton(p, environment, revision) {
    var button = el('button', { type: 'button', class: 'approve', 'data-action': 'approve', 'data-environment': environment, 'data-revision': revision, text: 'Approve ' + revision + ' for ' + environment });
    button.addEventListener('click', function () { approve(p, { environment: environment, revision: revision }, button); });
    return button;
  }

  // --- Fleet environments: the readiness policy in counts, and the waves of the newest rollout.
  function renderFleet(f) {
    return el('div', { class: 'fleet', 'data-field': 'fleet' }, [
      el('div', { 'data-field': 'fleet-counts', text: f.membershipLoading ? f.policy + ': waiting for the cluster list to load' : f.policy + ': ' + f.readyTargets + ' of ' + f.total + ' ready, ' + f.required + ' needed' + (f.readable < f.total ? ' (' + f.readable + ' readable)' : '') }),
      f.notReady.length > 0 ? el('div', { class: 'muted', 'data-field': 'not-ready', text: 'Not ready: ' + f.notReady.map(function (n) { return n.reason + ' ' + n.count; }).join(', ') }) : null,
      f.error ? el('div', { class: 'warn', 'data-field': 'fleet-error', text: f.error }) : null,
    ]);
  }
  var WAVE_STATES = { NotStarted: ['not started', ''], AwaitingApproval: ['awaiting approval', 'wait'], Pending: ['carrying out', 'wait'], CarriedOut: ['carried out, not ready yet', 'wait'], Ready: ['ready', 'ok'], Failed: ['failed', 'bad'] };
  function retryButton(p, environment, w) {
    var wave = environment + '/' + w.name;
    var button = el('button', { type: 'button', class: 'approve', 'data-action': 'retry', 'data-environment': wave, 'data-revision': w.revision, text: 'Retry ' + wave + ' at ' + w.revision });
    button.addEventListener('click', function () { approve(p, { environment: wave, revision: w.revision, action: 'retry' }, button); });
    return button;
  }
  function renderWaves(env, p) {
    return el('ol', { class: 'waves', 'data-field': 'waves' }, env.waves.map(function (w) {
      var soaking = w.state === 'Ready' && w.soakUntil > Date.now() + skewMs;
      var shown = soaking ? ['soaking', 'wait'] : Object.prototype.hasOwnProperty.call(WAVE_STATES, w.state) ? WAVE_STATES[w.state] : [String(w.state), ''];
      return el('li', { 'data-wave': w.name, 'data-state': soaking ? 'Soaking' : w.state }, [
        el('span', { class: 'wave-name', text: w.name }), pill(shown[0], shown[1]),
        soaking ? el('span', { 'data-field': 'soak' }, [el('span', { text: 'soak ends ' }), el('span', { 'data-at': w.soakUntil, text: relative(w.soakUntil) })]) : null,
        el('span', { class: 'muted', text: (w.revision ? w.revision + ' · ' : '') + w.readyTargets + ' of ' + w.total + ' ready' + (w.currentRevision && w.currentRevision !== w.revision ? ' at ' + w.currentRevision : '') + ', ' + w.required + ' needed' + (w.soakSeconds ? ' · soak ' + w.soakSeconds + ' s' : '') + (w.requireApproval ? ' · approval' : '') }),
        w.message && (w.state === 'Failed' || w.state === 'CarriedOut') ? el('div', { class: w.state === 'Failed' ? 'warn' : 'muted', text: w.message }) : null,
        w.stopped && w.revision ? retryButton(p, env.name, w) : null,
      ]);
    }));
  }
  // --- end of fleet environments.

  function renderPipeline(p) {
    var id = p.namespace + '/' + p.name;
    var ready = p.ready;
    var head = el('div', { class: 'pipeline-head' }, [
      el('h3', { text: id }),
      ready ? pill(ready.status === 'True' ? 'Ready' : 'Not ready: ' + ready.reason, ready.status === 'True' ? 'ok' : ready.status === 'False' ? 'bad' : 'wait') : pill('Not reconciled yet', 'wait'),
      p.stale ? pill('spec changed, not observed yet', 'wait') : null,
      ready && ready.message ? el('span', { class: 'muted message', text: ready.message }) : null,
    ]);
    var envs = [];
    p.environments.forEach(function (env, i) {
      if (i > 0) envs.push(el('span', { class: 'arrow', text: '→' }));
      envs.push(el('div', { class: 'env', 'data-env': env.name, 'data-ready': env.ready }, [
        el('div', { class: 'name', text: env.name }),
        el('div', { class: 'revision', 'data-field': 'revision', text: env.revision || '—' }),
        env.ready ? pill('ready', 'ok') : pill('not ready', 'wait'),
        env.fleet ? renderFleet(env.fleet) : null,
        env.waves ? renderWaves(env, p) : null,
        env.fleet && env.targets.length > 0 ? el('div', { class: 'muted', 'data-field': 'not-ready-heading', text: 'First not-ready targets (' + env.targets.length + ' of ' + (env.fleet.total - env.fleet.readyTargets) + '):' }) : null,
        el('ul', { class: 'targets' }, env.targets.map(function (t) {
          var where = t.cluster + ' · ' + t.namespace + (t.revision ? ' · ' + t.revision : '') + (t.reason ? ' · ' + t.reason : '');
          return el('li', null, [
            el('span', { text: (t.ready ? '✓ ' : t.readable === false ? '✗ ' : '… ') + where }),
            t.error ? el('div', { class: 'warn', text: t.error }) : null,
          ]);
        })),
      ]));
    });
    var inflight = el('div', { class: 'inflight', 'data-field': 'in-flight' }, p.inFlight.length === 0
      ? [el('span', { class: 'muted', text: 'No promotion in flight' })]
      : p.inFlight.map(function (r) {
        var button = null;
        if (r.state === 'AwaitingApproval') button = approveButton(p, r.wave ? r.environment + '/' + r.wave : r.environment, r.revision);
        return el('div', { 'data-state': r.state, 'data-environment': r.environment, 'data-wave': r.wave }, [
          pill(r.state, 'wait'),
          el('span', { text: r.state === 'AwaitingApproval' ? r.revision + ' to ' + r.environment + (r.wave ? ' (wave ' + r.wave + ')' : '') + ' waits for approval' : 'promoting ' + r.revision + ' to ' + r.environment + (r.wave ? ' (wave ' + r.wave + ')' : '') + ' (' + r.strategy + ', attempt ' + r.attempts + ')' + (r.message ? ': ' + r.message : '') }),
          button,
        ]);
      }));
    var notice = notices[id] ? el('p', { class: 'notice', 'data-field': 'notice', 'data-kind': notices[id].kind, text: notices[id].text }) : null;
    var history = el('details', { open: '' }, [
      el('summary', { text: 'History (' + p.history.length + ')' }),
      table([{ text: 'Environment' }, { text: 'Revision' }, { text: 'Outcome' }, { text: 'Strategy' }, { text: 'Attempts', num: true }, { text: 'Started' }, { text: 'Finished' }, { text: 'Message' }],
        p.history.map(function (r) {
          return el('tr', { 'data-environment': r.environment, 'data-state': r.state }, [
            cell(r.wave ? r.environment + '/' + r.wave : r.environment), cell(r.revision), el('td', null, [pill(r.state, stateKind(r.state))]), cell(r.strategy), num(r.attempts),
            timeCell(r.startedAt), timeCell(r.finishedAt), cell(r.message, 'muted'),
          ]);
        }), 'No promotion yet'),
    ]);
    return el('article', { class: 'pipeline', 'data-pipeline': id }, [head, el('div', { class: 'envs' }, envs), inflight, notice, history]);
  }

  // --- Limits and cluster health: what a document cut to its bound left out, and clusters whose
  // credentials are missing. Separate from the rendering above, which it only decorates.
  function plural(n, one, many) { return n + ' ' + (n === 1 ? one : many); }
  function truncationNotice(state) {
    var t = state.truncated;
    if (!t) return null;
    var parts = [];
    if (t.pipelines > 0) parts.push(plural(t.pipelines, 'Pipeline', 'Pipelines') + (t.pipelineNames.length > 0 ? ' (' + t.pipelineNames.join(', ') + (t.pipelines > t.pipelineNames.length ? ', …' : '') + ')' : ''));
    if (t.targets > 0) parts.push(plural(t.targets, 'target', 'targets'));
    if (t.history > 0) parts.push(plural(t.history, 'history record', 'history records'));
    if (t.caches > 0) parts.push(plural(t.caches, 'cache', 'caches'));
    if (t.clusters > 0) parts.push(plural(t.clusters, 'cluster', 'clusters'));
    if (t.shardKeys > 0) parts.push(plural(t.shardKeys, 'shard key', 'shard keys') + ' from the Shards lists (their counts are whole)');
    return el('p', { class: 'truncated', 'data-field': 'truncated', text: 'Too much to show at once (the state is limited to ' + Math.round(t.maxBytes / 1024) + ' KiB): left out ' + parts.join(', ') + '.' });
  }
  function withOmitted(node, p) {
    var envs = node.querySelectorAll('.envs > .env');
    p.environments.forEach(function (env, i) {
      var list = envs[i] && envs[i].querySelector('.targets');
      if (list && env.omittedTargets > 0) list.appendChild(el('li', { class: 'omitted', 'data-omitted': env.omittedTargets, text: '… and ' + plural(env.omittedTargets, 'more target', 'more targets') + ' not shown' }));
    });
    if (p.omittedHistory > 0) {
      var summary = node.querySelector('details > summary');
      if (summary) summary.textContent += ', ' + p.omittedHistory + ' older not shown';
    }
    return node;
  }
  function clusterError(c) {
    if (c.credentialsMissing === 'SecretNotFound') return 'credentials missing: kubeconfig Secret not found' + (c.lastError ? '; ' + c.lastError : '');
    if (c.credentialsMissing === 'KeyNotFound') return 'credentials missing: no kubeconfig key in the Secret' + (c.lastError ? '; ' + c.lastError : '');
    return c.lastError;
  }
  // --- end of limits and cluster health.

  // --- Shards (with --shard): this replica's view of its group. Only its own fences are facts;
  // the other replicas' shares are computed here from the peers it sees live, and say so.
  function keysText(list) {
    if (list.count === 0) return '—';
    var more = list.count - list.keys.length;
    return list.keys.join(', ') + (more > 0 ? (list.keys.length > 0 ? ', … and ' : '') + more + ' more not shown' : '');
  }
  function renderShards(s) {
    var section = byId('shards-section');
    if (!s) {
      section.hidden = true;
      replace(byId('shards'), []);
      return;
    }
    section.hidden = false;
    var parts = [el('p', { class: 'muted', 'data-field': 'shard-view', text: 'As replica ' + s.identity + ' sees its group' + (s.joined ? '' : ' (not joined yet)') + ': ' +
      plural(s.keys, 'live shard key', 'live shard keys') + ', each owned by one live replica within ' + Math.round(s.boundMs / 1000) + ' s of a change. ' +
      "This replica's own fences are facts; the other replicas' shares are computed here (rendezvous hashing over the peers it sees live)." })];
    if (s.orphaned.count > 0) {
      parts.push(el('p', { class: 'warn', 'data-field': 'orphaned', text: plural(s.orphaned.count, 'shard key has', 'shard keys have') + ' had no owner for longer than the bound (' + Math.round(s.boundMs / 1000) + ' s): ' + keysText(s.orphaned) }));
    }
    parts.push(table(
      [{ text: 'Replica' }, { text: 'Weight', num: true }, { text: 'Live' }, { text: 'Assigned (computed here)', num: true }, { text: 'Acting for (fence held)', num: true }, { text: 'Assigned keys' }],
      s.peers.map(function (p) {
        return el('tr', { 'data-peer': p.identity, 'data-self': p.self ? 'true' : null, 'data-live': p.live ? 'true' : 'false' }, [
          cell(p.identity + (p.self ? ' (this replica)' : '')),
          num(p.weight),
          el('td', null, [p.live ? pill('live', 'ok') : pill('not live', 'bad')]),
          num(p.assigned.count),
          p.self ? num(p.acting) : cell('not known here', 'muted'),
          cell(keysText(p.assigned), 'shard-keys'),
        ]);
      }).concat(s.omittedPeers > 0 ? [el('tr', null, [el('td', { class: 'muted', colspan: 6, text: '… and ' + plural(s.omittedPeers, 'more replica', 'more replicas') + ' not shown' })])] : []),
      'No peers seen yet.'));
    parts.push(el('p', { 'data-field': 'handoff', class: 'shard-keys' }, [
      el('span', { class: 'muted', text: 'In handoff here (' + s.handoff.count + '): ' }), el('span', { text: keysText(s.handoff) }),
    ]));
    var unowned = s.unowned.keys.map(function (u) {
      var late = s.orphaned.keys.indexOf(u.key) >= 0;
      return el('tr', { 'data-unowned': u.key, 'data-orphaned': late ? 'true' : null }, [cell(u.key, late ? 'error' : ''), timeCell(u.since), el('td', null, [late ? pill('orphaned: past the bound', 'bad') : pill('handoff in progress', 'wait')])]);
    });
    if (s.unowned.count > s.unowned.keys.length) unowned.push(el('tr', null, [el('td', { class: 'muted', colspan: 3, text: '… and ' + (s.unowned.count - s.unowned.keys.length) + ' more not shown' })]));
    parts.push(el('details', s.unowned.count > 0 ? { open: '' } : null, [
      el('summary', { text: 'Unowned keys, group-wide (' + s.unowned.count + ')' }),
      table([{ text: 'Key' }, { text: 'Unowned since' }, { text: 'State' }], unowned, 'Every live key has an acting owner.'),
    ]));
    replace(byId('shards'), parts);
  }
  // --- end of Shards.

  function render(state) {
    var pipelines = state.pipelines.map(function (p) { return withOmitted(renderPipeline(p), p); });
    if (pipelines.length === 0) pipelines.push(el('p', { class: 'muted', text: state.pipelinesSynced ? 'No Pipelines.' : 'Loading Pipelines…' }));
    if (state.truncatedPipelines > 0) pipelines.push(el('p', { class: 'muted', text: state.truncatedPipelines + ' more Pipelines not shown.' }));
    if (state.truncated) pipelines.unshift(truncationNotice(state));
    replace(byId('pipelines'), pipelines);
    renderShards(state.shards);

    replace(byId('clusters'), [table(
      [{ text: 'Cluster' }, { text: 'Reachable' }, { text: 'Requests', num: true }, { text: 'Failed', num: true }, { text: 'Last code' }, { text: 'Caches synced', num: true }, { text: 'Objects', num: true }, { text: 'Held', num: true }, { text: 'Relists', num: true }, { text: 'Watch errors', num: true }, { text: 'Last error' }],
      state.clusters.map(function (c) {
        return el('tr', { 'data-cluster': c.name, 'data-credentials': c.credentialsMissing ? 'missing' : null }, [
          cell(c.name),
          el('td', null, [c.reachable === true ? pill('yes', 'ok') : c.reachable === false ? pill('no', 'bad') : pill('unknown', 'wait')]),
          num(c.requests), num(c.failedRequests), cell(c.lastCode), num(c.syncedCaches + '/' + c.caches), num(c.objects), num(bytesText(c.heldBytes || 0)), num(c.relists), num(c.watchErrors),
          cell(clusterError(c), clusterError(c) ? 'error' : 'muted'),
        ]);
      }), 'No cluster contacted yet.')]);

    replace(byId('caches'), [table(
      [{ text: 'Cluster' }, { text: 'Namespace' }, { text: 'Kind' }, { text: 'Synced' }, { text: 'Objects', num: true }, { text: 'Held', num: true }, { text: 'Owners', num: true }, { text: 'Relists', num: true }, { text: 'Watch errors', num: true }, { text: 'Next GC check' }, { text: 'Built' }, { text: 'Last error' }],
      state.caches.map(function (c) {
        var gvk = (c.group ? c.group + '/' : '') + c.version + ' ' + c.kind;
        return el('tr', { 'data-cache': c.cluster + ' ' + gvk }, [
          cell(c.cluster), cell(c.namespace || 'all'), cell(gvk),
          el('td', null, [c.synced ? pill('synced', 'ok') : pill('syncing', 'wait')]),
          num(c.packed ? c.objects + ' (' + c.packed + ' packed)' : c.objects), num(bytesText(c.heldBytes || 0)), num(c.owners), num(c.relists), num(c.watchErrors), timeCell(c.nextGcAt), timeCell(c.createdAt),
          cell(c.lastError, c.lastError ? 'error' : 'muted'),
        ]);
      }), 'No caches.')]);
  }

  function onDocument(text) {
    var message = JSON.parse(text);
    skewMs = message.now - Date.now();
    current = message.state;
    render(current);
    byId('updated').textContent = 'updated ' + new Date(message.now).toLocaleTimeString();
  }

  // Server-sent events read from a fetch() body, so that the token travels in a header.
  function readEvents(reader) {
    var decoder = new TextDecoder();
    var buffer = '';
    function pump() {
      return reader.read().then(function (chunk) {
        if (chunk.done) return;
        buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, '\n');
        var end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          var frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          var event = 'message';
          var data = [];
          frame.split('\n').forEach(function (line) {
            if (line.indexOf('event:') === 0) event = line.slice(6).trim();
            else if (line.indexOf('data:') === 0) data.push(line.slice(5).replace(/^ /, ''));
          });
          if (event === 'state' && data.length > 0) onDocument(data.join('\n'));
          // The stream's lifetime is over: connect again at once (and be authorised again).
          else if (event === 'reconnect') reconnectAsked = true;
        }
        return pump();
      });
    }
    return pump();
  }

  function showLogin(reason) {
    byId('login-reason').textContent = reason;
    byId('login').hidden = false;
    byId('token').focus();
  }

  function scheduleRetry() {
    if (retryTimer !== null) return;
    setConnection('disconnected', 'disconnected, retrying in ' + Math.round(retryMs / 1000) + ' s');
    retryTimer = setTimeout(function () { retryTimer = null; connect(); }, retryMs);
    retryMs = Math.min(retryMs * 2, 15000);
  }

  function connect() {
    if (reading) reading.abort();
    var controller = new AbortController();
    reading = controller;
    var token = storedToken();
    var headers = token ? { authorization: 'Bearer ' + token } : {};
    // A reconnection the server asked for keeps the page as it is (no "connecting" flash).
    if (!reconnectAsked) setConnection('connecting', 'connecting');
    reconnectAsked = false;
    fetch('events', { headers: headers, cache: 'no-store', credentials: 'omit', signal: controller.signal }).then(function (res) {
      if (res.status === 401 || res.status === 403) {
        setConnection('refused', res.status === 401 ? 'token needed' : 'not allowed');
        showLogin(res.status === 403 ? 'This token may not read the dashboard (403).' : token ? 'The token was not accepted (401).' : 'This dashboard needs a bearer token (401).');
        return 'refused';
      }
      if (res.status === 429) {
        // Over this user's share of streams: said plainly, and tried again when the server says.
        var wait = Math.max(1, Number(res.headers.get('retry-after')) || 5) * 1000;
        setConnection('refused', 'too many open dashboards for this user, retrying in ' + Math.round(wait / 1000) + ' s');
        retryTimer = retryTimer || setTimeout(function () { retryTimer = null; connect(); }, wait);
        return 'refused';
      }
      if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
      byId('login').hidden = true;
      retryMs = 1000;
      setConnection('live', 'live');
      return readEvents(res.body.getReader());
    }).then(function (outcome) {
      if (outcome === 'refused' || reading !== controller) return;
      if (reconnectAsked) connect();
      else scheduleRetry();
    }, function (err) {
      if (reading !== controller || controller.signal.aborted) return;
      // A cut stream or a failed render: said in the console, then tried again.
      console.error('dashboard: ' + (err && err.message ? err.message : String(err)));
      scheduleRetry();
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    byId('login').addEventListener('submit', function (e) {
      e.preventDefault();
      storeToken(byId('token').value.trim());
      byId('token').value = '';
      connect();
    });
    byId('forget').addEventListener('click', function () {
      storeToken('');
      if (reading) reading.abort();
      reading = null;
      setConnection('refused', 'token forgotten');
      showLogin('Token forgotten.');
    });
    setInterval(refreshTimes, 1000);
    connect();
  });
})();
`;
