import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { validatePipelineSpec, type SpecValidation } from './validate.ts';

function spec(prod: Record<string, unknown>, promotion: Record<string, unknown> = { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } }): unknown {
  return {
    appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
    environments: [{ name: 'dev', targets: [{ namespace: 'team-a' }] }, { name: 'prod', ...prod }],
    promotion,
  };
}

function problemsOf(result: SpecValidation): string {
  if (result.valid) assert.fail('expected the spec to be refused');
  return result.problems.join('\n');
}

describe('validatePipelineSpec: fleet environments', () => {
  it('resolves a selector, a list, a readiness policy and waves', () => {
    const result = validatePipelineSpec(spec({
      fleet: {
        namespace: 'podinfo',
        clusterSelector: { matchLabels: { env: 'prod' }, matchExpressions: [{ key: 'region', operator: 'In', values: ['eu', 'us'] }, { key: 'retired', operator: 'DoesNotExist' }] },
        clusters: [{ kind: 'Cluster', name: 'edge-1' }],
        readiness: { policy: 'Quorum', count: 5 },
        waves: [
          { name: 'canary', selector: { matchLabels: { wave: 'canary' } }, soakSeconds: 300, requireApproval: true },
          { name: 'half', percent: 50, readiness: { policy: 'Percent', percent: 80 } },
          { name: 'rest', count: 1000 },
        ],
      },
    }), 'team-a');
    assert.ok(result.valid, JSON.stringify(result));
    const prod = result.spec.environments[1];
    assert.ok(prod !== undefined);
    assert.deepEqual(prod.targets, []);
    assert.deepEqual(prod.fleet, {
      namespace: 'podinfo',
      selector: { kind: 'Secret', labelSelector: 'env=prod,region in (eu,us),!retired' },
      clusters: [{ kind: 'cluster-api', name: 'edge-1' }],
      readiness: { policy: 'Quorum', count: 5 },
      waves: [
        { name: 'canary', by: { kind: 'selector', labelSelector: 'wave=canary' }, readiness: { policy: 'Quorum', count: 5 }, soakSeconds: 300, requireApproval: true },
        { name: 'half', by: { kind: 'percent', percent: 50 }, readiness: { policy: 'Percent', percent: 80 }, soakSeconds: 0, requireApproval: false },
        { name: 'rest', by: { kind: 'count', count: 1000 }, readiness: { policy: 'Quorum', count: 5 }, soakSeconds: 0, requireApproval: false },
      ],
    });
  });

  it('refuses targets with fleet, an empty selector, a wave with two ways of choosing, bad policies', () => {
    const text = problemsOf(validatePipelineSpec(spec({
      targets: [{ namespace: 'x' }],
      fleet: {
        namespace: 'podinfo',
        clusterSelector: {},
        readiness: { policy: 'Quorum' },
        waves: [{ name: 'a', count: 1, percent: 5 }, { name: 'a', selector: { matchExpressions: [{ key: 'k', operator: 'Near' }] } }],
      },
    }), 'team-a'));
    assert.match(text, /environments\[1\]\.targets: must be unset when fleet is set/);
    assert.match(text, /clusterSelector: must name labels/);
    assert.match(text, /readiness: must be \{policy: All\}/);
    assert.match(text, /waves\[0\]: set exactly one of selector, count, percent \(got count, percent\)/);
    assert.match(text, /waves\[1\]\.name: "a" is used by an earlier wave/);
    assert.match(text, /operator: must be In, NotIn, Exists or DoesNotExist/);
  });

  it('refuses a fleet with no members named, waves on the first environment, and git pull requests with waves', () => {
    assert.match(problemsOf(validatePipelineSpec(spec({ fleet: { namespace: 'podinfo' } }), 'team-a')), /fleet: set clusterSelector, clusters, or both/);
    const first = {
      appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
      environments: [{ name: 'dev', fleet: { namespace: 'p', clusters: [{ kind: 'Secret', name: 'a' }], waves: [{ name: 'w', count: 1 }] } }, { name: 'prod', targets: [{ namespace: 'team-a' }] }],
      promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
    };
    assert.match(problemsOf(validatePipelineSpec(first, 'team-a')), /environments\[0\]\.fleet\.waves: the first environment is never promoted into/);
    const git = { strategy: 'git', git: { url: 'https://git.example/repo.git', pullRequest: { provider: 'github' } } };
    const waves = { fleet: { namespace: 'p', clusters: [{ kind: 'Secret', name: 'a' }], waves: [{ name: 'w', count: 1 }] } };
    assert.match(problemsOf(validatePipelineSpec(spec(waves, git), 'team-a')), /git with pullRequest would need a merge per wave/);
    // Pushing to the branch: one marker per wave.
    assert.ok(validatePipelineSpec(spec(waves, { strategy: 'git', git: { url: 'https://git.example/repo.git' } }), 'team-a').valid);
  });
});
