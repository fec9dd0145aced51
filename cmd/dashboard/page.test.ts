// The page's script run in a VM against a small DOM of its own (no browser): what it shows of a
// document cut to its bound and of clusters without credentials, and how it reconnects when a
// stream's lifetime ends or a user is over its share, and that no text from a peer is ever parsed as
// HTML (the DOM's HTML sinks record and throw). The real browser test covers the rest.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createContext, Script } from 'node:vm';
import type { DashboardState, EnvironmentView, WaveView } from './model.ts';
import { appJs } from './page.ts';
import { settle } from '../../fixtures/support/index.ts';

/**
 * Every use of an HTML-parsing sink, an event-handler attribute or a script-bearing element the page
 * made, by any loaded page: each also throws, as the CSP's Trusted Types rule makes it in a browser.
 */
const htmlSinks: string[] = [];
function sink(what: string): never {
  htmlSinks.push(what);
  throw new TypeError(`the page used an HTML sink: ${what}`);
}
/** Elements that run or load something: the page makes none of them. */
const ACTIVE_TAGS = new Set(['SCRIPT', 'IFRAME', 'FRAME', 'OBJECT', 'EMBED', 'IMG', 'STYLE', 'LINK', 'BASE', 'META', 'TEMPLATE', 'SVG', 'MATH']);

/** Just enough of an element for the page: attributes, children, text, listeners, and simple selectors. */
class FakeElement {
  readonly tagName: string;
  readonly attributes = new Map<string, string>();
  readonly children: FakeElement[] = [];
  readonly #listeners = new Map<string, (() => void)[]>();
  parent: FakeElement | undefined;
  #text = '';
  hidden = false;
  constructor(tag: string) {
    this.tagName = tag.toUpperCase();
    if (ACTIVE_TAGS.has(this.tagName)) sink(`createElement(${tag})`);
  }
  set innerHTML(value: string) { sink(`innerHTML = ${value}`); }
  set outerHTML(value: string) { sink(`outerHTML = ${value}`); }
  insertAdjacentHTML(_where: string, value: string): void { sink(`insertAdjacentHTML(${value})`); }
  setHTMLUnsafe(value: string): void { sink(`setHTMLUnsafe(${value})`); }
  get className(): string { return this.attributes.get('class') ?? ''; }
  set className(value: string) { this.attributes.set('class', value); }
  get firstChild(): FakeElement | null { return this.children[0] ?? null; }
  get textContent(): string { return this.#text + this.children.map((c) => c.textContent).join(''); }
  set textContent(value: string) {
    this.children.splice(0);
    this.#text = value;
  }
  setAttribute(name: string, value: string): void {
    // An event handler, inline HTML or a URL attribute would let text become code or a request.
    if (/^on|^(srcdoc|src|href|action|formaction|style)$/i.test(name)) sink(`setAttribute(${name}, ${value})`);
    this.attributes.set(name, value);
  }
  getAttribute(name: string): string | null { return this.attributes.get(name) ?? null; }
  appendChild(child: FakeElement): FakeElement {
    child.parent = this;
    this.children.push(child);
    return child;
  }
  removeChild(child: FakeElement): FakeElement {
    this.children.splice(this.children.indexOf(child), 1);
    return child;
  }
  addEventListener(event: string, listener: () => void): void {
    this.#listeners.set(event, [...(this.#listeners.get(event) ?? []), listener]);
  }
  click(): void {
    for (const listener of this.#listeners.get('click') ?? []) listener();
  }
  focus(): void { /* nothing to focus */ }
  #descendants(): FakeElement[] {
    return this.children.flatMap((c) => [c, ...c.#descendants()]);
  }
  querySelectorAll(selector: string): FakeElement[] {
    return this.#descendants().filter((e) => e.matches(selector, this));
  }
  querySelector(selector: string): FakeElement | null {
    return this.querySelectorAll(selector)[0] ?? null;
  }
  /** Compound selectors (`tag.class[attr="v"]`) joined by ' ' or ' > ', matched right to left below `root`. */
  matches(selector: string, root: FakeElement): boolean {
    const parts = selector.trim().split(/\s*(>)\s*|\s+/).filter((p): p is string => typeof p === 'string' && p !== '');
    const test = (e: FakeElement, compound: string): boolean => {
      const tag = /^[a-z]+/i.exec(compound)?.[0];
      if (tag !== undefined && e.tagName !== tag.toUpperCase()) return false;
      for (const [, cls] of compound.matchAll(/\.([\w-]+)/g)) if (!e.className.split(' ').includes(cls ?? '')) return false;
      for (const [, name, value] of compound.matchAll(/\[([\w-]+)(?:="([^"]*)")?\]/g)) {
        const actual = e.getAttribute(name ?? '');
        if (actual === null || (value !== undefined && actual !== value)) return false;
      }
      return true;
    };
    const walk = (e: FakeElement | undefined, i: number): boolean => {
      if (e === undefined || e === root) return false;
      if (!test(e, parts[i] ?? '')) return false;
      if (i === 0) return true;
      if (parts[i - 1] === '>') return walk(e.parent, i - 2);
      for (let up = e.parent; up !== undefined && up !== root; up = up.parent) if (walk(up, i - 1)) return true;
      return false;
    };
    return walk(this, parts.length - 1);
  }
}

interface FakeResponse {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  /** Server-sent frames, then the end of the stream. */
  readonly frames?: readonly string[];
  /** What `json()` resolves with (rejects without). */
  readonly json?: unknown;
}

/** The page's script with its DOM, and the answers its fetch() calls get, in order. */
function loadPage(answers: FakeResponse[]): { body: FakeElement; byId: (id: string) => FakeElement; fetches: () => number; posted: string[]; timers: number[]; ready: () => void } {
  const ids = ['connection', 'updated', 'forget', 'login', 'login-reason', 'token', 'pipelines', 'shards-section', 'shards', 'clusters', 'caches'];
  const body = new FakeElement('body');
  const elements = new Map(ids.map((id) => [id, body.appendChild(new FakeElement(id === 'login' ? 'form' : 'div'))]));
  const section = elements.get('shards-section');
  if (section !== undefined) section.hidden = true; // as the page's HTML has it
  let ready = (): void => undefined;
  let fetches = 0;
  const timers: number[] = [];
  const document = {
    getElementById: (id: string) => elements.get(id) ?? null,
    createElement: (tag: string) => new FakeElement(tag),
    querySelectorAll: (selector: string) => body.querySelectorAll(selector),
    addEventListener: (event: string, fn: () => void) => { if (event === 'DOMContentLoaded') ready = fn; },
    write: (html: string) => sink(`document.write(${html})`),
    writeln: (html: string) => sink(`document.writeln(${html})`),
  };
  const posted: string[] = [];
  const fetch = (_url: string, init?: { body?: string }): Promise<unknown> => {
    fetches += 1;
    if (init?.body !== undefined) posted.push(init.body);
    const answer = answers.shift();
    if (answer === undefined) return new Promise(() => undefined); // pending for ever
    const chunks = (answer.frames ?? []).map((f) => new TextEncoder().encode(f));
    return Promise.resolve({
      status: answer.status,
      ok: answer.status >= 200 && answer.status < 300,
      headers: { get: (name: string) => answer.headers?.[name] ?? null },
      json: () => ('json' in answer ? Promise.resolve(answer.json) : Promise.reject(new SyntaxError('not JSON'))),
      body: { getReader: () => ({ read: () => Promise.resolve(chunks.length > 0 ? { done: false, value: chunks.shift() } : { done: true, value: undefined }) }) },
    });
  };
  const context = createContext({
    document,
    fetch,
    sessionStorage: { getItem: () => 'a-token', setItem: () => undefined, removeItem: () => undefined },
    setTimeout: (_fn: () => void, ms: number) => { timers.push(ms); return timers.length; },
    clearTimeout: () => undefined,
    setInterval: () => 0,
    TextDecoder,
    AbortController,
    console,
  }, { codeGeneration: { strings: false, wasm: false } }); // eval and new Function throw
  new Script(appJs, { filename: 'app.js' }).runInContext(context);
  const byId = (id: string): FakeElement => {
    const e = elements.get(id);
    assert.ok(e !== undefined);
    return e;
  };
  return { body, byId, fetches: () => fetches, posted, timers, ready: () => { ready(); } };
}

function frame(state: DashboardState): string {
  return `event: state\ndata: ${JSON.stringify({ now: Date.UTC(2026, 10, 23, 9), state })}\n\n`;
}

const target = (i: number): DashboardState['pipelines'][number]['environments'][number]['targets'][number] => ({ cluster: `secret:team-a/c${i}`, namespace: 'apps', readable: false, ready: false, error: 'ERR_TRANSPORT' });

const cut: DashboardState = {
  pipelines: [{
    namespace: 'team-a',
    name: 'shop',
    stale: false,
    environments: [{ name: 'prod', ready: false, targets: [target(0), target(1)], omittedTargets: 998 }],
    inFlight: [],
    history: [],
    omittedHistory: 4,
  }],
  truncatedPipelines: 0,
  pipelinesSynced: true,
  clusters: [
    { name: 'secret:team-a/gone', requests: 0, failedRequests: 0, caches: 0, syncedCaches: 0, objects: 0, heldBytes: 0, relists: 0, watchErrors: 0, credentialsMissing: 'SecretNotFound' },
    { name: 'secret:team-a/up', requests: 3, failedRequests: 1, caches: 1, syncedCaches: 1, objects: 1, heldBytes: 3_145_728, relists: 0, watchErrors: 1, lastError: 'ERR_KUBE_API HTTP 403 Forbidden' },
  ],
  caches: [
    { cluster: 'secret:team-a/up', group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', synced: true, objects: 200, heldBytes: 65_536, packed: 150, owners: 1, relists: 0, watchErrors: 0, createdAt: Date.UTC(2026, 10, 23, 8) },
    { cluster: 'secret:team-a/up', version: 'v1', group: '', kind: 'ConfigMap', synced: true, objects: 7, heldBytes: 8_192, owners: 1, relists: 0, watchErrors: 0, createdAt: Date.UTC(2026, 10, 23, 8) },
  ],
  truncated: { maxBytes: 524_288, targets: 998, history: 4, pipelines: 2, pipelineNames: ['team-b/a', 'team-c/b'], caches: 0, clusters: 0 },
};

describe('the dashboard page script', () => {
  it('says what a cut document left out, per environment and in all, and which clusters have no credentials', async () => {
    const page = loadPage([{ status: 200, frames: [frame(cut)] }]);
    page.ready();
    await settle(50);
    const pipelines = page.byId('pipelines');
    assert.equal(pipelines.querySelector('[data-field="truncated"]')?.textContent, 'Too much to show at once (the state is limited to 512 KiB): left out 2 Pipelines (team-b/a, team-c/b), 998 targets, 4 history records.');
    const env = pipelines.querySelector('[data-pipeline="team-a/shop"] [data-env="prod"]');
    assert.ok(env !== null);
    assert.equal(env.querySelectorAll('.targets li').length, 3);
    assert.equal(env.querySelector('li.omitted')?.textContent, '… and 998 more targets not shown');
    assert.match(pipelines.querySelector('summary')?.textContent ?? '', /4 older not shown/);
    const clusters = page.byId('clusters');
    assert.match(clusters.querySelector('[data-cluster="secret:team-a/gone"]')?.textContent ?? '', /credentials missing: kubeconfig Secret not found/);
    assert.equal(clusters.querySelector('[data-cluster="secret:team-a/gone"]')?.getAttribute('data-credentials'), 'missing');
    assert.match(clusters.querySelector('[data-cluster="secret:team-a/up"]')?.textContent ?? '', /ERR_KUBE_API HTTP 403 Forbidden/);
    assert.equal(clusters.querySelector('[data-cluster="secret:team-a/up"]')?.getAttribute('data-credentials'), null);
    assert.match(clusters.querySelector('[data-cluster="secret:team-a/up"]')?.textContent ?? '', /3\.0 MiB/, 'what its caches hold');
    // Rows by their data-cache (its value has spaces, which the fake's selectors split on).
    const cacheRow = (id: string): string => page.byId('caches').querySelectorAll('tr').find((r) => r.getAttribute('data-cache') === id)?.textContent ?? '';
    assert.match(cacheRow('secret:team-a/up helm.toolkit.fluxcd.io/v2 HelmRelease'), /200 \(150 packed\)/, 'objects held packed');
    assert.match(cacheRow('secret:team-a/up v1 ConfigMap'), /7/);
    assert.doesNotMatch(cacheRow('secret:team-a/up v1 ConfigMap'), /packed/);

    // The same page with a document that fits: no notice left behind.
    const fits: DashboardState = {
      pipelines: [{ namespace: 'team-a', name: 'shop', stale: false, environments: [{ name: 'prod', ready: false, targets: [target(0)] }], inFlight: [], history: [] }],
      truncatedPipelines: 0,
      pipelinesSynced: true,
      clusters: [],
      caches: [],
    };
    const whole = loadPage([{ status: 200, frames: [frame(fits)] }]);
    whole.ready();
    await settle(50);
    assert.equal(whole.byId('pipelines').querySelector('[data-field="truncated"]'), null);
    assert.equal(whole.byId('pipelines').querySelector('li.omitted'), null);
  });

  it('reconnects at once, without showing a disconnection, when the stream\'s lifetime ends; says so and waits when over its share', async () => {
    const page = loadPage([
      { status: 200, frames: [frame(cut), 'event: reconnect\ndata: {}\n\n'] },
      { status: 429, headers: { 'retry-after': '7' } },
    ]);
    page.ready();
    await settle(50);
    assert.equal(page.fetches(), 2, 'connected again');
    assert.deepEqual(page.timers, [7_000], 'no backoff for the reconnection; Retry-After honoured for the 429');
    assert.equal(page.byId('connection').getAttribute('data-state'), 'refused');
    assert.match(page.byId('connection').textContent, /too many open dashboards for this user, retrying in 7 s/);

    // A stream that ends without being asked to reconnect is a disconnection, retried with backoff.
    const cutOff = loadPage([{ status: 200, frames: [frame(cut)] }]);
    cutOff.ready();
    await settle(50);
    assert.equal(cutOff.fetches(), 1);
    assert.deepEqual(cutOff.timers, [1_000]);
    assert.equal(cutOff.byId('connection').getAttribute('data-state'), 'disconnected');
  });
  it('shows text from peers as text: markup in every field of the state and in an approval\'s answer is never parsed as HTML', async () => {
    const html = (field: string): string => `<img src=x onerror="alert('${field}')"><script>alert('${field}')</script>`;
    const hostile: DashboardState = {
      pipelines: [{
        namespace: html('ns'),
        name: html('name'),
        stale: false,
        ready: { status: 'False', reason: html('reason'), message: html('ready-message') },
        environments: [{
          name: html('env'), ready: false, revision: html('env-revision'), targets: [{ cluster: html('target-cluster'), namespace: html('target-ns'), readable: true, ready: false, revision: html('target-revision'), reason: html('target-reason'), error: html('target-error') }],
          fleet: { policy: html('fleet-policy'), total: 3, readyTargets: 1, required: 3, readable: 2, notReady: [{ reason: html('fleet-reason'), count: 2 }], error: html('fleet-error') },
          waves: [
            { name: html('wave'), state: 'Failed', revision: html('wave-revision'), ready: false, currentRevision: html('wave-current'), total: 3, readyTargets: 1, required: 3, requireApproval: false, message: html('wave-message') },
            { name: html('wave-odd'), state: html('wave-state') as 'Failed', ready: false, total: 0, readyTargets: 0, required: 0, requireApproval: true },
            { name: 'proto', state: '__proto__' as 'Failed', ready: false, total: 0, readyTargets: 0, required: 0, requireApproval: false },
          ],
        }],
        inFlight: [{ environment: html('inflight-env'), revision: html('inflight-revision'), strategy: 'patch', state: 'AwaitingApproval', attempts: 0, startedAt: '2026-11-23T08:00:00Z' }],
        history: [{ environment: html('history-env'), revision: html('history-revision'), strategy: html('history-strategy'), state: 'Failed', attempts: 1, startedAt: '2026-11-23T07:00:00Z', finishedAt: '2026-11-23T07:01:00Z', message: html('history-message') }],
      }],
      truncatedPipelines: 0,
      pipelinesSynced: true,
      clusters: [{ name: html('cluster'), requests: 1, failedRequests: 1, lastCode: html('code'), caches: 1, syncedCaches: 0, objects: 0, heldBytes: 0, relists: 0, watchErrors: 1, lastError: html('cluster-error') }],
      caches: [{ cluster: html('cache-cluster'), namespace: html('cache-ns'), group: html('group'), version: 'v1', kind: html('kind'), synced: false, objects: 0, heldBytes: 0, owners: 1, relists: 0, watchErrors: 1, lastError: html('cache-error'), createdAt: Date.UTC(2026, 10, 23, 8) }],
      shards: {
        identity: html('shard-self'), joined: true, boundMs: 32_000, keys: 2, omittedPeers: 0,
        peers: [
          { identity: html('shard-self'), weight: 1, live: true, self: true, assigned: { count: 1, keys: [html('assigned-key')] }, acting: 1 },
          { identity: html('shard-peer'), weight: 1, live: false, self: false, assigned: { count: 0, keys: [] } },
        ],
        handoff: { count: 1, keys: [html('handoff-key')] },
        unowned: { count: 1, keys: [{ key: html('unowned-key'), since: Date.UTC(2026, 10, 23, 8) }] },
        orphaned: { count: 1, keys: [html('unowned-key')] },
      },
    };
    htmlSinks.length = 0;
    const page = loadPage([{ status: 200, frames: [frame(hostile)] }, { status: 403, json: { error: html('approve-answer') } }]);
    page.ready();
    await settle(50);
    const shown = (field: string): boolean => page.body.textContent.includes(html(field));
    for (const field of ['name', 'ready-message', 'env', 'target-error', 'target-reason', 'fleet-policy', 'fleet-reason', 'fleet-error', 'wave', 'wave-revision', 'wave-current', 'wave-message', 'wave-odd', 'wave-state', 'inflight-revision', 'history-message', 'cluster', 'cluster-error', 'kind', 'cache-error', 'shard-self', 'shard-peer', 'assigned-key', 'handoff-key', 'unowned-key']) {
      assert.ok(shown(field), `${field} is shown, as text`);
    }
    const button = page.body.querySelector('button.approve');
    assert.equal(page.body.querySelector('[data-wave="proto"]')?.textContent.startsWith('proto__proto__'), true, 'a state outside the vocabulary is shown as itself');
    assert.ok(button !== null, 'the promotion waiting shows its Approve button');
    assert.equal(button.getAttribute('data-revision'), html('inflight-revision'), 'kept as an attribute value, not markup');
    button.click();
    await settle(50);
    assert.equal(page.fetches(), 2, 'the approval was posted');
    assert.ok(shown('approve-answer'), 'the endpoint\'s refusal is shown, as text');
    assert.deepEqual(htmlSinks, [], 'no HTML sink, handler attribute or active element was used');
    assert.equal(page.body.querySelectorAll('script').length + page.body.querySelectorAll('img').length, 0);
  });

  it('shows a fleet environment\'s policy and counts, its waves in order with their states (soaking with the time left), its first not-ready targets with reasons, and approves a waiting wave as <environment>/<wave>', async () => {
    const now = Date.UTC(2026, 10, 23, 9);
    const wave = (name: string, state: Partial<WaveView>): WaveView => ({ name, state: 'NotStarted', revision: '1.1.0', ready: false, total: 4, readyTargets: 0, required: 4, requireApproval: false, ...state });
    const fleet: DashboardState = {
      pipelines: [{
        namespace: 'team-a', name: 'shop', stale: false,
        environments: [
          { name: 'staging', ready: true, revision: '1.1.0', targets: [{ cluster: 'local', namespace: 'apps', readable: true, ready: true, revision: '1.1.0' }] },
          {
            name: 'prod', ready: false, revision: '1.0.0', reason: 'Progressing',
            fleet: { policy: 'Percent 90', total: 20, readyTargets: 12, required: 18, readable: 19, notReady: [{ reason: 'Progressing', count: 5 }, { reason: 'Unreadable', count: 1 }, { reason: 'OtherRevision', count: 2 }] },
            waves: [
              wave('canary', { state: 'Ready', ready: true, currentRevision: '1.1.0', total: 2, readyTargets: 2, required: 2, soakSeconds: 1800, soakUntil: now + 10 * 60_000 }),
              wave('early', { state: 'Ready', ready: true, currentRevision: '1.1.0', total: 3, readyTargets: 3, required: 3, soakSeconds: 60, soakUntil: now - 60_000 }),
              wave('late', { state: 'AwaitingApproval', currentRevision: '1.0.0', requireApproval: true }),
              wave('rest', { currentRevision: '1.0.0', total: 11, readyTargets: 7, required: 10 }),
            ],
            targets: [
              { cluster: 'secret:team-a/prod-03', namespace: 'apps', readable: true, ready: false, revision: '1.0.0', reason: 'Progressing' },
              { cluster: 'secret:team-a/prod-09', namespace: 'apps', readable: false, ready: false, reason: 'Unreadable', error: 'ERR_TRANSPORT' },
            ],
          },
        ],
        inFlight: [{ environment: 'prod', wave: 'late', revision: '1.1.0', strategy: 'patch', state: 'AwaitingApproval', attempts: 0, startedAt: '2026-11-23T08:59:00Z' }],
        history: [],
      }],
      truncatedPipelines: 0, pipelinesSynced: true, clusters: [], caches: [],
    };
    const page = loadPage([{ status: 200, frames: [frame(fleet)] }, { status: 200, json: { created: true, approval: { environment: 'prod/late', revision: '1.1.0', approver: { username: 'alice' }, approvedAt: '2026-11-23T09:00:01Z' } } }]);
    page.ready();
    await settle(50);
    const prod = page.byId('pipelines').querySelector('[data-env="prod"]');
    assert.ok(prod !== null);
    assert.equal(prod.querySelector('[data-field="fleet-counts"]')?.textContent, 'Percent 90: 12 of 20 ready, 18 needed (19 readable)');
    assert.equal(prod.querySelector('[data-field="not-ready"]')?.textContent, 'Not ready: Progressing 5, Unreadable 1, OtherRevision 2');
    const waves = prod.querySelectorAll('[data-field="waves"] > li');
    assert.deepEqual(waves.map((w) => [w.getAttribute('data-wave'), w.getAttribute('data-state')]), [['canary', 'Soaking'], ['early', 'Ready'], ['late', 'AwaitingApproval'], ['rest', 'NotStarted']], 'in order; a wave ready within its soak is soaking');
    assert.match(waves[0]?.textContent ?? '', /^canarysoakingsoak ends in 10 min1\.1\.0 · 2 of 2 ready, 2 needed · soak 1800 s$/);
    assert.match(waves[1]?.textContent ?? '', /^earlyready1\.1\.0 · 3 of 3 ready/);
    assert.match(waves[2]?.textContent ?? '', /^lateawaiting approval1\.1\.0 · 0 of 4 ready at 1\.0\.0, 4 needed · approval$/);
    assert.match(waves[3]?.textContent ?? '', /^restnot started1\.1\.0 · 7 of 11 ready at 1\.0\.0, 10 needed$/);
    assert.equal(prod.querySelector('[data-field="not-ready-heading"]')?.textContent, 'First not-ready targets (2 of 8):');
    assert.deepEqual(prod.querySelectorAll('.targets li').map((li) => li.textContent), ['… secret:team-a/prod-03 · apps · 1.0.0 · Progressing', '✗ secret:team-a/prod-09 · apps · UnreadableERR_TRANSPORT']);
    assert.equal(page.byId('pipelines').querySelector('[data-env="staging"] [data-field="fleet"]'), null, 'a plain environment shows no fleet counts');

    const button = page.body.querySelector('[data-field="in-flight"] button.approve');
    assert.equal(button?.getAttribute('data-environment'), 'prod/late');
    assert.equal(button.textContent, 'Approve 1.1.0 for prod/late');
    button.click();
    await settle(50);
    assert.deepEqual(page.posted.map((b) => JSON.parse(b) as unknown), [{ namespace: 'team-a', pipeline: 'shop', environment: 'prod/late', revision: '1.1.0' }]);
    assert.match(page.body.querySelector('[data-field="notice"]')?.textContent ?? '', /^Approved 1\.1\.0 for prod\/late by alice/);

    // A failed wave says why, as an error.
    const prodFailed: EnvironmentView = { name: 'prod', ready: false, targets: [], waves: [wave('canary', { state: 'Failed', message: 'wave canary of prod was not ready at 1.1.0 within 600 s: the rollout stops at this wave' })] };
    const stopped: DashboardState = { ...fleet, pipelines: fleet.pipelines.map((p) => ({ ...p, environments: [prodFailed] })) };
    const failed = loadPage([{ status: 200, frames: [frame(stopped)] }]);
    failed.ready();
    await settle(50);
    const li = failed.byId('pipelines').querySelector('[data-wave="canary"]');
    assert.equal(li?.getAttribute('data-state'), 'Failed');
    assert.equal(li.querySelector('.warn')?.textContent, 'wave canary of prod was not ready at 1.1.0 within 600 s: the rollout stops at this wave');
  });

  it('shows the shard group as this replica sees it: the peers, their shares (computed here, said so), handoff, and orphaned keys as an error; no Shards section unsharded', async () => {
    const sharded: DashboardState = {
      pipelines: [],
      truncatedPipelines: 0,
      pipelinesSynced: true,
      clusters: [],
      caches: [],
      shards: {
        identity: 'replica-a', joined: true, boundMs: 34_000, keys: 5, omittedPeers: 0,
        peers: [
          { identity: 'replica-a', weight: 1, live: true, self: true, assigned: { count: 2, keys: ['team-0', 'team-3'] }, acting: 1 },
          { identity: 'replica-b', weight: 2, live: true, self: false, assigned: { count: 3, keys: ['team-1', 'team-2'] } },
          { identity: 'replica-c', weight: 1, live: false, self: false, assigned: { count: 0, keys: [] } },
        ],
        handoff: { count: 1, keys: ['team-3'] },
        unowned: { count: 2, keys: [{ key: 'team-2', since: Date.UTC(2026, 10, 23, 8, 59) }, { key: 'team-3', since: Date.UTC(2026, 10, 23, 8, 59, 58) }] },
        orphaned: { count: 1, keys: ['team-2'] },
      },
      truncated: { maxBytes: 524_288, targets: 0, history: 0, pipelines: 0, pipelineNames: [], caches: 0, clusters: 0, shardKeys: 7 },
    };
    const page = loadPage([{ status: 200, frames: [frame(sharded)] }]);
    page.ready();
    await settle();
    assert.equal(page.byId('shards-section').hidden, false);
    const shards = page.byId('shards');
    assert.match(shards.querySelector('[data-field="shard-view"]')?.textContent ?? '', /^As replica replica-a sees its group: 5 live shard keys, each owned by one live replica within 34 s of a change\. This replica's own fences are facts; the other replicas' shares are computed here/);
    const self = shards.querySelector('tr[data-peer="replica-a"]');
    assert.equal(self?.getAttribute('data-self'), 'true');
    assert.deepEqual(self.children.map((c) => c.textContent), ['replica-a (this replica)', '1', 'live', '2', '1', 'team-0, team-3']);
    assert.deepEqual(shards.querySelector('tr[data-peer="replica-b"]')?.children.map((c) => c.textContent), ['replica-b', '2', 'live', '3', 'not known here', 'team-1, team-2, … and 1 more not shown']);
    assert.deepEqual(shards.querySelector('tr[data-peer="replica-c"]')?.children.map((c) => c.textContent), ['replica-c', '1', 'not live', '0', 'not known here', '—']);
    assert.equal(shards.querySelector('[data-field="handoff"]')?.textContent, 'In handoff here (1): team-3');
    assert.equal(shards.querySelector('[data-field="orphaned"]')?.textContent, '1 shard key has had no owner for longer than the bound (34 s): team-2');
    assert.equal(shards.querySelector('[data-field="orphaned"]')?.className, 'warn');
    assert.equal(shards.querySelector('tr[data-unowned="team-2"]')?.getAttribute('data-orphaned'), 'true');
    assert.match(shards.querySelector('tr[data-unowned="team-2"]')?.textContent ?? '', /orphaned: past the bound/);
    assert.equal(shards.querySelector('tr[data-unowned="team-3"]')?.getAttribute('data-orphaned'), null);
    assert.match(shards.querySelector('tr[data-unowned="team-3"]')?.textContent ?? '', /handoff in progress/);
    assert.match(page.byId('pipelines').querySelector('[data-field="truncated"]')?.textContent ?? '', /left out 7 shard keys from the Shards lists \(their counts are whole\)\./);

    const plain = loadPage([{ status: 200, frames: [frame({ ...sharded, shards: undefined } as unknown as DashboardState)] }]);
    plain.ready();
    await settle();
    assert.equal(plain.byId('shards-section').hidden, true, 'unsharded: no Shards section');
    assert.equal(plain.byId('shards').children.length, 0);
  });
});
