import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AppKinds } from './app-kinds.ts';
import { validatePipelineSpec, type SpecValidation } from './validate.ts';

const valid = {
  appRef: { apiVersion: 'helm.toolkit.fluxcd.io/v2', kind: 'HelmRelease', name: 'podinfo' },
  environments: [
    { name: 'dev', targets: [{ namespace: 'team-a' }] },
    { name: 'staging', targets: [{ namespace: 'podinfo', clusterRef: { kind: 'Secret', name: 'staging-kubeconfig', key: 'value' } }] },
    { name: 'prod', targets: [{ namespace: 'podinfo', clusterRef: { kind: 'Cluster', name: 'prod', namespace: 'fleet' } }] },
  ],
  promotion: { strategy: 'patch', patch: { path: '/spec/chart/spec/version' } },
};

/** `valid` with `change` applied to a deep copy. */
function variant(change: (spec: Record<string, unknown>) => void): unknown {
  const copy = structuredClone(valid) as unknown as Record<string, unknown>;
  change(copy);
  return copy;
}

function problemsOf(result: SpecValidation): string {
  if (result.valid) assert.fail('expected the spec to be refused');
  return result.problems.join('\n');
}

describe('validatePipelineSpec', () => {
  it('accepts a valid spec and normalises it into the library\'s terms', () => {
    const result = validatePipelineSpec(valid, 'team-a');
    assert.ok(result.valid);
    const { spec } = result;
    assert.deepEqual(spec.app, { gvk: { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' }, name: 'podinfo' });
    assert.deepEqual(spec.environments.map((e) => e.targets.map((t) => [t.clusterKey, t.cluster.kind])), [
      [['local', 'local']],
      [['secret:team-a/staging-kubeconfig#value', 'secret']],
      [['cluster-api:fleet/prod', 'cluster-api']],
    ]);
    assert.deepEqual(spec.promotion, { strategy: 'patch', path: '/spec/chart/spec/version' });
    assert.equal(spec.revisionPath, undefined);
  });

  it('accepts a core-group kind and defaults the webhook key to "url"', () => {
    const result = validatePipelineSpec(variant((s) => {
      s.appRef = { apiVersion: 'v1', kind: 'ConfigMap', name: 'app' };
      s.promotion = { strategy: 'webhook', webhook: { secretRef: { name: 'hook' } } };
      s.revisionPath = '/data/revision';
    }), 'team-a', { appKinds: AppKinds.parse(['ConfigMap']) });
    assert.ok(result.valid);
    assert.deepEqual(result.spec.app.gvk, { group: '', version: 'v1', kind: 'ConfigMap' });
    assert.deepEqual(result.spec.promotion, { strategy: 'webhook', secretName: 'hook', secretKey: 'url' });
    assert.equal(result.spec.revisionPath, '/data/revision');
  });

  const refused: readonly [string, unknown, RegExp][] = [
    ['no spec at all', undefined, /^spec: required/],
    ['a spec that is a list', [], /^spec: must be an object/],
    ['a missing appRef', variant((s) => { delete s.appRef; }), /spec\.appRef: required/],
    ['a malformed apiVersion', variant((s) => { s.appRef = { ...valid.appRef, apiVersion: 'a/b/c' }; }), /spec\.appRef\.apiVersion: must be "version" or "group\/version"/],
    ['an invalid app name', variant((s) => { s.appRef = { ...valid.appRef, name: 'Pod_Info' }; }), /spec\.appRef\.name: must be an object name/],
    ['no environments', variant((s) => { s.environments = []; }), /spec\.environments: must have 1 to 20 items, has 0/],
    ['21 environments', variant((s) => { s.environments = Array.from({ length: 21 }, (_, i) => ({ name: `e${i}`, targets: [{ namespace: `n${i}` }] })); }), /must have 1 to 20 items, has 21/],
    ['duplicate environment names', variant((s) => { s.environments = [{ name: 'dev', targets: [{ namespace: 'a' }] }, { name: 'dev', targets: [{ namespace: 'b' }] }]; }), /spec\.environments\[1\]\.name: "dev" is used by an earlier environment/],
    ['an environment without targets', variant((s) => { s.environments = [{ name: 'dev', targets: [] }]; }), /spec\.environments\[0\]\.targets: must have 1 to 50 items/],
    ['a target namespace that is not a DNS label', variant((s) => { s.environments = [{ name: 'dev', targets: [{ namespace: 'Team A' }] }]; }), /targets\[0\]\.namespace: must be a namespace name/],
    ['an unknown cluster kind', variant((s) => { s.environments = [{ name: 'dev', targets: [{ namespace: 'a', clusterRef: { kind: 'Kubeconfig', name: 'x' } }] }]; }), /clusterRef\.kind: must be "Secret" or "Cluster", got "Kubeconfig"/],
    ['a key on a Cluster reference', variant((s) => { s.environments = [{ name: 'dev', targets: [{ namespace: 'a', clusterRef: { kind: 'Cluster', name: 'x', key: 'value' } }] }]; }), /clusterRef\.key: only a Secret reference has a key/],
    ['the same target in two environments', variant((s) => { s.environments = [{ name: 'dev', targets: [{ namespace: 'team-a' }] }, { name: 'prod', targets: [{ namespace: 'team-a' }] }]; }), /the same target \(local namespace team-a\) is already spec\.environments\[0\]\.targets\[0\]/],
    ['the same Secret named with and without its namespace', variant((s) => {
      s.environments = [
        { name: 'dev', targets: [{ namespace: 'a', clusterRef: { kind: 'Secret', name: 'k' } }] },
        { name: 'prod', targets: [{ namespace: 'a', clusterRef: { kind: 'Secret', name: 'k', namespace: 'team-a' } }] },
      ];
    }), /the same target \(secret:team-a\/k namespace a\)/],
    ['an unknown strategy', variant((s) => { s.promotion = { strategy: 'carrier-pigeon' }; }), /spec\.promotion\.strategy: must be "patch", "webhook" or "git"/],
    ['a patch strategy without its block', variant((s) => { s.promotion = { strategy: 'patch' }; }), /spec\.promotion\.patch: required/],
    ['a patch strategy with a webhook block too', variant((s) => { s.promotion = { ...valid.promotion, webhook: { secretRef: { name: 'h' } } }; }), /spec\.promotion\.webhook: must be unset when strategy is "patch"/],
    ['a webhook strategy with a patch block', variant((s) => { s.promotion = { strategy: 'webhook', webhook: { secretRef: { name: 'h' } }, patch: { path: '/spec/x' } }; }), /spec\.promotion\.patch: must be unset when strategy is "webhook"/],
    ['a patch path that is not a JSON pointer', variant((s) => { s.promotion = { strategy: 'patch', patch: { path: 'spec.chart.spec.version' } }; }), /spec\.promotion\.patch\.path: must be a JSON pointer/],
    ['a patch path with a bad escape', variant((s) => { s.promotion = { strategy: 'patch', patch: { path: '/spec/a~2b' } }; }), /must be a JSON pointer/],
    ['a patch path into status', variant((s) => { s.promotion = { strategy: 'patch', patch: { path: '/status/x' } }; }), /must point into the object's desired state/],
    ['a revisionPath that is not a pointer', variant((s) => { s.revisionPath = 'status.revision'; }), /spec\.revisionPath: must be a JSON pointer/],
    ['a git strategy with a patch block', variant((s) => { s.promotion = { strategy: 'git', git: { url: 'https://example.com/o/r.git' }, patch: { path: '/x' } }; }), /spec\.promotion\.patch: must be unset when strategy is "git"/],
    ['a git URL of another scheme', variant((s) => { s.promotion = { strategy: 'git', git: { url: 'file:///etc/repo' } }; }), /spec\.promotion\.git\.url: must be an https:\/\//],
    ['a git URL that is an option', variant((s) => { s.promotion = { strategy: 'git', git: { url: '--upload-pack=touch /tmp/x' } }; }), /spec\.promotion\.git\.url/],
    ['a git path leaving the repository', variant((s) => { s.promotion = { strategy: 'git', git: { url: 'https://example.com/o/r.git', path: 'a/../../b' } }; }), /spec\.promotion\.git\.path: must be a relative path/],
    ['a git branch that is an option', variant((s) => { s.promotion = { strategy: 'git', git: { url: 'https://example.com/o/r.git', branch: '-f' } }; }), /spec\.promotion\.git\.branch/],
    ['an unknown pull-request provider', variant((s) => { s.promotion = { strategy: 'git', git: { url: 'https://example.com/o/r.git', pullRequest: { provider: 'bitbucket' } } }; }), /pullRequest\.provider: must be "github" or "gitlab"/],
    ['a requireApproval that is not a boolean', variant((s) => { (s.environments as Record<string, unknown>[])[1] = { ...(s.environments as Record<string, unknown>[])[1], requireApproval: 'yes' }; }), /spec\.environments\[1\]\.requireApproval: must be true or false/],
    ['a webhook Secret key with a slash', variant((s) => { s.promotion = { strategy: 'webhook', webhook: { secretRef: { name: 'h', key: 'a/b' } } }; }), /secretRef\.key: must be a Secret data key/],
  ];
  for (const [what, spec, expected] of refused) {
    it(`refuses ${what}, naming the field`, () => {
      assert.match(problemsOf(validatePipelineSpec(spec, 'team-a')), expected);
    });
  }

  it('accepts the git strategy with its defaults, and requireApproval', () => {
    const result = validatePipelineSpec(variant((s) => {
      s.promotion = { strategy: 'git', git: { url: 'https://github.com/org/fleet.git', secretRef: { name: 'fleet-git' }, pullRequest: { provider: 'github' } } };
      (s.environments as Record<string, unknown>[])[2] = { ...(s.environments as Record<string, unknown>[])[2], requireApproval: true };
    }), 'team-a');
    assert.ok(result.valid);
    assert.deepEqual(result.spec.promotion, { strategy: 'git', url: 'https://github.com/org/fleet.git', branch: 'main', path: '.', secretName: 'fleet-git', pullRequest: { provider: 'github', apiUrl: undefined } });
    assert.deepEqual(result.spec.environments.map((e) => e.requireApproval), [false, false, true]);
  });

  it('takes an environment\'s imagePolicy (the ImagePolicy whose $imagepolicy setters it writes) with the git strategy only, never with waves', () => {
    const git = { strategy: 'git', git: { url: 'https://github.com/org/fleet.git' } };
    const result = validatePipelineSpec(variant((s) => {
      s.promotion = git;
      (s.environments as Record<string, unknown>[])[2] = { ...(s.environments as Record<string, unknown>[])[2], imagePolicy: 'podinfo-stable' };
    }), 'team-a');
    assert.ok(result.valid);
    assert.deepEqual(result.spec.environments.map((e) => e.imagePolicy), [undefined, undefined, 'podinfo-stable']);
    const withPatch = variant((s) => { (s.environments as Record<string, unknown>[])[2] = { ...(s.environments as Record<string, unknown>[])[2], imagePolicy: 'podinfo-stable' }; });
    assert.match(problemsOf(validatePipelineSpec(withPatch, 'team-a')), /spec\.environments\[2\]\.imagePolicy: \$imagepolicy setters are written by the git strategy only/);
    const badName = variant((s) => { s.promotion = git; (s.environments as Record<string, unknown>[])[2] = { ...(s.environments as Record<string, unknown>[])[2], imagePolicy: 'ns:Policy' }; });
    assert.match(problemsOf(validatePipelineSpec(badName, 'team-a')), /spec\.environments\[2\]\.imagePolicy: must be an ImagePolicy name/);
    const waves = variant((s) => {
      s.promotion = git;
      (s.environments as Record<string, unknown>[])[2] = { name: 'prod', imagePolicy: 'podinfo-stable', fleet: { namespace: 'podinfo', clusters: [{ kind: 'Secret', name: 'p1' }], waves: [{ name: 'canary', count: 1 }, { name: 'rest', count: 1 }] } };
    });
    assert.match(problemsOf(validatePipelineSpec(waves, 'team-a')), /spec\.environments\[2\]\.imagePolicy: must be unset with fleet\.waves/);
  });

  describe('tenancy', () => {
    const elsewhere = variant((s) => { s.environments = [{ name: 'dev', targets: [{ namespace: 'team-a' }] }, { name: 'prod', targets: [{ namespace: 'flux-system' }] }]; });

    it('confines management-cluster targets to the Pipeline\'s namespace, naming the flag that widens it', () => {
      assert.equal(problemsOf(validatePipelineSpec(elsewhere, 'team-a')),
        'spec.environments[1].targets[0].namespace: a target on the management cluster (no clusterRef) must be in the Pipeline\'s own namespace "team-a", got "flux-system" (the service runs without --allow-cross-namespace-targets)');
      assert.equal(validatePipelineSpec(elsewhere, 'team-a', { allowCrossNamespaceTargets: false }).valid, false);
    });

    it('allows management-cluster targets elsewhere only when the service opts out', () => {
      const result = validatePipelineSpec(elsewhere, 'team-a', { allowCrossNamespaceTargets: true });
      assert.ok(result.valid);
      assert.deepEqual(result.spec.environments.map((e) => e.targets[0]?.namespace), ['team-a', 'flux-system']);
    });

    it('leaves targets on other clusters in any namespace: their credentials bound them', () => {
      assert.equal(validatePipelineSpec(valid, 'team-a').valid, true, 'valid has remote targets in "podinfo"');
    });

    for (const apiVersion of ['v1', 'v2']) {
      for (const kind of ['Secret', 'secret', 'SECRET']) {
        for (const allowCrossNamespaceTargets of [false, true]) {
          it(`never accepts the core kind ${apiVersion} ${kind} (allowCrossNamespaceTargets ${allowCrossNamespaceTargets})`, () => {
            const spec = variant((s) => {
              s.appRef = { apiVersion, kind, name: 'flux-system' };
              s.revisionPath = '/data/identity';
              s.environments = [{ name: 'dev', targets: [{ namespace: 'team-a' }] }];
            });
            assert.match(problemsOf(validatePipelineSpec(spec, 'team-a', { allowCrossNamespaceTargets })), new RegExp(`^spec\\.appRef: a core ${apiVersion} Secret is never an app or target kind$`));
          });
        }
      }
    }

    it('accepts a kind named Secret in another API group', () => {
      const spec = variant((s) => { s.appRef = { apiVersion: 'example.com/v1', kind: 'Secret', name: 'x' }; });
      assert.equal(validatePipelineSpec(spec, 'team-a', { appKinds: AppKinds.parse(['*']) }).valid, true);
    });

    it('reads spec.serviceAccountName and refuses one that is not an object name', () => {
      const named = validatePipelineSpec(variant((s) => { s.serviceAccountName = 'deployer'; }), 'team-a');
      assert.ok(named.valid);
      assert.equal(named.spec.serviceAccountName, 'deployer');
      const unset = validatePipelineSpec(valid, 'team-a');
      assert.ok(unset.valid);
      assert.equal(unset.spec.serviceAccountName, undefined);
      for (const bad of ['', 'Deployer', 'system:serviceaccount:x:y', 7]) {
        assert.match(problemsOf(validatePipelineSpec(variant((s) => { s.serviceAccountName = bad; }), 'team-a')), /^spec\.serviceAccountName: /);
      }
    });
  });

  it('refuses a Flux Kustomization promoted through git or patch without revisionPath: its default revision is the commit', () => {
    const git = { strategy: 'git', git: { url: 'https://git.example/fleet.git' } };
    for (const promotion of [git, valid.promotion]) {
      const spec = variant((s) => {
        s.appRef = { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'podinfo' };
        s.promotion = promotion;
      });
      assert.match(problemsOf(validatePipelineSpec(spec, 'team-a')), /spec\.revisionPath: required for a Flux Kustomization .*\/spec\/postBuild\/substitute\/version/);
      const fixed = variant((s) => {
        s.appRef = { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'podinfo' };
        s.promotion = promotion;
        s.revisionPath = '/spec/postBuild/substitute/version';
      });
      assert.ok(validatePipelineSpec(fixed, 'team-a').valid);
    }
    const webhook = variant((s) => {
      s.appRef = { apiVersion: 'kustomize.toolkit.fluxcd.io/v1', kind: 'Kustomization', name: 'podinfo' };
      s.promotion = { strategy: 'webhook', webhook: { secretRef: { name: 'hook' } } };
    });
    assert.ok(validatePipelineSpec(webhook, 'team-a').valid, 'a webhook writes nothing itself');
  });

  it('reports every problem at once, not only the first', () => {
    const problems = problemsOf(validatePipelineSpec({ appRef: { apiVersion: '', kind: '', name: '' }, environments: 'dev', promotion: {} }, 'team-a'));
    for (const field of ['spec.appRef.apiVersion', 'spec.appRef.kind', 'spec.appRef.name', 'spec.environments', 'spec.promotion.strategy']) {
      assert.ok(problems.includes(`${field}:`), `${field} missing from:\n${problems}`);
    }
  });
});

describe('app kinds (--app-kinds)', () => {
  // A revisionPath as well: a Kustomization without one is refused for another reason (a commit
  // reference would be promoted), which this list must not hide.
  const withApp = (apiVersion: string, kind: string): unknown => variant((s) => { s.appRef = { apiVersion, kind, name: 'app' }; s.revisionPath = '/spec/version'; });

  it('accepts by default the Flux, Argo CD and apps kinds a promotion moves', () => {
    for (const [apiVersion, kind] of [
      ['helm.toolkit.fluxcd.io/v2', 'HelmRelease'], ['kustomize.toolkit.fluxcd.io/v1', 'Kustomization'],
      ['source.toolkit.fluxcd.io/v1', 'GitRepository'], ['source.toolkit.fluxcd.io/v1beta2', 'OCIRepository'],
      ['argoproj.io/v1alpha1', 'Application'], ['apps/v1', 'Deployment'], ['apps/v1', 'StatefulSet'], ['apps/v1', 'DaemonSet'],
    ] as const) {
      assert.equal(validatePipelineSpec(withApp(apiVersion, kind), 'team-a').valid, true, `${apiVersion} ${kind}`);
    }
  });

  it('refuses by default any other kind, naming it in the problem', () => {
    for (const [apiVersion, kind, named] of [
      ['rbac.authorization.k8s.io/v1', 'ClusterRoleBinding', 'ClusterRoleBinding.rbac.authorization.k8s.io'],
      ['admissionregistration.k8s.io/v1', 'ValidatingWebhookConfiguration', 'ValidatingWebhookConfiguration.admissionregistration.k8s.io'],
      ['v1', 'ConfigMap', 'ConfigMap'],
      ['v1', 'ServiceAccount', 'ServiceAccount'],
      ['apps/v1', 'deployment', 'deployment.apps'],
      ['helm.toolkit.fluxcd.io.evil.example/v2', 'HelmRelease', 'HelmRelease.helm.toolkit.fluxcd.io.evil.example'],
    ] as const) {
      const problems = problemsOf(validatePipelineSpec(withApp(apiVersion, kind), 'team-a'));
      assert.ok(problems.startsWith(`spec.appRef: kind ${named} is not one this service promotes (allowed: HelmRelease.helm.toolkit.fluxcd.io, `), problems);
      assert.ok(problems.endsWith('; the platform team sets them with --app-kinds)'), problems);
    }
  });

  it('follows the platform team\'s list: exact kinds, every kind of a group, core kinds, anything', () => {
    const policy = { appKinds: AppKinds.parse(['ConfigMap', '*.example.com', 'Widget.other.io']) };
    assert.equal(validatePipelineSpec(withApp('v1', 'ConfigMap'), 'team-a', policy).valid, true);
    assert.equal(validatePipelineSpec(withApp('example.com/v1', 'Anything'), 'team-a', policy).valid, true);
    assert.equal(validatePipelineSpec(withApp('other.io/v3', 'Widget'), 'team-a', policy).valid, true);
    assert.match(problemsOf(validatePipelineSpec(withApp('helm.toolkit.fluxcd.io/v2', 'HelmRelease'), 'team-a', policy)), /kind HelmRelease\.helm\.toolkit\.fluxcd\.io is not one this service promotes \(allowed: ConfigMap, \*\.example\.com, Widget\.other\.io;/);
    assert.match(problemsOf(validatePipelineSpec(withApp('sub.example.com/v1', 'Thing'), 'team-a', policy)), /kind Thing\.sub\.example\.com is not/, 'a group pattern does not cover subgroups');
    assert.match(problemsOf(validatePipelineSpec(withApp('other.io/v3', 'Gadget'), 'team-a', policy)), /kind Gadget\.other\.io is not/);
    const anything = { appKinds: AppKinds.parse(['*']) };
    assert.equal(validatePipelineSpec(withApp('rbac.authorization.k8s.io/v1', 'ClusterRoleBinding'), 'team-a', anything).valid, true);
    assert.match(problemsOf(validatePipelineSpec(withApp('v1', 'Secret'), 'team-a', anything)), /a core v1 Secret is never an app or target kind/, '* does not let core Secrets in');
  });

  it('lists at most 12 allowed kinds in the problem, counting the rest', () => {
    const many = AppKinds.parse(Array.from({ length: 20 }, (_, i) => `Kind${i}.example.com`));
    const problems = problemsOf(validatePipelineSpec(withApp('v1', 'ConfigMap'), 'team-a', { appKinds: many }));
    assert.match(problems, /Kind11\.example\.com and 8 more; the platform team/);
    assert.ok(!problems.includes('Kind12.example.com'));
  });

  it('refuses malformed patterns with a TypeError naming the option', () => {
    for (const bad of ['', 'apps/Deployment', 'Deployment.', '.apps', 'Deploy-ment.apps', 'HelmRelease.Helm.io', '**', 'Kind.*']) {
      assert.throws(() => AppKinds.parse([bad], 'appKinds'), (err: unknown) => err instanceof TypeError && err.message.startsWith('appKinds: '), bad);
    }
    assert.throws(() => AppKinds.parse([]), /appKinds must list at least one kind pattern/);
  });
});
