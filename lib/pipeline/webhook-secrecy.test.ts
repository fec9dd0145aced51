// A webhook URL comes from a tenant's Secret, and for Slack, Teams or Discord incoming webhooks its
// path is the credential: whatever fails, nothing of the URL beyond scheme and host may reach the
// Pipeline's status, its Events or the service's logs (anyone with `view` reads the first two).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { HostileWebhookReceiver, SimulatedCluster } from '../../fixtures/index.ts';
import { eventually } from '../../e2e/harness/index.ts';
import { StaticProvider } from '../cluster/index.ts';
import { registryWithKeeper } from '../registry/testing.ts';
import { PipelineController } from './controller.ts';
import type { Pipeline, PromotionRecord } from './types.ts';
import { kubeConfigFrom, PIPELINE_KIND, RecordingLogger } from '../../fixtures/support/index.ts';

const SECRET = 'XOXB9PathCredential';
const NS = 'apps';
const PIPELINE = { apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline' } as const;
const HELM_RELEASE = { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease' } as const;

/** An incoming-webhook URL on `origin`: the path (and the query, and the user) is the secret. */
const hook = (origin: string): string => origin.replace('://', `://u-${SECRET}@`) + `/services/T0/B0/${SECRET}?k=q-${SECRET}`;

describe('a webhook URL read from a Secret', () => {
  let sim: SimulatedCluster;
  const receivers: HostileWebhookReceiver[] = [];
  before(async () => {
    sim = await SimulatedCluster.start({
      namespaces: [NS, 'dev', 'staging'],
      kinds: [
        PIPELINE_KIND,
        { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true, status: true },
        { group: '', version: 'v1', kind: 'Event', plural: 'events', namespaced: true },
      ],
    });
  });
  after(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await sim.close();
  });

  it('shows only its scheme and host in status, Events and logs, whatever fails', async (t) => {
    // dev runs 2.0.0, staging 1.0.0: every Pipeline below promotes 2.0.0 to staging by webhook.
    for (const [namespace, version] of [['dev', '2.0.0'], ['staging', '1.0.0']] as const) {
      sim.store.create({ ...HELM_RELEASE, metadata: { namespace, name: 'podinfo' }, spec: { chart: { spec: { version } } } });
      const created = sim.store.get({ ...HELM_RELEASE, namespace, name: 'podinfo' });
      sim.store.updateStatus({ ...created, status: { observedGeneration: created?.metadata?.generation, conditions: [{ type: 'Ready', status: 'True' }], history: [{ chartVersion: version }] } });
    }
    const receiver = async (answer: Parameters<HostileWebhookReceiver['answer']>[0]): Promise<string> => {
      const r = await HostileWebhookReceiver.start();
      receivers.push(r);
      r.answer(answer);
      return r.url;
    };
    const closed = await HostileWebhookReceiver.start();
    await closed.close();
    const modes = {
      'refused-address': hook('http://169.254.169.254'), // link-local: refused even with private networks allowed
      'dns-failure': hook('http://no-such-host.invalid'),
      unreachable: hook(closed.url),
      timeout: hook(await receiver({ kind: 'silent' })),
      'non-2xx': hook(await receiver({ kind: 'plain', status: 404, body: `no hook ${SECRET}` })),
      redirect: hook(await receiver({ kind: 'redirect', status: 302, location: hook('http://elsewhere.example') })),
    } as const;
    for (const [mode, url] of Object.entries(modes)) {
      sim.store.create({ apiVersion: 'v1', kind: 'Secret', metadata: { namespace: NS, name: `${mode}-hook` }, data: { url: Buffer.from(url).toString('base64') } });
      sim.store.create({
        ...PIPELINE, metadata: { namespace: NS, name: mode },
        spec: {
          appRef: { apiVersion: HELM_RELEASE.apiVersion, kind: HELM_RELEASE.kind, name: 'podinfo' },
          environments: [{ name: 'dev', targets: [{ namespace: 'dev' }] }, { name: 'staging', targets: [{ namespace: 'staging' }] }],
          promotion: { strategy: 'webhook', webhook: { secretRef: { name: `${mode}-hook` } } },
        },
      });
    }

    const logger = new RecordingLogger();
    const kubeConfig = kubeConfigFrom(sim.kubeconfig);
    const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: {} }), local: kubeConfig, credentialCheckIntervalMs: 0, logger });
    t.after(() => registry.close());
    // The receivers are on loopback; a short timeout so that the silent one fails soon.
    const controller = new PipelineController({ registry, workers: 2, logger, allowPrivateWebhooks: true, allowCrossNamespaceTargets: true, webhookTimeoutMs: 1_000 });
    const stop = new AbortController();
    const running = controller.run(stop.signal);
    t.after(async () => { stop.abort(); await running; });

    const failed = await eventually('every Pipeline recorded a failed promotion', () => {
      const records = Object.keys(modes).map((mode) => {
        const pipeline = sim.store.get({ ...PIPELINE, namespace: NS, name: mode }) as Pipeline | undefined;
        return [mode, pipeline?.status?.promotions?.find((r) => r.state === 'Failed')] as const;
      });
      return records.every(([, r]) => r !== undefined) && new Map(records as (readonly [string, PromotionRecord])[]);
    }, 60_000);
    const events = await eventually('every Pipeline has its PromotionFailed Event', () => {
      const all = sim.store.list({ apiVersion: 'v1', kind: 'Event' }, { namespace: NS });
      const reasons = new Set(all.filter((e) => e.reason === 'PromotionFailed').map((e) => (e.involvedObject as { name: string }).name));
      return Object.keys(modes).every((m) => reasons.has(m)) && all;
    }, 30_000);

    const expected: Record<keyof typeof modes, RegExp> = {
      'refused-address': /^refused the webhook http:\/\/169\.254\.169\.254: it resolves to a link-local address$/,
      'dns-failure': /^the webhook http:\/\/no-such-host\.invalid (could not be reached \([A-Z_]+\)|did not finish within 1000 ms \(connecting\))$/,
      unreachable: /^the webhook http:\/\/127\.0\.0\.1:\d+ could not be reached \(ECONNREFUSED\)$/,
      timeout: /^the webhook http:\/\/127\.0\.0\.1:\d+ did not finish within 1000 ms \(waiting for the answer\)$/,
      'non-2xx': /^the webhook http:\/\/127\.0\.0\.1:\d+ answered HTTP 404$/,
      redirect: /^the webhook http:\/\/127\.0\.0\.1:\d+ answered HTTP 302 \(redirects are not followed\)$/,
    };
    for (const [mode, pattern] of Object.entries(expected)) assert.match(failed.get(mode)?.message ?? '', pattern, mode);
    assert.ok(logger.json().some((line) => line.includes('promotion failed')), 'the failures were logged');
    const statuses = Object.keys(modes).map((mode) => sim.store.get({ ...PIPELINE, namespace: NS, name: mode })?.status);
    for (const [where, text] of [['status', JSON.stringify(statuses)], ['Events', JSON.stringify(events)], ['logs', logger.json().join('\n')]] as const) {
      assert.ok(!text.includes(SECRET), `the URL's path, query or user reached the ${where}`);
      assert.ok(!text.includes('/services/'), `the URL's path reached the ${where}`);
    }
  });
});
