// --kube-api-qps and --kube-api-burst reach every connection the service opens: the service runs
// against a simulated management cluster, and what the cluster receives shows the buckets. The
// service has two connections to it, both the registry keeper's: the own-identity one (the
// Pipeline cache, status, Events, the management cluster's targets) and the leader-election one
// (the Lease: a bucket of its own, so renewals never queue behind caches and reconciles).
// With a burst of 2 and a refill far too slow to matter, each gets exactly two requests through
// and then waits; with the defaults the same run watches everything and renews the Lease.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { eventually } from '../e2e/harness/index.ts';
import { SimulatedCluster, type KindDefinition, type RecordedRequest } from '../fixtures/index.ts';
import { PIPELINE_KIND } from '../fixtures/support/index.ts';

const helmReleaseKind: KindDefinition = { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease', plural: 'helmreleases', namespaced: true, status: true };
const eventKind: KindDefinition = { group: '', version: 'v1', kind: 'Event', plural: 'events', namespaced: true };
const leaseKind: KindDefinition = { group: 'coordination.k8s.io', version: 'v1', kind: 'Lease', plural: 'leases', namespaced: true };

describe('--kube-api-qps and --kube-api-burst', () => {
  let cluster: SimulatedCluster;
  const dir = mkdtempSync(path.join(tmpdir(), 'fleetcache-limits-'));
  const kubeconfigPath = path.join(dir, 'kubeconfig');

  before(async () => {
    cluster = await SimulatedCluster.start({ name: 'limits', namespaces: ['apps'], kinds: [PIPELINE_KIND, helmReleaseKind, eventKind, leaseKind] });
    writeFileSync(kubeconfigPath, cluster.kubeconfig, { mode: 0o600 });
    cluster.store.create({ apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', metadata: { namespace: 'apps', name: 'podinfo' }, spec: { chart: { spec: { version: '1.0.0' } } } });
    // A Pipeline on the management cluster itself: reconciling it makes the registry open a
    // connection of its own (discovery, LIST and WATCH of HelmReleases).
    cluster.store.create({
      apiVersion: 'fleetcache.dev/v1alpha1',
      kind: 'Pipeline',
      metadata: { namespace: 'apps', name: 'demo' },
      spec: {
        appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
        environments: [{ name: 'prod', targets: [{ namespace: 'apps' }] }],
        promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
      },
    });
  });
  after(async () => {
    await cluster.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Runs the service (as a process) with `flags` until `until` returns, then kills it; what the
   * cluster saw meanwhile. Killed, not stopped: a reconcile in flight waits for its status write,
   * which a bucket refilled once an hour would hold for that long.
   */
  let runs = 0;
  async function serve(flags: readonly string[], until: (seen: () => readonly RecordedRequest[]) => Promise<void>): Promise<readonly RecordedRequest[]> {
    runs += 1;
    const startedAt = cluster.recentRequests().length;
    const seen = (): readonly RecordedRequest[] => cluster.recentRequests().slice(startedAt);
    const args = ['--kubeconfig', kubeconfigPath, '--metrics-bind-address=0', '--health-probe-bind-address=0', '--leader-elect',
      // A Lease of its own for each run: a killed run's Lease is not released.
      `--leader-election-id=limits-${runs}`, '--leader-election-namespace=apps', '--leader-elect-retry-period=100ms', '--leader-elect-renew-deadline=5s', '--leader-elect-lease-duration=10s', ...flags];
    const child = spawn(process.execPath, [fileURLToPath(new URL('fleetcache.ts', import.meta.url)), ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    child.stderr.on('data', (chunk: Buffer) => { log += chunk.toString('utf8'); });
    const exited = once(child, 'exit');
    try {
      await Promise.race([until(seen), exited.then(([code]) => { throw new Error(`the service exited with ${String(code)}:\n${log}\nrequests:\n${seen().map((r) => `${r.method} ${r.path}`).join('\n')}`); })]);
    } finally {
      child.kill('SIGKILL');
      await exited;
    }
    return seen();
  }

  const count = (requests: readonly RecordedRequest[], verb: string, plural: string): number =>
    requests.filter((r) => r.verb === verb && r.path.endsWith(`/${plural}`)).length;
  const leaseRequests = (requests: readonly RecordedRequest[]): number => requests.filter((r) => r.path.includes('/leases')).length;

  it('with the defaults, every connection gets its requests through: Lease renewals, both watches', async () => {
    const seen = await serve([], async (requests) => {
      await eventually('the Pipeline and HelmRelease watches and three Lease renewals', () =>
        count(requests(), 'watch', 'pipelines') > 0 && count(requests(), 'watch', 'helmreleases') > 0 && leaseRequests(requests()) >= 5);
    });
    assert.ok(seen.length > 6);
  });

  it('with --kube-api-burst=2 and a negligible --kube-api-qps, each connection sends two requests and then waits', async () => {
    const seen = await serve(['--kube-api-qps=0.0001', '--kube-api-burst=2'], async (requests) => {
      // The leader-election connection: read the Lease (absent), create it. The shared one:
      // discovery, LIST Pipelines. Then each waits for its own bucket (renewal, WATCH Pipelines):
      // the Pipeline's reconcile never gets to discover HelmReleases.
      await eventually('the LIST of Pipelines and the Lease created', () => count(requests(), 'list', 'pipelines') === 1 && leaseRequests(requests()) === 2);
      // The next request of each connection would follow at once; give them time to show up.
      await delay(1_500);
    });
    assert.deepEqual(
      { pipelineWatches: count(seen, 'watch', 'pipelines'), helmReleaseRequests: seen.filter((r) => r.path.includes('helm.toolkit.fluxcd.io')).length, leaseRequests: leaseRequests(seen), total: seen.length },
      { pipelineWatches: 0, helmReleaseRequests: 0, leaseRequests: 2, total: 4 },
      seen.map((r) => `${r.method} ${r.path}`).join('\n'),
    );
  });
});
