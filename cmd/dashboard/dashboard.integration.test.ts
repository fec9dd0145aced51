// The dashboard in a real headless browser (Debian's chromium, driven by playwright-core) against
// the demo's fleet on three real apiservers and the service as a child process with its default,
// authenticated metrics server: the page asks for a token, then shows the pipeline promoting
// dev → staging → prod live, without a reload and without a request anywhere but the service; with
// prod gated, a viewer without the verb `approve` is refused and an approver approves from the
// page, on a desktop width and on a phone's (390 px).
//
// FLEETCACHE_DASHBOARD_SCREENSHOT=docs/dashboard.png also saves a screenshot of the page.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { FLEET_SERVICE_ARGS, PIPELINE_NAMESPACE, readPipeline, releaseToDev, setUpFleet, startFlux, updateObject, type Fleet } from '../../e2e/fleet.ts';
import { useClusters, type TestCluster } from '../../e2e/harness/index.ts';
import { startService, type ServiceProcess } from '../../e2e/service.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
/** Where tools/install-chromium.sh puts the browser (Debian's package), unless CHROMIUM_PATH says otherwise. */
const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'];
/** A markup payload that the validation echoes into the Ready condition's message. */
const HOSTILE = '<img src=x onerror=\'window.__xss=1\'>';
const POD = '[data-pipeline="delivery/podinfo"]';

function chromiumPath(): string {
  const found = CANDIDATES.find((p): p is string => p !== undefined && p !== '' && existsSync(p));
  if (found === undefined) throw new Error('no chromium: run tools/install-chromium.sh (make test does), or set CHROMIUM_PATH');
  return found;
}

/** Status of GET `url` (the body, an endless stream when 200, is not read). */
function statusOf(url: string, token?: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(url, { rejectUnauthorized: false, headers: token === undefined ? {} : { authorization: `Bearer ${token}` } }, (res) => {
      resolve(res.statusCode ?? 0);
      req.destroy();
    });
    req.once('error', reject);
    req.end();
  });
}

/** True when nothing on the page is wider than the window (tables scroll inside their box). */
function fitsWidth(page: Page): Promise<{ readonly scrollWidth: number; readonly innerWidth: number }> {
  return page.evaluate(() => {
    const window = globalThis as unknown as { readonly innerWidth: number; readonly document: { readonly documentElement: { readonly scrollWidth: number } } };
    return { scrollWidth: window.document.documentElement.scrollWidth, innerWidth: window.innerWidth };
  });
}

/** A token for a ServiceAccount of `namespace`, bound (or not) to a ClusterRole. */
async function tokenFor(cluster: TestCluster, serviceAccount: string, clusterRole?: string): Promise<string> {
  const kubeconfig = await cluster.restrictedKubeconfig({ namespace: 'monitoring', serviceAccount });
  const token = /"?token"?: *"?([^"\s]+)"?/.exec(kubeconfig)?.[1] ?? '';
  assert.ok(token.length > 20);
  if (clusterRole !== undefined) {
    const res = await cluster.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
      metadata: { name: `${serviceAccount}-${clusterRole}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
      subjects: [{ kind: 'ServiceAccount', name: serviceAccount, namespace: 'monitoring' }],
    });
    assert.equal(res.statusCode, 201, JSON.stringify(res.body));
  }
  return token;
}

/**
 * Installed in the page before its own script (an init script is not subject to the page's CSP):
 * records each environment revision of delivery/podinfo in the order it appeared.
 */
const RECORDER = `window.__seen = [];
document.addEventListener('DOMContentLoaded', () => {
  const record = () => {
    for (const env of document.querySelectorAll('${POD} [data-env]')) {
      const key = env.getAttribute('data-env') + '=' + env.querySelector('[data-field="revision"]').textContent;
      if (!window.__seen.includes(key)) window.__seen.push(key);
    }
  };
  new MutationObserver(record).observe(document.getElementById('pipelines'), { childList: true, subtree: true, characterData: true });
});`;

/** A global of the page, read with a function (the page's CSP forbids evaluating strings). */
function pageGlobal(page: Page, name: '__seen' | '__xss'): Promise<unknown> {
  return page.evaluate((key) => (globalThis as unknown as Record<string, unknown>)[key], name);
}

function revisionOf(page: Page, env: string): Promise<string> {
  return page.locator(`${POD} [data-env="${env}"] [data-field="revision"]`).innerText();
}

describe('the dashboard in a browser', () => {
  const fixture = useClusters(3, { namePrefix: 'dashboard' });
  let fleet: Fleet;
  let service: ServiceProcess | undefined;
  let browser: Browser | undefined;
  let context: BrowserContext | undefined;
  let readerToken = '';
  let nobodyToken = '';
  let approverToken = '';
  /** The page of the live test, kept open for the shutdown test. */
  let livePage: Page | undefined;
  const stops: (() => Promise<void>)[] = [];

  before(async () => {
    const [management, staging, prod] = fixture.clusters as [TestCluster, TestCluster, TestCluster];
    fleet = { management, staging, prod };
    await setUpFleet(fleet, '1.0.0');
    // The shipped ClusterRole for metrics readers, which names the dashboard's state.
    for (const doc of loadAll(readFileSync(path.join(root, 'config/rbac/metrics_reader_role.yaml'), 'utf8')) as object[]) {
      const res = await management.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', doc);
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
    }
    readerToken = await tokenFor(management, 'dashboard-viewer', 'fleetcache-metrics-reader');
    nobodyToken = await tokenFor(management, 'nobody');
    // The shipped approver ClusterRole, bound in the Pipeline's namespace only (as the README says).
    for (const doc of loadAll(readFileSync(path.join(root, 'config/rbac/pipeline_approver_role.yaml'), 'utf8')) as object[]) {
      const res = await management.request('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', doc);
      assert.equal(res.statusCode, 201, JSON.stringify(res.body));
    }
    approverToken = await tokenFor(management, 'release-manager', 'fleetcache-metrics-reader');
    const binding = await management.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${PIPELINE_NAMESPACE}/rolebindings`, {
      metadata: { name: 'release-manager-approve', namespace: PIPELINE_NAMESPACE },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'fleetcache-pipeline-approver' },
      subjects: [{ kind: 'ServiceAccount', name: 'release-manager', namespace: 'monitoring' }],
    });
    assert.equal(binding.statusCode, 201, JSON.stringify(binding.body));
    // A second Pipeline whose invalid spec is echoed, markup and all, into its Ready condition.
    const hostile = await management.request('POST', `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines`, {
      apiVersion: 'fleetcache.dev/v1alpha1',
      kind: 'Pipeline',
      metadata: { name: 'hostile', namespace: PIPELINE_NAMESPACE },
      spec: {
        appRef: { apiVersion: HOSTILE, kind: 'HelmRelease', name: 'podinfo' },
        environments: [{ name: 'dev', targets: [{ namespace: PIPELINE_NAMESPACE }] }],
        promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
      },
    });
    assert.equal(hostile.statusCode, 201, JSON.stringify(hostile.body));
    stops.push(await startFlux(fixture.clusters, { applyDelayMs: 1500 }));
    service = await startService('dashboard', management.adminKubeconfig, FLEET_SERVICE_ARGS, { secureMetrics: true });
    browser = await chromium.launch({ executablePath: chromiumPath() });
  }, { timeout: 300_000 });

  after(async () => {
    await context?.close();
    await browser?.close();
    await service?.stop();
    for (const stop of stops.reverse()) await stop();
  });

  it('refuses the state without a token, or with one that may not read it; the static page carries no data', async () => {
    assert.ok(service !== undefined);
    const events = `${service.metrics}/dashboard/events`;
    assert.match(events, /^https:/, 'metrics are secure by default');
    assert.equal(await statusOf(events), 401);
    assert.equal(await statusOf(events, 'not-a-token'), 401);
    assert.equal(await statusOf(events, nobodyToken), 403);
    assert.equal(await statusOf(events, readerToken), 200);
    assert.equal(await statusOf(`${service.metrics}/metrics`), 401, 'the same authentication as /metrics');
    assert.equal(await statusOf(`${service.metrics}/dashboard/`), 200);
  });

  it('shows the pipeline promoting dev → staging → prod live, escaped, and loads nothing from anywhere else', async () => {
    assert.ok(service !== undefined && browser !== undefined);
    const origin = new URL(service.metrics).origin;
    context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1360, height: 900 }, colorScheme: 'light' });
    const external: string[] = [];
    const requested: string[] = [];
    const eventStatuses: number[] = [];
    const errors: string[] = [];
    // Every request the page makes goes through here: anything not on loopback is refused and recorded.
    await context.route('**/*', async (route) => {
      const url = new URL(route.request().url());
      if (url.hostname === '127.0.0.1' || url.hostname === 'localhost' || url.hostname === '[::1]') {
        await route.continue();
        return;
      }
      external.push(url.href);
      await route.abort('blockedbyclient');
    });
    await context.addInitScript({ content: RECORDER });
    const page = await context.newPage();
    livePage = page;
    let loads = 0;
    page.on('load', () => { loads += 1; });
    page.on('request', (r) => { requested.push(r.url()); });
    page.on('response', (r) => { if (r.url().endsWith('/dashboard/events')) eventStatuses.push(r.status()); });
    // A script error or one the page reports (a Trusted Types violation, say) fails the long waits below at once.
    let failed: (err: Error) => void = () => undefined;
    const pageFailed = new Promise<never>((_, reject) => { failed = reject; });
    pageFailed.catch(() => undefined);
    page.on('pageerror', (e) => {
      errors.push(e.message);
      failed(new Error(`the page threw: ${e.message}`));
    });
    page.on('console', (m) => {
      // The page's own reports (a cut stream, a render that threw), not the browser's 401 notes.
      if (m.type() !== 'error' || !m.text().startsWith('dashboard: ')) return;
      errors.push(m.text());
      failed(new Error(`the page reported: ${m.text()}`));
    });
    const until = (wait: Promise<void>): Promise<void> => Promise.race([wait, pageFailed]);

    await page.goto(`${origin}/dashboard/`);
    // No token yet: the state is refused and the page asks for one.
    await page.locator('#login').waitFor({ state: 'visible' });
    assert.deepEqual(eventStatuses, [401]);
    assert.equal(await page.locator('#connection').getAttribute('data-state'), 'refused');
    assert.equal(await page.locator(POD).count(), 0);

    await page.fill('#token', readerToken);
    await page.click('#login button[type="submit"]');
    await page.locator('#login').waitFor({ state: 'hidden' });
    const readyAt = (revision: string, env = ''): string => `${POD} [data-env${env === '' ? '' : `="${env}"`}][data-ready="true"] [data-field="revision"]:text-is("${revision}")`;
    await until(page.locator(readyAt('1.0.0')).nth(2).waitFor({ timeout: 120_000 }));
    assert.equal(await page.locator('#connection').getAttribute('data-state'), 'live');

    // Release 1.1.0 to dev and watch it travel, without reloading the page.
    await releaseToDev(fleet, '1.1.0');
    await until(page.locator(readyAt('1.1.0', 'prod')).waitFor({ timeout: 180_000 }));
    const seen = await pageGlobal(page, '__seen') as string[];
    const at = (key: string): number => seen.indexOf(key);
    assert.ok(at('prod=1.0.0') >= 0 && at('dev=1.1.0') > at('prod=1.0.0') && at('staging=1.1.0') > at('dev=1.1.0') && at('prod=1.1.0') > at('staging=1.1.0'), `seen in order: ${seen.join(', ')}`);
    assert.equal(loads, 1, 'the same page, updated in place');
    assert.deepEqual(eventStatuses, [401, 200], 'one stream, never reconnected');
    assert.deepEqual([await revisionOf(page, 'dev'), await revisionOf(page, 'staging'), await revisionOf(page, 'prod')], ['1.1.0', '1.1.0', '1.1.0']);

    // History with outcomes, clusters and caches.
    await page.locator(`${POD} tr[data-environment="prod"][data-state="Succeeded"]`).first().waitFor();
    assert.match(await page.locator(`${POD} tr[data-environment="prod"][data-state="Succeeded"]`).first().innerText(), /1\.1\.0/);
    assert.match(await page.locator(`${POD} tr[data-environment="staging"][data-state="Succeeded"]`).first().innerText(), /1\.1\.0/);
    for (const cluster of ['local', `secret:${PIPELINE_NAMESPACE}/staging-kubeconfig`, `secret:${PIPELINE_NAMESPACE}/prod-kubeconfig`]) {
      assert.match(await page.locator(`#clusters tr[data-cluster="${cluster}"]`).innerText(), /\byes\b/, `${cluster} reachable`);
    }
    assert.ok(await page.locator('#caches tr[data-cache]').count() >= 3);

    // The hostile Pipeline's message is shown as text: no element made of it, no script run.
    const hostile = page.locator('[data-pipeline="delivery/hostile"]');
    await hostile.waitFor();
    assert.ok((await hostile.innerText()).includes(HOSTILE), await hostile.innerText());
    assert.equal(await page.locator('#pipelines img').count(), 0);
    assert.equal(await pageGlobal(page, '__xss'), undefined);

    const screenshot = process.env.FLEETCACHE_DASHBOARD_SCREENSHOT;
    if (screenshot !== undefined && screenshot !== '') {
      await hostile.evaluate((node: { remove(): void }) => { node.remove(); });
      await page.screenshot({ path: path.resolve(root, screenshot), fullPage: true });
    }

    assert.deepEqual(external, [], 'no request left loopback');
    assert.ok(requested.every((url) => url.startsWith(`${origin}/dashboard/`)), requested.join('\n'));
    assert.ok(requested.every((url) => !url.includes(readerToken)), 'the token never in a URL');
    assert.deepEqual(errors, []);
    const desktop = await fitsWidth(page);
    assert.ok(desktop.scrollWidth <= desktop.innerWidth, `nothing wider than the window: ${JSON.stringify(desktop)}`);
  });

  it('approves from the page on a phone after a viewer without the verb is refused, and the promotion names the approver', async () => {
    assert.ok(service !== undefined && browser !== undefined && livePage !== undefined);
    const page = livePage;
    const errors: string[] = [];
    page.on('pageerror', (e) => { errors.push(e.message); });
    // Gate prod, then release 1.2.0: it reaches staging and waits for an approval into prod.
    await updateObject(fleet.management, `/apis/fleetcache.dev/v1alpha1/namespaces/${PIPELINE_NAMESPACE}/pipelines/podinfo`, (current) => {
      const p = current as { spec: { environments: Record<string, unknown>[] } };
      return { ...p, spec: { ...p.spec, environments: p.spec.environments.map((e) => (e.name === 'prod' ? { ...e, requireApproval: true } : e)) } };
    });
    await releaseToDev(fleet, '1.2.0');
    const button = page.locator(`${POD} button[data-action="approve"][data-environment="prod"][data-revision="1.2.0"]`);
    await button.waitFor({ timeout: 180_000 });
    const notice = page.locator(`${POD} [data-field="notice"]`);

    // Desktop width, logged in as a viewer who may read the dashboard but not approve: refused, nothing recorded.
    await button.click();
    await page.locator(`${POD} [data-field="notice"][data-kind="bad"]`).waitFor();
    assert.match(await notice.innerText(), /HTTP 403.*may not approve pipelines\.fleetcache\.dev podinfo in namespace delivery/);
    assert.equal(((await readPipeline(fleet)).status as { approvals?: unknown } | undefined)?.approvals, undefined);

    // A phone: 390 px wide. Nothing overflows, the button is whole on screen; the approver logs in and approves.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.click('#forget');
    await page.locator('#login').waitFor({ state: 'visible' });
    await page.fill('#token', approverToken);
    await page.click('#login button[type="submit"]');
    await page.locator('#login').waitFor({ state: 'hidden' });
    await button.waitFor();
    const phone = await fitsWidth(page);
    assert.equal(phone.innerWidth, 390);
    assert.ok(phone.scrollWidth <= phone.innerWidth, `nothing wider than the phone: ${JSON.stringify(phone)}`);
    await button.scrollIntoViewIfNeeded();
    const box = await button.boundingBox();
    assert.ok(box !== null && box.x >= 0 && box.x + box.width <= 390 && box.height >= 30, `the button fits and is easy to tap: ${JSON.stringify(box)}`);
    await button.click();
    await page.locator(`${POD} [data-field="notice"][data-kind="ok"]`).waitFor();
    assert.match(await notice.innerText(), /^Approved 1\.2\.0 for prod by system:serviceaccount:monitoring:release-manager at \S+Z$/);

    // The approval is in status under the approver's name; prod gets 1.2.0 on the page; the record names them.
    const approvals = ((await readPipeline(fleet)).status as { approvals?: { environment: string; revision: string; approver: { username: string } }[] } | undefined)?.approvals ?? [];
    assert.deepEqual(approvals.map((a) => [a.environment, a.revision, a.approver.username]), [['prod', '1.2.0', 'system:serviceaccount:monitoring:release-manager']]);
    await page.locator(`${POD} [data-env="prod"][data-ready="true"] [data-field="revision"]:text-is("1.2.0")`).waitFor({ timeout: 180_000 });
    await page.locator(`${POD} tr[data-environment="prod"][data-state="Succeeded"]`).first().waitFor();
    assert.match(await page.locator(`${POD} tr[data-environment="prod"][data-state="Succeeded"]`).first().innerText(), /1\.2\.0/);
    assert.equal(await button.count(), 0, 'no button once approved');
    const record = ((await readPipeline(fleet)).status as { promotions?: { environment: string; revision: string; state: string; approvedBy?: { username: string } }[] } | undefined)?.promotions?.findLast((r) => r.environment === 'prod' && r.revision === '1.2.0');
    assert.equal(record?.state, 'Succeeded');
    assert.equal(record.approvedBy?.username, 'system:serviceaccount:monitoring:release-manager');
    const after = await fitsWidth(page);
    assert.ok(after.scrollWidth <= after.innerWidth, `still nothing wider than the phone: ${JSON.stringify(after)}`);
    assert.deepEqual(errors, []);
  });

  it('says so when the service shuts down: the stream ends', async () => {
    assert.ok(service !== undefined && livePage !== undefined);
    await service.stop();
    await livePage.locator('#connection[data-state="disconnected"]').waitFor({ timeout: 60_000 });
  });
});
