import { parseArgs } from 'node:util';
import { isShardGroup, SHARD_GROUP_MAX_LENGTH } from '../lib/manager/index.ts';
import { AppKinds, DEFAULT_APP_KINDS } from '../lib/pipeline/index.ts';
import { isNamespaceName, isObjectName } from '../lib/util/index.ts';

/** Log levels, most severe first (winston's npm levels, cut to the four the service uses). */
export const logLevels = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof logLevels)[number];

function isLogLevel(value: unknown): value is LogLevel {
  return logLevels.some((level) => level === value);
}

/** `--log-format`: zap's production JSON, or its console layout for people. */
export const logFormats = ['json', 'console'] as const;
export type LogFormat = (typeof logFormats)[number];

/** `--shard-by`: what one shard is. */
export const shardKinds = ['namespace', 'pipeline'] as const;
export type ShardBy = (typeof shardKinds)[number];

/** Where an HTTP server listens. `host` '' means every interface. */
export interface BindAddress {
  readonly host: string;
  readonly port: number;
}

/** What the process runs with, after flags and defaults. */
export interface Config {
  /** Path of the management cluster's kubeconfig; undefined: $KUBECONFIG, in-cluster, ~/.kube/config. */
  readonly kubeconfig: string | undefined;
  /** undefined when disabled ("0"). */
  readonly metricsBindAddress: BindAddress | undefined;
  /** HTTPS with TokenReview + SubjectAccessReview on every request; false: plain HTTP, no authentication. */
  readonly metricsSecure: boolean;
  /** The metrics server's certificate files; undefined: a self-signed certificate made at start. */
  readonly metricsCert: { readonly dir: string; readonly certName: string; readonly keyName: string } | undefined;
  /** undefined when disabled ("0"). */
  readonly healthProbeBindAddress: BindAddress | undefined;
  readonly leaderElect: boolean;
  readonly leaderElectionId: string;
  /** undefined: the pod's namespace, else "default" (resolved by main, which may read files). */
  readonly leaderElectionNamespace: string | undefined;
  /** Share the Pipelines among the replicas (Leases in the leader election namespace) instead of electing a leader. */
  readonly shard: boolean;
  /** What a shard is: a Pipeline's namespace, or the Pipeline. */
  readonly shardBy: ShardBy;
  /** This replica's weight in the assignment of shards. */
  readonly shardWeight: number;
  /** The group of replicas sharing the Pipelines: prefix of its Lease names, value of their `fleetcache.io/shard-group` label. */
  readonly shardGroup: string;
  /** Free shard fences (a join, a rolling restart, a cold start) this replica takes per second at most. */
  readonly shardTakeRate: number;
  /** Fences of a replica that died this replica takes per second at most. */
  readonly shardRecoveryTakeRate: number;
  readonly concurrency: number;
  readonly logLevel: LogLevel;
  readonly logFormat: LogFormat;
  readonly allowExecKubeconfigs: boolean;
  readonly allowAuthProviderKubeconfigs: boolean;
  readonly allowFileKubeconfigs: boolean;
  readonly allowCrossNamespaceSecrets: boolean;
  readonly insecureKubeconfigTls: boolean;
  /** Webhooks may reach loopback and private addresses. */
  readonly allowPrivateWebhooks: boolean;
  /** The git strategy may reach repositories (and provider APIs) on private addresses. */
  readonly allowPrivateGitHosts: boolean;
  /** The git strategy may use http:// (tests and demos on loopback only). */
  readonly allowInsecureGitHttp: boolean;
  /** Let management-cluster targets live outside their Pipeline's namespace. */
  readonly allowCrossNamespaceTargets: boolean;
  /** Kind patterns a Pipeline's appRef may name (`Kind.group`, `*.group`, `Kind`, `*`). */
  readonly appKinds: readonly string[];
  /** ServiceAccount (in each Pipeline's namespace) impersonated for Pipelines that name none; undefined: none. */
  readonly defaultServiceAccount: string | undefined;
  /** A fleet's clusterSelector may list/watch Secrets (or Clusters) with the service's own identity. */
  readonly allowFleetSelectorsAsService: boolean;
  /** Leader election timings, in milliseconds. */
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  /** How long a cache must have had no Pipeline using it before it is stopped, in milliseconds. */
  readonly cacheGcGracePeriodMs: number;
  /** Sustained requests per second to each API server (every connection has its own bucket). */
  readonly kubeApiQps: number;
  /** Requests each connection may send at once before `kubeApiQps` applies. */
  readonly kubeApiBurst: number;
  /** Bound on each non-watch request to an API server, body included, in milliseconds. */
  readonly kubeApiRequestTimeoutMs: number;
  /** Resident memory, in bytes, at or above which new caches are refused (`--memory-budget`); unset: no budget. */
  readonly memoryBudgetBytes?: number;
  /** How target caches keep objects (`--cache-objects`). */
  readonly cacheObjects: 'parsed' | 'lazy' | 'compressed';
  /** With compressed objects: how long an object stays text once unchanged, in milliseconds. */
  readonly cacheCompressAfterMs: number;
}

/** What the command line asks for. */
export type Invocation =
  | { readonly kind: 'run'; readonly config: Config }
  | { readonly kind: 'help' }
  | { readonly kind: 'version' };

/**
 * A command line that cannot be run. Its message names the flag (or argument) at fault; the
 * service prints it with a pointer to `--help`, not the whole usage, and exits 2.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** One flag. `--help` is rendered from this table and the parser accepts exactly its flags. */
export interface FlagSpec {
  readonly name: string;
  /** One-letter alias (`-h`); undefined: none. */
  readonly short?: string;
  readonly type: 'string' | 'boolean';
  /** Placeholder for the value in `--help` (string flags). */
  readonly value?: string;
  /** Shown as `(default ...)`; undefined when there is no fixed default. */
  readonly default?: string;
  readonly description: string;
}

/**
 * Every flag the process accepts. Names follow controller-runtime's; the kubeconfig safety
 * switches relax, one each, the rules fleetcache applies to kubeconfigs read from Secrets.
 */
export const flagTable: readonly FlagSpec[] = [
  {
    name: 'kubeconfig', type: 'string', value: 'path',
    description: 'Kubeconfig of the management cluster (where Pipelines, Secrets, Events and the Lease live). When unset: $KUBECONFIG (its first file), else the in-cluster service account, else ~/.kube/config.',
  },
  {
    name: 'metrics-bind-address', type: 'string', value: 'address', default: ':8443',
    description: 'Address of the metrics server (/metrics, /debug/caches), as [host]:port; "0" disables it.',
  },
  {
    name: 'metrics-secure', type: 'boolean', default: 'true',
    description: 'Serve metrics over HTTPS and let in only requests whose bearer token passes a TokenReview and a SubjectAccessReview (get on the path) on the management cluster. --metrics-secure=false serves plain HTTP to anyone.',
  },
  {
    name: 'metrics-cert-path', type: 'string', value: 'dir',
    description: 'Directory holding the metrics server\'s certificate and key. When unset: a self-signed certificate is generated at start.',
  },
  {
    name: 'metrics-cert-name', type: 'string', value: 'file', default: 'tls.crt',
    description: 'Certificate file (PEM) in --metrics-cert-path.',
  },
  {
    name: 'metrics-cert-key', type: 'string', value: 'file', default: 'tls.key',
    description: 'Private key file (PEM) in --metrics-cert-path.',
  },
  {
    name: 'health-probe-bind-address', type: 'string', value: 'address', default: ':8081',
    description: 'Address of the probe server (/healthz, /readyz), as [host]:port; "0" disables it.',
  },
  {
    name: 'leader-elect', type: 'boolean', default: 'false',
    description: 'Run the controller only while holding a coordination.k8s.io/v1 Lease, so that replicas never reconcile at once.',
  },
  {
    name: 'leader-elect-lease-duration', type: 'string', value: 'duration', default: '30s',
    description: 'How long a Lease holds after its last renewal: how long followers wait before taking over from a leader that vanished.',
  },
  {
    name: 'leader-elect-renew-deadline', type: 'string', value: 'duration', default: '10s',
    description: 'How long the leader keeps trying to renew before it gives leadership up (and exits). Must be less than the lease duration.',
  },
  {
    name: 'leader-elect-retry-period', type: 'string', value: 'duration', default: '2s',
    description: 'How often candidates try to acquire, and the leader to renew, the Lease. Must be less than the renew deadline.',
  },
  {
    name: 'leader-election-id', type: 'string', value: 'name', default: 'fleetcache-leader',
    description: 'Name of the Lease used for leader election.',
  },
  {
    name: 'leader-election-namespace', type: 'string', value: 'namespace',
    description: 'Namespace of the Lease (with --shard: of every shard Lease). When unset: $POD_NAMESPACE, else the namespace of the in-cluster service account, else "default".',
  },
  {
    name: 'shard', type: 'boolean', default: 'false',
    description: 'Share the Pipelines among every replica running with --shard, instead of electing one leader: each shard (see --shard-by) is reconciled by exactly one live replica, assigned by weighted rendezvous hashing over one peer Lease per replica and held through one fence Lease per shard, all in the --leader-election-namespace, with the --leader-elect-* timings. Excludes --leader-elect.',
  },
  {
    name: 'shard-by', type: 'string', value: 'key', default: 'pipeline',
    description: 'What one shard is, with --shard: pipeline (the measured better balance of memory over replicas; one fence Lease per Pipeline, and a tenant\'s caches built on every replica holding one of its Pipelines) or namespace (all of a namespace\'s Pipelines on one replica, so a tenant\'s caches are built once; one fence Lease per namespace, for tenants whose Pipelines share many targets).',
  },
  {
    name: 'shard-weight', type: 'string', value: 'n', default: '1',
    description: 'This replica\'s share of the shards relative to the other replicas\' (a positive integer), with --shard: weight 2 gets about twice the shards of weight 1.',
  },
  {
    name: 'shard-group', type: 'string', value: 'name', default: 'fleetcache-shard',
    description: 'The group of replicas sharing the Pipelines, with --shard: the prefix of its Leases\' names and the value of their fleetcache.io/shard-group label. Groups ignore each other.',
  },
  {
    name: 'shard-take-rate', type: 'string', value: 'n', default: '20',
    description: 'Free shard fences this replica takes per second at most (burst 50), with --shard: shards new, or handed over by a live replica (a replica joining, a rolling restart, a cold start). Low, so that the first replica up does not take every shard only to hand most on as the others join. A positive number.',
  },
  {
    name: 'shard-recovery-take-rate', type: 'string', value: 'n', default: '100',
    description: 'Fences of a replica that died (seen renewing its peer Lease, then silent for a lease duration) this replica takes per second at most (burst 250), with --shard: nobody acts for those shards until they are taken. The group\'s connection goes at both rates plus 10 requests/s. A positive number.',
  },
  {
    name: 'concurrency', type: 'string', value: 'n', default: '4',
    description: 'Pipelines reconciled at once (an integer from 1 to 1000).',
  },
  {
    name: 'cache-gc-grace-period', type: 'string', value: 'duration', default: '30s',
    description: 'How long a cache (one cluster and kind) must have had no Pipeline using it before it is stopped and its watch closed.',
  },
  {
    name: 'log-level', type: 'string', value: 'level', default: 'info',
    description: 'Least severe level logged: error, warn, info or debug. Logs go to stderr.',
  },
  {
    name: 'log-format', type: 'string', value: 'format', default: 'json',
    description: 'json: one JSON object per line with zap\'s keys (level, ts, logger, msg); console: tab-separated, for people.',
  },
  {
    name: 'allow-exec-kubeconfigs', type: 'boolean', default: 'false',
    description: 'Accept exec credential plugins in kubeconfigs read from Secrets (they run commands in this process\'s container).',
  },
  {
    name: 'allow-auth-provider-kubeconfigs', type: 'boolean', default: 'false',
    description: 'Accept auth-provider entries in kubeconfigs read from Secrets.',
  },
  {
    name: 'allow-file-kubeconfigs', type: 'boolean', default: 'false',
    description: 'Accept references to local files (CA, client certificate and key, token) in kubeconfigs read from Secrets.',
  },
  {
    name: 'allow-cross-namespace-secrets', type: 'boolean', default: 'false',
    description: 'Let a Pipeline use a kubeconfig Secret (or Cluster API Cluster) in a namespace other than its own.',
  },
  {
    name: 'insecure-kubeconfig-tls', type: 'boolean', default: 'false',
    description: 'Accept insecure-skip-tls-verify: true in kubeconfigs read from Secrets (no TLS verification of those clusters).',
  },
  {
    name: 'allow-private-webhooks', type: 'boolean', default: 'false',
    description: 'Let promotion webhooks reach loopback and private addresses (RFC 1918, 100.64.0.0/10, fc00::/7). Link-local (cloud metadata), unspecified, multicast and reserved addresses stay refused.',
  },
  {
    name: 'allow-private-git-hosts', type: 'boolean', default: 'false',
    description: 'Let the git promotion strategy reach repositories and provider APIs on loopback and private addresses (RFC 1918, 100.64.0.0/10, fc00::/7). Link-local, unspecified, multicast and reserved addresses stay refused.',
  },
  {
    name: 'allow-insecure-git-http', type: 'boolean', default: 'false',
    description: 'Let the git promotion strategy use http:// repository and API URLs (no TLS): for tests and demos only.',
  },
  {
    name: 'kube-api-qps', type: 'string', value: 'qps', default: '20',
    description: 'Sustained requests per second to each API server, per connection (client-go\'s QPS; a positive number).',
  },
  {
    name: 'kube-api-burst', type: 'string', value: 'n', default: '30',
    description: 'Requests a connection may send at once before --kube-api-qps applies (client-go\'s Burst; a positive integer).',
  },
  {
    name: 'kube-api-request-timeout', type: 'string', value: 'duration', default: '60s',
    description: 'Bound on each request to an API server other than a watch, body included: an API server that accepts and never answers holds a LIST slot this long at most.',
  },
  {
    name: 'memory-budget', type: 'string', value: 'mib',
    description: 'Refuse new caches (one cluster and kind) while the process\'s resident memory is at or above this many MiB, so that a fleet that outgrows the container fails the Pipelines that would add caches (their targets unreadable, with the reason) instead of getting the process OOM-killed; caches already built carry on. Leave room for them to grow: about 80 % of the container\'s memory limit. When unset: no budget.',
  },
  {
    name: 'cache-objects', type: 'string', value: 'mode', default: 'parsed',
    description: 'How caches keep the objects they watch: parsed (frozen objects: reads cost nothing), lazy (their JSON text, parsed when read: less CPU to sync a fleet) or compressed (lazy, and objects unchanged for --cache-compress-after packed in the background: 13-23 % of their text for real objects, Secrets excepted; a read of one costs an unpack and a parse, 3-14 µs). For fleets whose caches outgrow the container.',
  },
  {
    name: 'cache-compress-after', type: 'string', value: 'duration', default: '60s',
    description: 'With --cache-objects=compressed: how long an object must be unchanged and unread before it is packed (at least 100ms).',
  },
  {
    name: 'allow-cross-namespace-targets', type: 'boolean', default: 'false',
    description: 'Let a Pipeline name targets on the management cluster (no clusterRef) in namespaces other than its own. Off, such a Pipeline is Ready=False InvalidSpec.',
  },
  {
    name: 'app-kinds', type: 'string', value: 'kinds',
    description: `Comma-separated kinds a Pipeline's appRef may name (the object watched and patched in every target), as Kind.group (Deployment.apps), *.group (every kind of a group), Kind (a core kind such as ConfigMap) or * (any kind); the list replaces the default. A Pipeline naming another kind is Ready=False InvalidSpec, the kind named. Core Secrets are refused whatever this says. When unset: ${DEFAULT_APP_KINDS.join(', ')}.`,
  },
  {
    name: 'default-service-account', type: 'string', value: 'name',
    description: 'Make impersonation mandatory: a Pipeline without spec.serviceAccountName acts on the management cluster as this ServiceAccount of its own namespace (as Flux\'s kustomize-controller does). When unset, such a Pipeline acts with the service\'s own identity.',
  },
  {
    name: 'allow-fleet-selectors-as-service', type: 'boolean', default: 'false',
    description: 'Let a fleet environment\'s clusterSelector list and watch kubeconfig Secrets (or Cluster API Clusters) with the service\'s own identity, for Pipelines that act as no ServiceAccount; the service then needs list/watch on Secrets (config/fleet-selectors-as-service), which reaches every namespace\'s credentials. Off, such a fleet is Ready=False TargetNotReadable saying what to grant the Pipeline\'s account; clusters listed by name work either way.',
  },
  { name: 'help', short: 'h', type: 'boolean', description: 'Print this help and exit.' },
  { name: 'version', type: 'boolean', description: 'Print the version and exit.' },
];

const width = 100;

function wrap(text: string, indent: number): string[] {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line !== '' && indent + line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else {
      line = line === '' ? word : `${line} ${word}`;
    }
  }
  if (line !== '') lines.push(line);
  return lines;
}

/** The text `--help` prints: generated from {@link flagTable}, so the two cannot drift. */
/** `-h, --help`, `--kubeconfig path`: a flag as `--help` lists it. */
export function flagHead(flag: FlagSpec): string {
  return `${flag.short === undefined ? '' : `-${flag.short}, `}--${flag.name}${flag.value === undefined ? '' : ` ${flag.value}`}`;
}

export function usage(): string {
  const column = 2 + Math.max(...flagTable.map((f) => flagHead(f).length)) + 2;
  const out = [
    'Usage: fleetcache [flags]',
    '',
    'Runs the fleetcache Pipeline controller: it watches Pipelines (fleetcache.dev/v1alpha1) in the',
    'management cluster, reads their targets from watched caches in every cluster they name, and',
    'promotes ready revisions from one environment to the next.',
    '',
    'Flags:',
  ];
  for (const flag of flagTable) {
    const head = `  ${flagHead(flag)}`;
    const text = flag.default === undefined ? flag.description : `${flag.description} (default ${flag.type === 'boolean' || /^\d+$/.test(flag.default) ? flag.default : JSON.stringify(flag.default)})`;
    const [first = '', ...rest] = wrap(text, column);
    out.push(`${head.padEnd(column)}${first}`, ...rest.map((l) => `${' '.repeat(column)}${l}`));
  }
  out.push(
    '',
    'Boolean flags also take an explicit value: --leader-elect=true, --leader-elect=false.',
    'SIGTERM or SIGINT stops taking work, lets reconciles in flight finish, releases the Lease (with',
    '--shard: the fences, then the peer Lease) and exits 0; a second signal exits at once with status 1.',
    '',
  );
  return out.join('\n');
}

/** Parses `[host]:port`, `[ipv6]:port`, or "0" (disabled → undefined). */
export function parseBindAddress(flag: string, value: string): BindAddress | undefined {
  if (value === '0') return undefined;
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value);
  const port = match?.[3] === undefined ? Number.NaN : Number(match[3]);
  if (match === null || !Number.isInteger(port) || port > 65535) {
    throw new UsageError(`--${flag} must be [host]:port or "0", got ${JSON.stringify(value)}`);
  }
  return { host: match[1] ?? match[2] ?? '', port };
}

const booleanFlags = new Set(flagTable.filter((f) => f.type === 'boolean').map((f) => f.name));

const durationUnits: Readonly<Record<string, number>> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A duration as Go writes it (`500ms`, `30s`, `1m30s`), in milliseconds; at least 1 ms. */
export function parseDuration(flag: string, text: string): number {
  const parts = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/.test(text) ? [...text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)] : [];
  const ms = parts.reduce((total, [, amount, unit]) => total + Number(amount) * (durationUnits[unit ?? ''] ?? Number.NaN), 0);
  if (parts.length === 0 || !Number.isFinite(ms) || ms < 1) throw new UsageError(`--${flag} must be a duration such as 500ms, 30s or 1m30s, got ${JSON.stringify(text)}`);
  return Math.round(ms);
}

/**
 * node:util's parser, non-strict so that each error is ours to word: it names the flag and fits
 * on one line (node's own messages run to three sentences). `-h`/`--help` and `--version` anywhere
 * win over any other error, as they do for most CLIs.
 */
function checkedValues(args: readonly string[]): Record<string, string | boolean | undefined> {
  const { values, tokens } = parseArgs({
    args: [...args],
    strict: false,
    allowPositionals: true,
    tokens: true,
    options: Object.fromEntries(flagTable.map((f) => [f.name, f.short === undefined ? { type: f.type } : { type: f.type, short: f.short }])),
  });
  const asked = (name: string): boolean => tokens.some((t) => t.kind === 'option' && t.name === name && t.value === undefined);
  if (asked('help')) return { help: true };
  if (asked('version')) return { version: true };
  for (const token of tokens) {
    if (token.kind === 'positional') throw new UsageError(`unexpected argument ${JSON.stringify(token.value)}: fleetcache takes flags only`);
    if (token.kind !== 'option') continue;
    const spec = flagTable.find((f) => f.name === token.name);
    if (spec === undefined) throw new UsageError(`unknown flag ${token.rawName}`);
    if (spec.type === 'boolean' && token.value !== undefined) throw new UsageError(`${token.rawName} takes true or false, got ${JSON.stringify(token.value)}`);
    if (spec.type === 'string' && (token.value === undefined || (!token.inlineValue && token.value.startsWith('-')))) {
      throw new UsageError(`${token.rawName} needs a value${token.value === undefined ? '' : ` (got the flag ${token.value}; write ${token.rawName}=${token.value} if that is the value)`}`);
    }
  }
  return values;
}

/**
 * Parses the command line (without the node and script arguments).
 * @throws UsageError for an unknown flag, a missing or malformed value, or a positional argument.
 */
export function parseFlags(argv: readonly string[]): Invocation {
  // node:util's parser has no `--flag=false` for booleans; Go's flag package (and so every
  // controller-runtime manifest) has. Rewrite those before parsing.
  const explicitFalse = new Set<string>();
  const args: string[] = [];
  for (const arg of argv) {
    const match = /^--([a-z-]+)=(.*)$/.exec(arg);
    const name = match?.[1];
    if (match === null || name === undefined || !booleanFlags.has(name)) {
      args.push(arg);
      continue;
    }
    if (match[2] === 'true') args.push(`--${name}`);
    else if (match[2] === 'false') explicitFalse.add(name);
    else throw new UsageError(`--${name} takes true or false, got ${JSON.stringify(match[2])}`);
  }
  const values = checkedValues(args);
  const bool = (name: string): boolean => !explicitFalse.has(name) && (values[name] === true || (values[name] === undefined && flagTable.find((f) => f.name === name)?.default === 'true'));
  if (bool('help')) return { kind: 'help' };
  if (bool('version')) return { kind: 'version' };
  const str = (name: string): string | undefined => {
    const value = values[name];
    if (typeof value !== 'string') return flagTable.find((f) => f.name === name)?.default;
    if (value === '') throw new UsageError(`--${name} must not be empty`);
    return value;
  };

  const concurrencyText = str('concurrency') ?? '';
  const concurrency = /^\d+$/.test(concurrencyText) ? Number(concurrencyText) : Number.NaN;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 1000) {
    throw new UsageError(`--concurrency must be an integer from 1 to 1000, got ${JSON.stringify(concurrencyText)}`);
  }
  const logLevel = str('log-level');
  if (!isLogLevel(logLevel)) {
    throw new UsageError(`--log-level must be one of ${logLevels.join(', ')}, got ${JSON.stringify(logLevel)}`);
  }
  const logFormat = logFormats.find((f) => f === str('log-format'));
  if (logFormat === undefined) {
    throw new UsageError(`--log-format must be one of ${logFormats.join(', ')}, got ${JSON.stringify(str('log-format'))}`);
  }
  const leaderElectionId = str('leader-election-id') ?? '';
  const leaderElectionNamespace = str('leader-election-namespace');
  if (!isObjectName(leaderElectionId)) {
    throw new UsageError(`--leader-election-id must be a valid object name, got ${JSON.stringify(leaderElectionId)}`);
  }
  if (leaderElectionNamespace !== undefined && !isNamespaceName(leaderElectionNamespace)) {
    throw new UsageError(`--leader-election-namespace must be a namespace name, got ${JSON.stringify(leaderElectionNamespace)}`);
  }
  const defaultServiceAccount = str('default-service-account');
  if (defaultServiceAccount !== undefined && !isObjectName(defaultServiceAccount)) {
    throw new UsageError(`--default-service-account must be a ServiceAccount name, got ${JSON.stringify(defaultServiceAccount)}`);
  }
  const leaseDurationMs = parseDuration('leader-elect-lease-duration', str('leader-elect-lease-duration') ?? '');
  const renewDeadlineMs = parseDuration('leader-elect-renew-deadline', str('leader-elect-renew-deadline') ?? '');
  const retryPeriodMs = parseDuration('leader-elect-retry-period', str('leader-elect-retry-period') ?? '');
  if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
    throw new UsageError('leader election needs --leader-elect-retry-period < --leader-elect-renew-deadline < --leader-elect-lease-duration');
  }
  const shard = bool('shard');
  if (shard && bool('leader-elect')) throw new UsageError('--shard and --leader-elect exclude each other: with --shard every replica works, each on its own shards');
  for (const name of ['shard-by', 'shard-weight', 'shard-group', 'shard-take-rate', 'shard-recovery-take-rate']) {
    if (values[name] !== undefined && !shard) throw new UsageError(`--${name} needs --shard`);
  }
  const shardBy = shardKinds.find((k) => k === str('shard-by'));
  if (shardBy === undefined) throw new UsageError(`--shard-by must be one of ${shardKinds.join(', ')}, got ${JSON.stringify(str('shard-by'))}`);
  const shardWeightText = str('shard-weight') ?? '';
  const shardWeight = /^\d+$/.test(shardWeightText) ? Number(shardWeightText) : Number.NaN;
  if (!Number.isSafeInteger(shardWeight) || shardWeight < 1) throw new UsageError(`--shard-weight must be a positive integer, got ${JSON.stringify(shardWeightText)}`);
  const shardGroup = str('shard-group') ?? '';
  // A label value and the prefix of Lease names: checked here as the Sharder checks it, so a bad group fails at parse, not at start.
  if (!isShardGroup(shardGroup)) {
    throw new UsageError(`--shard-group must be a DNS label (lowercase letters, digits and '-', at most ${SHARD_GROUP_MAX_LENGTH}), got ${JSON.stringify(shardGroup)}`);
  }
  const rate = (name: string): number => {
    const text = str(name) ?? '';
    const value = /^\d+(?:\.\d+)?$/.test(text) ? Number(text) : Number.NaN;
    if (!(value > 0) || !Number.isFinite(value)) throw new UsageError(`--${name} must be a positive number, got ${JSON.stringify(text)}`);
    return value;
  };
  const shardTakeRate = rate('shard-take-rate');
  const shardRecoveryTakeRate = rate('shard-recovery-take-rate');
  const appKindsText = str('app-kinds');
  const appKinds = appKindsText === undefined ? [...DEFAULT_APP_KINDS] : appKindsText.split(',').map((k) => k.trim()).filter((k) => k !== '');
  try {
    AppKinds.parse(appKinds, '--app-kinds');
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const metricsSecure = bool('metrics-secure');
  const certDir = str('metrics-cert-path');
  const metricsCert = certDir === undefined ? undefined : { dir: certDir, certName: str('metrics-cert-name') ?? '', keyName: str('metrics-cert-key') ?? '' };
  if (metricsCert !== undefined && !metricsSecure) throw new UsageError('--metrics-cert-path needs --metrics-secure (the default)');
  const kubeApiQpsText = str('kube-api-qps') ?? '';
  const kubeApiQps = /^\d+(?:\.\d+)?$/.test(kubeApiQpsText) ? Number(kubeApiQpsText) : Number.NaN;
  if (!(kubeApiQps > 0) || !Number.isFinite(kubeApiQps)) throw new UsageError(`--kube-api-qps must be a positive number, got ${JSON.stringify(kubeApiQpsText)}`);
  const kubeApiBurstText = str('kube-api-burst') ?? '';
  const kubeApiBurst = /^\d+$/.test(kubeApiBurstText) ? Number(kubeApiBurstText) : Number.NaN;
  if (!Number.isSafeInteger(kubeApiBurst) || kubeApiBurst < 1) throw new UsageError(`--kube-api-burst must be a positive integer, got ${JSON.stringify(kubeApiBurstText)}`);
  const memoryBudgetText = str('memory-budget');
  const memoryBudgetMiB = memoryBudgetText === undefined ? undefined : /^\d+$/.test(memoryBudgetText) ? Number(memoryBudgetText) : Number.NaN;
  if (memoryBudgetMiB !== undefined && !(Number.isSafeInteger(memoryBudgetMiB) && memoryBudgetMiB >= 1)) throw new UsageError(`--memory-budget must be a positive integer of MiB, got ${JSON.stringify(memoryBudgetText)}`);
  const cacheObjects = str('cache-objects') ?? '';
  if (cacheObjects !== 'parsed' && cacheObjects !== 'lazy' && cacheObjects !== 'compressed') throw new UsageError(`--cache-objects must be parsed, lazy or compressed, got ${JSON.stringify(cacheObjects)}`);
  const cacheCompressAfterMs = parseDuration('cache-compress-after', str('cache-compress-after') ?? '');
  if (cacheCompressAfterMs < 100) throw new UsageError(`--cache-compress-after must be at least 100ms, got ${JSON.stringify(str('cache-compress-after'))}`);
  return {
    kind: 'run',
    config: {
      cacheObjects,
      cacheCompressAfterMs,
      kubeApiQps,
      kubeApiBurst,
      kubeApiRequestTimeoutMs: parseDuration('kube-api-request-timeout', str('kube-api-request-timeout') ?? ''),
      ...(memoryBudgetMiB === undefined ? {} : { memoryBudgetBytes: memoryBudgetMiB * 2 ** 20 }),
      leaseDurationMs,
      renewDeadlineMs,
      retryPeriodMs,
      cacheGcGracePeriodMs: parseDuration('cache-gc-grace-period', str('cache-gc-grace-period') ?? ''),
      kubeconfig: str('kubeconfig'),
      metricsBindAddress: parseBindAddress('metrics-bind-address', str('metrics-bind-address') ?? ''),
      metricsSecure,
      metricsCert,
      healthProbeBindAddress: parseBindAddress('health-probe-bind-address', str('health-probe-bind-address') ?? ''),
      leaderElect: bool('leader-elect'),
      leaderElectionId,
      leaderElectionNamespace,
      shard,
      shardBy,
      shardWeight,
      shardGroup,
      shardTakeRate,
      shardRecoveryTakeRate,
      concurrency,
      logLevel,
      logFormat,
      allowExecKubeconfigs: bool('allow-exec-kubeconfigs'),
      allowAuthProviderKubeconfigs: bool('allow-auth-provider-kubeconfigs'),
      allowFileKubeconfigs: bool('allow-file-kubeconfigs'),
      allowCrossNamespaceSecrets: bool('allow-cross-namespace-secrets'),
      insecureKubeconfigTls: bool('insecure-kubeconfig-tls'),
      allowPrivateWebhooks: bool('allow-private-webhooks'),
      allowPrivateGitHosts: bool('allow-private-git-hosts'),
      allowInsecureGitHttp: bool('allow-insecure-git-http'),
      allowCrossNamespaceTargets: bool('allow-cross-namespace-targets'),
      appKinds,
      defaultServiceAccount,
      allowFleetSelectorsAsService: bool('allow-fleet-selectors-as-service'),
    },
  };
}
