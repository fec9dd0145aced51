import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PassThrough } from 'node:stream';
import { flagHead, flagTable, parseBindAddress, parseDuration, parseFlags, usage, UsageError, type Config } from './flags.ts';
import { fenceLeaseName, peerLeaseName } from '../lib/manager/index.ts';
import { DEFAULT_APP_KINDS } from '../lib/pipeline/index.ts';
import { isDnsLabel } from '../lib/util/index.ts';
import { main } from './main.ts';

function run(argv: readonly string[]): Config {
  const parsed = parseFlags(argv);
  assert.equal(parsed.kind, 'run');
  return parsed.config;
}

/** The help text's flag entries, continuation lines joined: `--name value` → text. */
function helpEntries(): Map<string, string> {
  const entries = new Map<string, string>();
  let current: string | undefined;
  for (const line of usage().split('\n')) {
    const head = /^ {2}((?:-[a-z], )?--[a-z-]+(?: [a-z]+)?)\s+(.*)$/.exec(line);
    if (head?.[1] !== undefined && head[2] !== undefined) {
      current = head[1];
      entries.set(current, head[2]);
    } else if (current !== undefined && /^ {10,}\S/.test(line)) {
      entries.set(current, `${entries.get(current) ?? ''} ${line.trim()}`);
    } else {
      current = undefined;
    }
  }
  return entries;
}

describe('--help', () => {
  it('lists exactly the flags the parser accepts, each with its description and default', () => {
    const entries = helpEntries();
    assert.deepEqual(
      [...entries.keys()],
      flagTable.map(flagHead),
    );
    assert.ok(entries.has('-h, --help'));
    for (const flag of flagTable) {
      const text = entries.get(flagHead(flag)) ?? '';
      assert.ok(text.startsWith(flag.description), `--${flag.name}: ${text}`);
      if (flag.default !== undefined) assert.match(text, new RegExp(`\\(default "?${flag.default}"?\\)$`), flag.name);
      // The parser knows every flag of the table.
      const sample = flag.type === 'boolean' ? [`--${flag.name}`] : [`--${flag.name}`, flag.name === 'log-level' ? 'debug' : flag.name === 'log-format' ? 'console' : flag.name.endsWith('address') ? ':9000' : flag.name === 'concurrency' || flag.name === 'memory-budget' ? '2' : flag.name === 'cache-objects' ? 'lazy' : flag.value === 'duration' || flag.name.startsWith('kube-api-') || flag.name.startsWith('shard-') ? (flag.default ?? '') : 'x'];
      // The shard settings go with --shard.
      if (flag.name.startsWith('shard-')) sample.unshift('--shard');
      assert.doesNotThrow(() => parseFlags(sample), flag.name);
    }
  });

  it('documents the defaults the parser applies', () => {
    const config = run([]);
    const documented = (name: string): string | undefined => flagTable.find((f) => f.name === name)?.default;
    assert.deepEqual(config.metricsBindAddress, parseBindAddress('x', documented('metrics-bind-address') ?? ''));
    assert.deepEqual(config.healthProbeBindAddress, parseBindAddress('x', documented('health-probe-bind-address') ?? ''));
    assert.equal(String(config.concurrency), documented('concurrency'));
    assert.equal(config.logLevel, documented('log-level'));
    assert.equal(config.logFormat, documented('log-format'));
    assert.equal(config.leaderElectionId, documented('leader-election-id'));
    assert.equal(String(config.leaderElect), documented('leader-elect'));
    assert.equal(String(config.kubeApiQps), documented('kube-api-qps'));
    assert.equal(String(config.kubeApiBurst), documented('kube-api-burst'));
    assert.deepEqual([config.kubeApiQps, config.kubeApiBurst], [20, 30], 'controller-runtime\'s client defaults');
    assert.equal(config.kubeApiRequestTimeoutMs, parseDuration('kube-api-request-timeout', documented('kube-api-request-timeout') ?? ''));
    assert.deepEqual(config.appKinds, DEFAULT_APP_KINDS);
    assert.ok(flagTable.find((f) => f.name === 'app-kinds')?.description.endsWith(`When unset: ${DEFAULT_APP_KINDS.join(', ')}.`), '--help lists the default kinds');
    assert.equal(config.kubeApiRequestTimeoutMs, 60_000, 'the connection\'s own default');
    assert.equal(config.kubeconfig, undefined);
    assert.equal(config.leaderElectionNamespace, undefined);
    assert.deepEqual(
      [config.leaseDurationMs, config.renewDeadlineMs, config.retryPeriodMs, config.cacheGcGracePeriodMs],
      ['leader-elect-lease-duration', 'leader-elect-renew-deadline', 'leader-elect-retry-period', 'cache-gc-grace-period'].map((name) => parseDuration(name, documented(name) ?? '')),
    );
    assert.deepEqual([config.leaseDurationMs, config.renewDeadlineMs, config.retryPeriodMs], [30_000, 10_000, 2_000], 'client-go\'s leader election timings');
    for (const name of ['allow-exec-kubeconfigs', 'allow-auth-provider-kubeconfigs', 'allow-file-kubeconfigs', 'allow-cross-namespace-secrets', 'insecure-kubeconfig-tls', 'allow-private-webhooks', 'allow-private-git-hosts', 'allow-insecure-git-http', 'allow-cross-namespace-targets', 'allow-fleet-selectors-as-service']) {
      assert.equal(documented(name), 'false');
    }
    assert.equal(config.allowPrivateWebhooks, false);
    assert.equal(documented('metrics-secure'), 'true');
    assert.equal(config.metricsSecure, true, 'metrics are authenticated unless asked otherwise');
    assert.equal(config.metricsCert, undefined);
    assert.deepEqual(
      [config.allowExecKubeconfigs, config.allowAuthProviderKubeconfigs, config.allowFileKubeconfigs, config.allowCrossNamespaceSecrets, config.insecureKubeconfigTls, config.allowPrivateGitHosts, config.allowInsecureGitHttp, config.allowCrossNamespaceTargets, config.allowFleetSelectorsAsService],
      [false, false, false, false, false, false, false, false, false],
    );
    assert.equal(config.defaultServiceAccount, undefined, 'no impersonation unless asked for');
    assert.equal(String(config.shard), documented('shard'));
    assert.equal(config.shard, false, 'one active replica (or leader election) unless sharding is asked for');
    assert.equal(config.shardBy, documented('shard-by'));
    assert.equal(String(config.shardWeight), documented('shard-weight'));
    assert.equal(config.shardGroup, documented('shard-group'));
    assert.deepEqual([config.shardBy, config.shardWeight, config.shardGroup], ['pipeline', 1, 'fleetcache-shard'], 'the design\'s defaults');
  });

  it('keeps every line within 100 columns', () => {
    for (const line of usage().split('\n')) assert.ok(line.length <= 100, line);
  });
});

describe('parseFlags', () => {
  it('reads every flag', () => {
    const config = run([
      '--kubeconfig', '/k', '--metrics-bind-address', '127.0.0.1:9090', '--health-probe-bind-address=[::1]:9091',
      '--leader-elect', '--leader-election-id', 'my-lease', '--leader-election-namespace', 'ops', '--concurrency', '8',
      '--log-level', 'debug', '--log-format=console', '--allow-exec-kubeconfigs', '--allow-auth-provider-kubeconfigs=true',
      '--allow-file-kubeconfigs', '--allow-cross-namespace-secrets', '--insecure-kubeconfig-tls', '--allow-private-git-hosts', '--allow-insecure-git-http', '--allow-cross-namespace-targets', '--default-service-account', 'pipeline-runner', '--allow-fleet-selectors-as-service',
      '--leader-elect-lease-duration=1m30s', '--leader-elect-renew-deadline', '20s', '--leader-elect-retry-period=500ms',
      '--cache-gc-grace-period', '2m', '--allow-private-webhooks', '--metrics-cert-path', '/certs', '--metrics-cert-key=key.pem',
      '--kube-api-qps=7.5', '--kube-api-burst', '12', '--kube-api-request-timeout=5s', '--app-kinds', 'HelmRelease.helm.toolkit.fluxcd.io, *.apps,ConfigMap',
      '--cache-objects', 'compressed', '--cache-compress-after=90s',
    ]);
    assert.deepEqual(config, {
      kubeconfig: '/k',
      metricsBindAddress: { host: '127.0.0.1', port: 9090 },
      metricsSecure: true,
      metricsCert: { dir: '/certs', certName: 'tls.crt', keyName: 'key.pem' },
      healthProbeBindAddress: { host: '::1', port: 9091 },
      leaderElect: true,
      leaderElectionId: 'my-lease',
      leaderElectionNamespace: 'ops',
      concurrency: 8,
      logLevel: 'debug',
      logFormat: 'console',
      allowExecKubeconfigs: true,
      allowAuthProviderKubeconfigs: true,
      allowFileKubeconfigs: true,
      allowCrossNamespaceSecrets: true,
      insecureKubeconfigTls: true,
      allowPrivateWebhooks: true,
      allowPrivateGitHosts: true,
      allowInsecureGitHttp: true,
      allowCrossNamespaceTargets: true,
      allowFleetSelectorsAsService: true,
      appKinds: ['HelmRelease.helm.toolkit.fluxcd.io', '*.apps', 'ConfigMap'],
      defaultServiceAccount: 'pipeline-runner',
      shard: false,
      shardBy: 'pipeline',
      shardWeight: 1,
      shardGroup: 'fleetcache-shard',
      shardTakeRate: 20,
      shardRecoveryTakeRate: 100,
      leaseDurationMs: 90_000,
      renewDeadlineMs: 20_000,
      retryPeriodMs: 500,
      cacheGcGracePeriodMs: 120_000,
      cacheObjects: 'compressed',
      cacheCompressAfterMs: 90_000,
      kubeApiQps: 7.5,
      kubeApiBurst: 12,
      kubeApiRequestTimeoutMs: 5_000,
    });
  });

  it('reads the shard flags, with the leader election timings and namespace for the shard Leases', () => {
    const config = run(['--shard', '--shard-by=pipeline', '--shard-weight', '3', '--shard-group=payments-a', '--leader-election-namespace=ops', '--leader-elect-lease-duration=20s', '--leader-elect-renew-deadline=8s', '--leader-elect-retry-period=1s']);
    assert.deepEqual(
      [config.shard, config.shardBy, config.shardWeight, config.shardGroup, config.leaderElect, config.leaderElectionNamespace, config.leaseDurationMs, config.renewDeadlineMs, config.retryPeriodMs],
      [true, 'pipeline', 3, 'payments-a', false, 'ops', 20_000, 8_000, 1_000],
    );
    assert.equal(run(['--shard', '--leader-elect=false']).shard, true, 'an explicit --leader-elect=false goes with --shard');
    assert.equal(run(['--shard', '--shard-by', 'namespace']).shardBy, 'namespace');
    const rates = run(['--shard', '--shard-take-rate=5', '--shard-recovery-take-rate', '250.5']);
    assert.deepEqual([rates.shardTakeRate, rates.shardRecoveryTakeRate], [5, 250.5]);
    for (const bad of ['0', '-1', 'fast', '1e3']) {
      assert.throws(() => parseFlags(['--shard', `--shard-recovery-take-rate=${bad}`]), { name: 'UsageError', message: /--shard-recovery-take-rate must be a positive number/ });
    }
    assert.throws(() => parseFlags(['--shard-take-rate=5']), { name: 'UsageError', message: /--shard-take-rate needs --shard/ });
  });

  it('takes a --shard-group of up to 40 characters, as the Sharder does, so that its Lease names stay DNS labels', () => {
    const group = `g${'0'.repeat(39)}`;
    assert.equal(run(['--shard', `--shard-group=${group}`]).shardGroup, group);
    for (const name of [peerLeaseName(group, 'replica-a'), fenceLeaseName(group, 'ns/pipeline')]) assert.ok(isDnsLabel(name), name);
    assert.throws(() => parseFlags(['--shard', `--shard-group=${group}0`]), UsageError);
  });

  it('takes --cache-objects (parsed by default) and --cache-compress-after (60s, at least 100ms)', () => {
    assert.equal(run([]).cacheObjects, 'parsed');
    assert.equal(run([]).cacheCompressAfterMs, 60_000);
    assert.equal(run(['--cache-objects=compressed', '--cache-compress-after=5m']).cacheObjects, 'compressed');
    assert.equal(run(['--cache-objects=compressed', '--cache-compress-after=5m']).cacheCompressAfterMs, 300_000);
    assert.equal(run(['--cache-objects=lazy']).cacheObjects, 'lazy');
    assert.throws(() => parseFlags(['--cache-objects=zipped']), { name: 'UsageError', message: /^--cache-objects must be parsed, lazy or compressed, got "zipped"/ });
    assert.throws(() => parseFlags(['--cache-compress-after=50ms']), { name: 'UsageError', message: /^--cache-compress-after must be at least 100ms/ });
  });

  it('takes --memory-budget in MiB, unset by default', () => {
    assert.equal(run([]).memoryBudgetBytes, undefined);
    assert.equal(run(['--memory-budget=768']).memoryBudgetBytes, 768 * 2 ** 20);
    for (const bad of ['0', '-5', '1.5', '512Mi', 'lots']) assert.throws(() => parseFlags([`--memory-budget=${bad}`]), { name: 'UsageError', message: /^--memory-budget must be a positive integer of MiB, got / });
  });

  it('takes Go-style durations, and keeps leader election timings in order', () => {
    assert.equal(parseDuration('f', '1h2m3s4ms'), 3_723_004);
    assert.equal(parseDuration('f', '1.5s'), 1500);
    for (const bad of ['', '30', '5x', '-1s', '0s', 's']) assert.throws(() => parseDuration('f', bad), { name: 'UsageError', message: /--f must be a duration/ });
    assert.throws(() => parseFlags(['--leader-elect-renew-deadline=40s']), { name: 'UsageError', message: /retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration/ });
  });

  it('takes --flag=false for booleans, as Go flags do, and "0" to disable a server', () => {
    const config = run(['--leader-elect=false', '--metrics-bind-address=0', '--health-probe-bind-address', '0', '--metrics-secure=false']);
    assert.equal(config.leaderElect, false);
    assert.equal(config.metricsSecure, false);
    assert.equal(run(['--metrics-secure']).metricsSecure, true);
    assert.equal(config.metricsBindAddress, undefined);
    assert.equal(config.healthProbeBindAddress, undefined);
  });

  it('answers -h, --help and --version before validating anything else', () => {
    assert.deepEqual(parseFlags(['--concurrency', 'lots', '--help']), { kind: 'help' });
    assert.deepEqual(parseFlags(['-h']), { kind: 'help' });
    assert.deepEqual(parseFlags(['--no-such-flag', '-h']), { kind: 'help' });
    assert.deepEqual(parseFlags(['--help=false', '--version']), { kind: 'version' });
    assert.deepEqual(parseFlags(['--version']), { kind: 'version' });
  });

  it('rejects what it cannot run with a UsageError naming the flag', () => {
    const cases: [readonly string[], RegExp][] = [
      [['--no-such-flag'], /^unknown flag --no-such-flag$/],
      [['-x'], /^unknown flag -x$/],
      [['positional'], /^unexpected argument "positional"/],
      [['--', '--help'], /^unexpected argument "--help"/],
      [['--kubeconfig', '--leader-elect'], /^--kubeconfig needs a value \(got the flag --leader-elect; write --kubeconfig=--leader-elect/],
      [['--kube-api-qps', '0'], /^--kube-api-qps must be a positive number, got "0"$/],
      [['--kube-api-qps', 'fast'], /^--kube-api-qps .*"fast"/],
      [['--kube-api-qps', '1e3'], /^--kube-api-qps .*"1e3"/],
      [['--kube-api-burst', '0'], /^--kube-api-burst must be a positive integer, got "0"$/],
      [['--kube-api-burst', '2.5'], /^--kube-api-burst .*"2.5"/],
      [['--kube-api-request-timeout', '0s'], /^--kube-api-request-timeout must be a duration .*"0s"$/],
      [['--kube-api-request-timeout', '60'], /^--kube-api-request-timeout must be a duration .*"60"$/],
      [['--concurrency', '0'], /--concurrency.*"0"/],
      [['--concurrency', '2.5'], /--concurrency/],
      [['--log-level', 'trace'], /--log-level.*"trace"/],
      [['--log-format', 'logfmt'], /--log-format must be one of json, console, got "logfmt"/],
      [['--metrics-bind-address', '8080'], /--metrics-bind-address.*"8080"/],
      [['--health-probe-bind-address', ':70000'], /--health-probe-bind-address/],
      [['--leader-elect=yes'], /--leader-elect.*"yes"/],
      [['--leader-election-id', 'Bad_Name'], /--leader-election-id/],
      [['--leader-election-namespace', 'a.b'], /--leader-election-namespace/],
      [['--kubeconfig'], /^--kubeconfig needs a value$/],
      [['--concurrency='], /^--concurrency must not be empty$/],
      [['--kubeconfig='], /--kubeconfig must not be empty/],
      [['--metrics-secure=false', '--metrics-cert-path=/certs'], /--metrics-cert-path needs --metrics-secure/],
      [['--default-service-account', 'system:serviceaccount:a:b'], /--default-service-account must be a ServiceAccount name/],
      [['--default-service-account='], /--default-service-account must not be empty/],
      [['--app-kinds', 'Deployment/apps'], /^--app-kinds: "Deployment\/apps" is not a kind pattern/],
      [['--app-kinds', 'HelmRelease.Helm.toolkit'], /^--app-kinds: "HelmRelease.Helm.toolkit" is not a kind pattern/],
      [['--app-kinds', ' , '], /^--app-kinds must list at least one kind pattern$/],
      [['--shard', '--leader-elect'], /^--shard and --leader-elect exclude each other/],
      [['--leader-elect=true', '--shard=true'], /^--shard and --leader-elect exclude each other/],
      [['--shard-by=pipeline'], /^--shard-by needs --shard$/],
      [['--shard-weight', '2'], /^--shard-weight needs --shard$/],
      [['--shard-group=g'], /^--shard-group needs --shard$/],
      [['--shard', '--shard-by', 'cluster'], /^--shard-by must be one of namespace, pipeline, got "cluster"$/],
      [['--shard', '--shard-weight', '0'], /^--shard-weight must be a positive integer, got "0"$/],
      [['--shard', '--shard-weight', '1.5'], /^--shard-weight must be a positive integer, got "1.5"$/],
      [['--shard', '--shard-group', 'Shard_A'], /^--shard-group must be a DNS label .*"Shard_A"$/],
      [['--shard', `--shard-group=${'a'.repeat(64)}`], /^--shard-group must be a DNS label/],
      [['--shard', `--shard-group=${'a'.repeat(41)}`], /^--shard-group must be a DNS label .*at most 40\), got "a{41}"$/],
    ];
    for (const [argv, message] of cases) {
      assert.throws(() => parseFlags(argv), (err: unknown) => err instanceof UsageError && message.test(err.message), argv.join(' '));
    }
  });
});

describe('a command line that cannot run', () => {
  async function invoke(argv: readonly string[]): Promise<{ status: number; stdout: string; stderr: string }> {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const chunks = { stdout: [] as Buffer[], stderr: [] as Buffer[] };
    stdout.on('data', (c: Buffer) => chunks.stdout.push(c));
    stderr.on('data', (c: Buffer) => chunks.stderr.push(c));
    const status = await main({ argv, env: {}, stdout, stderr, signal: new AbortController().signal });
    return { status, stdout: Buffer.concat(chunks.stdout).toString(), stderr: Buffer.concat(chunks.stderr).toString() };
  }

  it('exits 2 with two lines on stderr: the flag at fault, and where help is; no usage', async () => {
    for (const [argv, first] of [
      [['--leader-elect', '--concurency', '2'], 'fleetcache: unknown flag --concurency'],
      [['--kube-api-burst=-1'], 'fleetcache: --kube-api-burst must be a positive integer, got "-1"'],
      [['--log-level'], 'fleetcache: --log-level needs a value'],
    ] as const) {
      const result = await invoke(argv);
      assert.deepEqual(result, { status: 2, stdout: '', stderr: `${first}\nsee fleetcache --help\n` }, argv.join(' '));
    }
  });

  it('-h prints the usage on stdout, as --help does', async () => {
    assert.deepEqual(await invoke(['-h']), { status: 0, stdout: usage(), stderr: '' });
    assert.deepEqual(await invoke(['--help']), { status: 0, stdout: usage(), stderr: '' });
  });
});
