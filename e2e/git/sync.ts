// A stand-in for Flux's source- and kustomize-controller: polls a branch of a repository served by
// GitServer and applies the HelmRelease chart version found in each watched file to the cluster,
// as a GitOps tool would. With FluxStandIn (which plays helm-controller: marks the release Ready),
// a promotion committed to Git reaches the target cluster the way it would in production.
import { load } from 'js-yaml';
import { setTimeout as delay } from 'node:timers/promises';
import type { TestCluster } from '../harness/index.ts';
import type { GitServer } from './server.ts';

export interface SyncedRelease {
  /** File in the repository holding a HelmRelease. */
  readonly file: string;
  readonly cluster: TestCluster;
  readonly namespace: string;
  readonly name: string;
}

interface HelmReleaseShape { spec?: { chart?: { spec?: { version?: unknown } } } }

/** Starts the loop; the returned function stops it and waits for it. */
export function startGitSync(server: GitServer, repository: string, branch: string, releases: readonly SyncedRelease[], intervalMs = 200): () => Promise<void> {
  const stop = new AbortController();
  const loop = (async () => {
    while (!stop.signal.aborted) {
      for (const release of releases) {
        try {
          const wanted = (load(await server.show(repository, branch, release.file)) as HelmReleaseShape | undefined)?.spec?.chart?.spec?.version;
          if (typeof wanted !== 'string') continue;
          const path = `/apis/helm.toolkit.fluxcd.io/v2/namespaces/${release.namespace}/helmreleases/${release.name}`;
          const current = await release.cluster.request('GET', path);
          const body = current.body as { spec: { chart: { spec: { version: string } } } };
          if (current.statusCode !== 200 || body.spec.chart.spec.version === wanted) continue;
          body.spec.chart.spec.version = wanted;
          await release.cluster.request('PUT', path, body); // a conflict is retried on the next pass
        } catch {
          // the repository or cluster is being torn down, or the file is mid-edit: next pass
        }
      }
      await delay(intervalMs, undefined, { signal: stop.signal }).catch(() => undefined);
    }
  })();
  return async () => {
    stop.abort();
    await loop;
  };
}
