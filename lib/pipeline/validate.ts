import { clusterKey, type ClusterRef } from '../cluster/index.ts';
import {
  DNS_LABEL_MAX_LENGTH, DNS_SUBDOMAIN_MAX_LENGTH, isDnsLabel, isDnsSubdomain, isKindName, isNamespaceName, isObjectName, isSecretKey, toError,
  type GroupVersionKind,
} from '../util/index.ts';
import { AppKinds, kindName } from './app-kinds.ts';
import { commitStatusProblems, validateCommitStatuses, type ResolvedCommitStatusGate } from './commit-status.ts';
import { ALL, type ResolvedReadiness } from './fleet-policy.ts';
import { fluxSpecProblems } from './flux.ts';
import { isJsonPointer } from './json-pointer.ts';

// Mirrors the CRD schema (crd.ts), so that a Pipeline stored before the schema
// was tightened, or written through a looser API, gets a clear `InvalidSpec` rather than a crash.

/** Bounds shared with the CRD schema (CEL cost estimates need them too). */
export const MAX_ENVIRONMENTS = 20;
export const MAX_TARGETS_PER_ENVIRONMENT = 50;
/** Clusters a fleet environment may list by name (a selector has no bound). */
export const MAX_FLEET_CLUSTERS = 500;
export const MAX_WAVES = 10;
/** A week: longer soaks are a schedule, not a gate. */
export const MAX_SOAK_SECONDS = 604_800;


/** One target, with its cluster reference in the library's terms. */
export interface ResolvedTarget {
  readonly cluster: ClusterRef;
  /** {@link clusterKey} of `cluster` for the Pipeline's namespace: how status names the cluster. */
  readonly clusterKey: string;
  readonly namespace: string;
}

export interface ResolvedEnvironment {
  readonly name: string;
  /**
   * Its targets. For a fleet environment, empty as validated; the controller fills in the members
   * it reads (fleet-members.ts), each reconcile.
   */
  readonly targets: readonly ResolvedTarget[];
  /** Promotions into it wait for an approval annotation naming the revision. */
  readonly requireApproval: boolean;
  /** Promotions into it are done once the commit's statuses pass (git strategy). */
  readonly commitStatuses?: ResolvedCommitStatusGate;
  /** Git strategy: the ImagePolicy name (Pipeline's namespace) whose `$imagepolicy` setters it writes; unset: `<pipeline>-<environment>`. */
  readonly imagePolicy?: string;
  /** Set for a fleet environment. */
  readonly fleet?: ResolvedFleet;
  /** With waves: each member's wave by cluster key (filled in with the members). */
  readonly waveOf?: ReadonlyMap<string, string>;
}

/** A fleet environment, checked. */
export interface ResolvedFleet {
  readonly namespace: string;
  /** Members by labels: the kind of object selected and the selector in the API's string form. */
  readonly selector: { readonly kind: 'Secret' | 'Cluster'; readonly labelSelector: string } | undefined;
  /** Members by name. */
  readonly clusters: readonly ClusterRef[];
  readonly readiness: ResolvedReadiness;
  /** Empty: one promotion into every member at once. */
  readonly waves: readonly ResolvedWave[];
}

export interface ResolvedWave {
  readonly name: string;
  readonly by:
    | { readonly kind: 'selector'; readonly labelSelector: string }
    | { readonly kind: 'count'; readonly count: number }
    | { readonly kind: 'percent'; readonly percent: number };
  readonly readiness: ResolvedReadiness;
  readonly soakSeconds: number;
  readonly requireApproval: boolean;
}

export type ResolvedPromotion =
  | { readonly strategy: 'patch'; readonly path: string }
  | { readonly strategy: 'webhook'; readonly secretName: string; readonly secretKey: string }
  | ResolvedGitPromotion;

/** The git strategy, defaults applied; the URL is checked again (scheme, addresses) when used. */
export interface ResolvedGitPromotion {
  readonly strategy: 'git';
  readonly url: string;
  readonly branch: string;
  readonly path: string;
  readonly secretName: string | undefined;
  readonly pullRequest: { readonly provider: 'github' | 'gitlab'; readonly apiUrl: string | undefined } | undefined;
}

/** Bounds and patterns of the git strategy, shared with the CRD schema. */
export const GIT_URL_PATTERN = '^(https|http|ssh)://[^\\s]+$';
export const GIT_BRANCH_PATTERN = '^[A-Za-z0-9][A-Za-z0-9._/-]*$';
export const GIT_PATH_PATTERN = '^[^\\s]*$';
const gitUrlRe = new RegExp(GIT_URL_PATTERN);
const gitBranchRe = new RegExp(GIT_BRANCH_PATTERN);
const gitPathRe = new RegExp(GIT_PATH_PATTERN);

/** A Pipeline spec that passed validation, normalised (defaults applied). */
export interface ValidPipelineSpec {
  readonly app: { readonly gvk: GroupVersionKind; readonly name: string };
  readonly environments: readonly ResolvedEnvironment[];
  readonly promotion: ResolvedPromotion;
  readonly revisionPath: string | undefined;
  /** `spec.serviceAccountName`: the account the Pipeline acts as on the management cluster, when set. */
  readonly serviceAccountName: string | undefined;
}

/** What the service allows beyond the defaults (each a flag of the service). */
export interface ValidationPolicy {
  /**
   * Let targets on the management cluster (no `clusterRef`) live in namespaces other than the
   * Pipeline's own. Default false: a Pipeline reaches the management cluster only in its own
   * namespace (`--allow-cross-namespace-targets`).
   */
  readonly allowCrossNamespaceTargets?: boolean;
  /**
   * The kinds `spec.appRef` may name (the kind watched and patched in every target).
   * Default {@link AppKinds.defaults} (`--app-kinds`).
   */
  readonly appKinds?: AppKinds;
}

export type SpecValidation =
  | { readonly valid: true; readonly spec: ValidPipelineSpec }
  | { readonly valid: false; readonly problems: readonly string[] };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Collects problems by field path instead of stopping at the first one. */
class Problems {
  readonly list: string[] = [];

  add(path: string, message: string): void {
    this.list.push(`${path}: ${message}`);
  }

  /** A string `valid` takes (a pattern or a rule of lib/util's names) and at most `max` long, or undefined (with a problem recorded). */
  string(value: unknown, path: string, valid: RegExp | ((value: string) => boolean), max: number, what: string): string | undefined {
    if (typeof value !== 'string' || value === '') {
      this.add(path, 'required, a non-empty string');
      return undefined;
    }
    if (value.length > max || !(typeof valid === 'function' ? valid(value) : valid.test(value))) {
      this.add(path, `must be ${what} (at most ${max} characters), got ${JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}…` : value)}`);
      return undefined;
    }
    return value;
  }

  record(value: unknown, path: string): Record<string, unknown> | undefined {
    if (isRecord(value)) return value;
    this.add(path, value === undefined ? 'required' : 'must be an object');
    return undefined;
  }

  array(value: unknown, path: string, min: number, max: number): unknown[] | undefined {
    if (!Array.isArray(value)) {
      this.add(path, value === undefined ? 'required' : 'must be a list');
      return undefined;
    }
    if (value.length < min || value.length > max) {
      this.add(path, `must have ${min} to ${max} items, has ${value.length}`);
      return undefined;
    }
    return value as unknown[];
  }
}

function validateApiVersion(value: unknown, problems: Problems): string | undefined {
  if (typeof value !== 'string' || value === '') {
    problems.add('spec.appRef.apiVersion', 'required, a non-empty string');
    return undefined;
  }
  const parts = value.split('/');
  const version = parts.at(-1) ?? '';
  const group = parts.length === 2 ? parts[0] ?? '' : '';
  if (parts.length > 2 || !isDnsLabel(version) || (parts.length === 2 && !isDnsSubdomain(group))) {
    problems.add('spec.appRef.apiVersion', `must be "version" or "group/version", got ${JSON.stringify(value)}`);
    return undefined;
  }
  return value;
}

function validateClusterRef(value: unknown, path: string, problems: Problems): ClusterRef | undefined {
  if (value === undefined) return { kind: 'local' };
  const ref = problems.record(value, path);
  if (ref === undefined) return undefined;
  const before = problems.list.length;
  const kind = ref.kind;
  if (kind !== 'Secret' && kind !== 'Cluster') problems.add(`${path}.kind`, `must be "Secret" or "Cluster", got ${JSON.stringify(kind)}`);
  const name = problems.string(ref.name, `${path}.name`, isObjectName, kind === 'Cluster' ? DNS_SUBDOMAIN_MAX_LENGTH - '-kubeconfig'.length : DNS_SUBDOMAIN_MAX_LENGTH, 'an object name');
  const namespace = ref.namespace === undefined ? undefined : problems.string(ref.namespace, `${path}.namespace`, isNamespaceName, DNS_LABEL_MAX_LENGTH, 'a namespace name');
  let key: string | undefined;
  if (ref.key !== undefined) {
    if (kind === 'Cluster') problems.add(`${path}.key`, 'only a Secret reference has a key');
    else key = problems.string(ref.key, `${path}.key`, isSecretKey, DNS_SUBDOMAIN_MAX_LENGTH, 'a Secret data key');
  }
  if (problems.list.length > before || name === undefined) return undefined;
  return kind === 'Secret'
    ? { kind: 'secret', name, ...(namespace === undefined ? {} : { namespace }), ...(key === undefined ? {} : { key }) }
    : { kind: 'cluster-api', name, ...(namespace === undefined ? {} : { namespace }) };
}

function validateEnvironments(value: unknown, pipelineNamespace: string, policy: ValidationPolicy, problems: Problems): ResolvedEnvironment[] | undefined {
  const list = problems.array(value, 'spec.environments', 1, MAX_ENVIRONMENTS);
  if (list === undefined) return undefined;
  const environments: ResolvedEnvironment[] = [];
  const names = new Set<string>();
  const seenTargets = new Map<string, string>();
  let ok = true;
  for (const [i, raw] of list.entries()) {
    const path = `spec.environments[${i}]`;
    const env = problems.record(raw, path);
    if (env === undefined) {
      ok = false;
      continue;
    }
    const name = problems.string(env.name, `${path}.name`, isDnsLabel, DNS_LABEL_MAX_LENGTH, 'a DNS label');
    if (name !== undefined && names.has(name)) {
      problems.add(`${path}.name`, `${JSON.stringify(name)} is used by an earlier environment; names must be unique`);
      ok = false;
    }
    if (name !== undefined) names.add(name);
    if (env.requireApproval !== undefined && typeof env.requireApproval !== 'boolean') {
      problems.add(`${path}.requireApproval`, 'must be true or false');
      ok = false;
    }
    const imagePolicy = env.imagePolicy === undefined ? undefined : problems.string(env.imagePolicy, `${path}.imagePolicy`, isDnsSubdomain, DNS_SUBDOMAIN_MAX_LENGTH, 'an ImagePolicy name (in the Pipeline\'s namespace)');
    if (imagePolicy !== undefined && isRecord(env.fleet) && env.fleet.waves !== undefined) problems.add(`${path}.imagePolicy`, 'must be unset with fleet.waves: each wave is carried by its own $promotion markers (<namespace>:<pipeline>:<environment>/<wave>)');
    const setters = imagePolicy === undefined ? {} : { imagePolicy };
    const before = problems.list.length;
    const commitStatuses = validateCommitStatuses(env.commitStatuses, `${path}.commitStatuses`, (at, message) => { problems.add(at, message); });
    const commitStatusesBad = problems.list.length > before;
    if (env.fleet !== undefined) {
      if (env.targets !== undefined) problems.add(`${path}.targets`, 'must be unset when fleet is set');
      if (i === 0 && isRecord(env.fleet) && env.fleet.waves !== undefined) problems.add(`${path}.fleet.waves`, 'the first environment is never promoted into: waves belong to a later one');
      const fleet = validateFleet(env.fleet, `${path}.fleet`, pipelineNamespace, problems);
      if (name === undefined || fleet === undefined || env.targets !== undefined || commitStatusesBad) {
        ok = false;
        continue;
      }
      environments.push({ name, targets: [], requireApproval: env.requireApproval === true, fleet, ...setters, ...(commitStatuses === undefined ? {} : { commitStatuses }) });
      continue;
    }
    const rawTargets = problems.array(env.targets, `${path}.targets`, 1, MAX_TARGETS_PER_ENVIRONMENT);
    const targets: ResolvedTarget[] = [];
    for (const [j, rawTarget] of (rawTargets ?? []).entries()) {
      const tpath = `${path}.targets[${j}]`;
      const target = problems.record(rawTarget, tpath);
      if (target === undefined) continue;
      const namespace = problems.string(target.namespace, `${tpath}.namespace`, isNamespaceName, DNS_LABEL_MAX_LENGTH, 'a namespace name');
      const cluster = validateClusterRef(target.clusterRef, `${tpath}.clusterRef`, problems);
      if (namespace === undefined || cluster === undefined) continue;
      // Confinement: on the management cluster the service's reach must not become the tenant's.
      if (cluster.kind === 'local' && namespace !== pipelineNamespace && policy.allowCrossNamespaceTargets !== true) {
        problems.add(`${tpath}.namespace`, `a target on the management cluster (no clusterRef) must be in the Pipeline's own namespace ${JSON.stringify(pipelineNamespace)}, got ${JSON.stringify(namespace)} (the service runs without --allow-cross-namespace-targets)`);
        continue;
      }
      let key: string;
      try {
        key = clusterKey(cluster, pipelineNamespace);
      } catch (err) {
        problems.add(`${tpath}.clusterRef`, toError(err).message);
        continue;
      }
      const where = `${key} namespace ${namespace}`;
      const earlier = seenTargets.get(where);
      if (earlier !== undefined) {
        problems.add(tpath, `the same target (${where}) is already ${earlier}; a target belongs to one environment once`);
        continue;
      }
      seenTargets.set(where, tpath);
      targets.push({ cluster, clusterKey: key, namespace });
    }
    if (name === undefined || rawTargets?.length !== targets.length || commitStatusesBad) {
      ok = false;
      continue;
    }
    environments.push({ name, targets, requireApproval: env.requireApproval === true, ...setters, ...(commitStatuses === undefined ? {} : { commitStatuses }) });
  }
  return ok ? environments : undefined;
}

const LABEL_KEY = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

/** A `{ matchLabels, matchExpressions }` selector in the API's string form (what the registry takes). */
function validateSelector(value: unknown, path: string, problems: Problems): string | undefined {
  const selector = problems.record(value, path);
  if (selector === undefined) return undefined;
  const before = problems.list.length;
  const parts: string[] = [];
  if (selector.matchLabels !== undefined) {
    const labels = problems.record(selector.matchLabels, `${path}.matchLabels`);
    for (const [key, v] of Object.entries(labels ?? {})) {
      if (!LABEL_KEY.test(key) || key.length > 317) problems.add(`${path}.matchLabels`, `${JSON.stringify(key.slice(0, 80))} is not a label key`);
      else if (typeof v !== 'string' || !LABEL_VALUE.test(v)) problems.add(`${path}.matchLabels.${key}`, 'must be a label value');
      else parts.push(`${key}=${v}`);
    }
  }
  if (selector.matchExpressions !== undefined) {
    const list = problems.array(selector.matchExpressions, `${path}.matchExpressions`, 0, 20);
    for (const [j, raw] of (list ?? []).entries()) {
      const epath = `${path}.matchExpressions[${j}]`;
      const e = problems.record(raw, epath);
      if (e === undefined) continue;
      const key = typeof e.key === 'string' && LABEL_KEY.test(e.key) ? e.key : undefined;
      if (key === undefined) problems.add(`${epath}.key`, 'must be a label key');
      const given = e.values === undefined ? [] : Array.isArray(e.values) ? (e.values as unknown[]) : [null];
      const values = given.filter((v): v is string => typeof v === 'string' && LABEL_VALUE.test(v));
      if (values.length !== given.length) {
        problems.add(`${epath}.values`, 'must be a list of label values');
        continue;
      }
      const op = e.operator;
      if (op === 'In' || op === 'NotIn') {
        if (values.length === 0) problems.add(`${epath}.values`, `must not be empty with ${op}`);
        else if (key !== undefined) parts.push(`${key} ${op === 'In' ? 'in' : 'notin'} (${values.join(',')})`);
      } else if (op === 'Exists' || op === 'DoesNotExist') {
        if (values.length > 0) problems.add(`${epath}.values`, `must be empty with ${op}`);
        else if (key !== undefined) parts.push(op === 'Exists' ? key : `!${key}`);
      } else {
        problems.add(`${epath}.operator`, `must be In, NotIn, Exists or DoesNotExist, got ${JSON.stringify(op)}`);
      }
    }
  }
  return problems.list.length > before ? undefined : parts.join(',');
}

function validateReadiness(value: unknown, path: string, problems: Problems): ResolvedReadiness | undefined {
  if (value === undefined) return ALL;
  const r = problems.record(value, path);
  if (r === undefined) return undefined;
  const { policy, count, percent } = r;
  if (policy === 'All' && count === undefined && percent === undefined) return ALL;
  if (policy === 'Quorum' && percent === undefined && typeof count === 'number' && Number.isInteger(count) && count >= 1) return { policy, count };
  if (policy === 'Percent' && count === undefined && typeof percent === 'number' && Number.isInteger(percent) && percent >= 1 && percent <= 100) return { policy, percent };
  problems.add(path, 'must be {policy: All}, {policy: Quorum, count: n ≥ 1} or {policy: Percent, percent: 1..100}');
  return undefined;
}

function validateWaves(value: unknown, path: string, readiness: ResolvedReadiness, problems: Problems): ResolvedWave[] | undefined {
  if (value === undefined) return [];
  const list = problems.array(value, path, 1, MAX_WAVES);
  if (list === undefined) return undefined;
  const before = problems.list.length;
  const waves: ResolvedWave[] = [];
  const names = new Set<string>();
  for (const [j, raw] of list.entries()) {
    const wpath = `${path}[${j}]`;
    const w = problems.record(raw, wpath);
    if (w === undefined) continue;
    const name = problems.string(w.name, `${wpath}.name`, isDnsLabel, DNS_LABEL_MAX_LENGTH, 'a DNS label');
    if (name !== undefined && names.has(name)) problems.add(`${wpath}.name`, `${JSON.stringify(name)} is used by an earlier wave; names must be unique`);
    if (name !== undefined) names.add(name);
    const given = ['selector', 'count', 'percent'].filter((k) => w[k] !== undefined);
    let by: ResolvedWave['by'] | undefined;
    if (given.length !== 1) problems.add(wpath, `set exactly one of selector, count, percent (got ${given.length === 0 ? 'none' : given.join(', ')})`);
    else if (w.selector !== undefined) {
      const labelSelector = validateSelector(w.selector, `${wpath}.selector`, problems);
      if (labelSelector !== undefined) by = { kind: 'selector', labelSelector };
    } else if (w.count !== undefined) {
      if (typeof w.count === 'number' && Number.isInteger(w.count) && w.count >= 1) by = { kind: 'count', count: w.count };
      else problems.add(`${wpath}.count`, 'must be an integer ≥ 1');
    } else if (typeof w.percent === 'number' && Number.isInteger(w.percent) && w.percent >= 1 && w.percent <= 100) by = { kind: 'percent', percent: w.percent };
    else problems.add(`${wpath}.percent`, 'must be an integer from 1 to 100');
    const waveReadiness = w.readiness === undefined ? readiness : validateReadiness(w.readiness, `${wpath}.readiness`, problems);
    const soak = w.soakSeconds ?? 0;
    if (typeof soak !== 'number' || !Number.isInteger(soak) || soak < 0 || soak > MAX_SOAK_SECONDS) problems.add(`${wpath}.soakSeconds`, `must be an integer from 0 to ${MAX_SOAK_SECONDS}`);
    if (w.requireApproval !== undefined && typeof w.requireApproval !== 'boolean') problems.add(`${wpath}.requireApproval`, 'must be true or false');
    if (name !== undefined && by !== undefined && waveReadiness !== undefined && typeof soak === 'number') {
      waves.push({ name, by, readiness: waveReadiness, soakSeconds: soak, requireApproval: w.requireApproval === true });
    }
  }
  return problems.list.length > before ? undefined : waves;
}

function validateFleet(value: unknown, path: string, pipelineNamespace: string, problems: Problems): ResolvedFleet | undefined {
  const fleet = problems.record(value, path);
  if (fleet === undefined) return undefined;
  const before = problems.list.length;
  const namespace = problems.string(fleet.namespace, `${path}.namespace`, isNamespaceName, DNS_LABEL_MAX_LENGTH, 'a namespace name');
  let selector: ResolvedFleet['selector'];
  if (fleet.clusterSelector !== undefined) {
    const raw = problems.record(fleet.clusterSelector, `${path}.clusterSelector`);
    const kind = raw?.kind ?? 'Secret';
    if (kind !== 'Secret' && kind !== 'Cluster') problems.add(`${path}.clusterSelector.kind`, `must be "Secret" or "Cluster", got ${JSON.stringify(kind)}`);
    const labelSelector = raw === undefined ? undefined : validateSelector({ matchLabels: raw.matchLabels, matchExpressions: raw.matchExpressions }, `${path}.clusterSelector`, problems);
    if (labelSelector === '') problems.add(`${path}.clusterSelector`, 'must name labels (matchLabels or matchExpressions): an empty selector would take every Secret of the namespace');
    if ((kind === 'Secret' || kind === 'Cluster') && labelSelector !== undefined) selector = { kind, labelSelector };
  }
  const clusters: ClusterRef[] = [];
  if (fleet.clusters !== undefined) {
    const list = problems.array(fleet.clusters, `${path}.clusters`, 1, MAX_FLEET_CLUSTERS);
    const seen = new Set<string>();
    for (const [j, raw] of (list ?? []).entries()) {
      const ref = validateClusterRef(raw, `${path}.clusters[${j}]`, problems);
      if (ref === undefined) continue;
      let key: string;
      try {
        key = clusterKey(ref, pipelineNamespace);
      } catch (err) {
        problems.add(`${path}.clusters[${j}]`, toError(err).message);
        continue;
      }
      if (seen.has(key)) problems.add(`${path}.clusters[${j}]`, `${key} is listed twice`);
      seen.add(key);
      clusters.push(ref);
    }
  }
  if (fleet.clusterSelector === undefined && fleet.clusters === undefined) problems.add(path, 'set clusterSelector, clusters, or both');
  const readiness = validateReadiness(fleet.readiness, `${path}.readiness`, problems);
  const waves = validateWaves(fleet.waves, `${path}.waves`, readiness ?? ALL, problems);
  if (problems.list.length > before || namespace === undefined || readiness === undefined || waves === undefined) return undefined;
  return { namespace, selector, clusters, readiness, waves };
}

function validatePromotion(value: unknown, problems: Problems): ResolvedPromotion | undefined {
  const promotion = problems.record(value, 'spec.promotion');
  if (promotion === undefined) return undefined;
  const strategy = promotion.strategy;
  if (strategy === 'patch') {
    if (promotion.webhook !== undefined) problems.add('spec.promotion.webhook', 'must be unset when strategy is "patch"');
    const patch = problems.record(promotion.patch, 'spec.promotion.patch');
    if (patch === undefined) return undefined;
    if (!isJsonPointer(patch.path)) {
      problems.add('spec.promotion.patch.path', `must be a JSON pointer such as "/spec/chart/spec/version", got ${JSON.stringify(patch.path)}`);
      return undefined;
    }
    if (patch.path === '/metadata' || patch.path.startsWith('/metadata/') || patch.path === '/status' || patch.path.startsWith('/status/')) {
      problems.add('spec.promotion.patch.path', `must point into the object's desired state, not ${JSON.stringify(patch.path)}`);
      return undefined;
    }
    return promotion.webhook === undefined ? { strategy: 'patch', path: patch.path } : undefined;
  }
  if (strategy === 'webhook') {
    if (promotion.patch !== undefined) problems.add('spec.promotion.patch', 'must be unset when strategy is "webhook"');
    const webhook = problems.record(promotion.webhook, 'spec.promotion.webhook');
    const secretRef = webhook === undefined ? undefined : problems.record(webhook.secretRef, 'spec.promotion.webhook.secretRef');
    if (secretRef === undefined) return undefined;
    const name = problems.string(secretRef.name, 'spec.promotion.webhook.secretRef.name', isObjectName, DNS_SUBDOMAIN_MAX_LENGTH, 'a Secret name');
    const key = secretRef.key === undefined ? 'url' : problems.string(secretRef.key, 'spec.promotion.webhook.secretRef.key', isSecretKey, DNS_SUBDOMAIN_MAX_LENGTH, 'a Secret data key');
    if (name === undefined || key === undefined || promotion.patch !== undefined) return undefined;
    return { strategy: 'webhook', secretName: name, secretKey: key };
  }
  if (strategy === 'git') return validateGitPromotion(promotion, problems);
  problems.add('spec.promotion.strategy', `must be "patch", "webhook" or "git", got ${JSON.stringify(strategy)}`);
  return undefined;
}

function validateGitPromotion(promotion: Record<string, unknown>, problems: Problems): ResolvedGitPromotion | undefined {
  const before = problems.list.length;
  for (const other of ['patch', 'webhook']) {
    if (promotion[other] !== undefined) problems.add(`spec.promotion.${other}`, 'must be unset when strategy is "git"');
  }
  const git = problems.record(promotion.git, 'spec.promotion.git');
  if (git === undefined) return undefined;
  const url = problems.string(git.url, 'spec.promotion.git.url', gitUrlRe, 2_048, 'an https:// (or ssh://) repository URL');
  const branch = git.branch === undefined ? 'main' : problems.string(git.branch, 'spec.promotion.git.branch', gitBranchRe, 200, 'a branch name');
  if (branch?.includes('..') === true) problems.add('spec.promotion.git.branch', 'must not contain ".."');
  const path = git.path === undefined ? '.' : problems.string(git.path, 'spec.promotion.git.path', gitPathRe, 1_024, 'a directory of the repository');
  if (path !== undefined && (path.startsWith('/') || path.split('/').includes('..'))) problems.add('spec.promotion.git.path', 'must be a relative path without ".." segments');
  let secretName: string | undefined;
  if (git.secretRef !== undefined) {
    const ref = problems.record(git.secretRef, 'spec.promotion.git.secretRef');
    secretName = ref === undefined ? undefined : problems.string(ref.name, 'spec.promotion.git.secretRef.name', isObjectName, DNS_SUBDOMAIN_MAX_LENGTH, 'a Secret name');
  }
  let pullRequest: ResolvedGitPromotion['pullRequest'];
  if (git.pullRequest !== undefined) {
    const pr = problems.record(git.pullRequest, 'spec.promotion.git.pullRequest');
    if (pr !== undefined) {
      if (pr.provider !== 'github' && pr.provider !== 'gitlab') problems.add('spec.promotion.git.pullRequest.provider', `must be "github" or "gitlab", got ${JSON.stringify(pr.provider)}`);
      const apiUrl = pr.apiUrl === undefined ? undefined : problems.string(pr.apiUrl, 'spec.promotion.git.pullRequest.apiUrl', /^https?:\/\/\S+$/, 2_048, 'an https:// URL');
      if (pr.provider === 'github' || pr.provider === 'gitlab') pullRequest = { provider: pr.provider, apiUrl };
    }
  }
  if (problems.list.length > before || url === undefined || branch === undefined || path === undefined) return undefined;
  return { strategy: 'git', url, branch, path, secretName, pullRequest };
}

/**
 * Core `v1` Secrets are never an app or target kind: a revision path into one would copy its data
 * into status (Flux's deploy key, another team's kubeconfig). The kind is compared
 * case-insensitively, so no spelling that discovery might still resolve slips through.
 */
function isCoreSecret(gvk: GroupVersionKind): boolean {
  return gvk.group === '' && gvk.kind.toLowerCase() === 'secret';
}

// --- App kinds: the platform team's allow-list (--app-kinds). ---

/** Kinds listed in a refusal at most; the rest are counted. */
const MAX_KINDS_SHOWN = 12;

/** True when `gvk` is allowed; else records a problem naming the kind refused and the allowed ones. */
function checkAppKind(gvk: GroupVersionKind, allowed: AppKinds, problems: Problems): boolean {
  if (allowed.allows(gvk)) return true;
  const shown = allowed.patterns.slice(0, MAX_KINDS_SHOWN).join(', ');
  const more = allowed.patterns.length > MAX_KINDS_SHOWN ? ` and ${allowed.patterns.length - MAX_KINDS_SHOWN} more` : '';
  problems.add('spec.appRef', `kind ${kindName(gvk)} is not one this service promotes (allowed: ${shown}${more}; the platform team sets them with --app-kinds)`);
  return false;
}

// --- end of app kinds ---

/** What would loop under Flux's controllers (see {@link fluxSpecProblems}). */
function validateUnderFlux(app: ValidPipelineSpec['app'], promotion: ResolvedPromotion, revisionPath: string | undefined, problems: Problems): void {
  for (const problem of fluxSpecProblems({ gvk: app.gvk, strategy: promotion.strategy, revisionPath })) problems.list.push(problem);
}

/**
 * Checks a Pipeline's spec against the rules of its CRD schema and a few only code can check
 * (cluster references, a target named twice, the tenancy rules of `policy`), and normalises it.
 * Never throws: every problem is reported with its field path.
 */
export function validatePipelineSpec(spec: unknown, pipelineNamespace: string, policy: ValidationPolicy = {}): SpecValidation {
  const problems = new Problems();
  const root = problems.record(spec, 'spec');
  if (root === undefined) return { valid: false, problems: problems.list };

  const appRef = problems.record(root.appRef, 'spec.appRef');
  let app: ValidPipelineSpec['app'] | undefined;
  if (appRef !== undefined) {
    const apiVersion = validateApiVersion(appRef.apiVersion, problems);
    const kind = problems.string(appRef.kind, 'spec.appRef.kind', isKindName, DNS_LABEL_MAX_LENGTH, 'a kind such as "HelmRelease"');
    const name = problems.string(appRef.name, 'spec.appRef.name', isObjectName, DNS_SUBDOMAIN_MAX_LENGTH, 'an object name');
    if (apiVersion !== undefined && kind !== undefined && name !== undefined) {
      const slash = apiVersion.indexOf('/');
      const gvk = slash < 0 ? { group: '', version: apiVersion, kind } : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1), kind };
      if (isCoreSecret(gvk)) problems.add('spec.appRef', `a core ${apiVersion} Secret is never an app or target kind`);
      else if (checkAppKind(gvk, policy.appKinds ?? AppKinds.defaults, problems)) app = { gvk, name };
    }
  }
  const environments = validateEnvironments(root.environments, pipelineNamespace, policy, problems);
  const promotion = validatePromotion(root.promotion, problems);
  const revisionPath = root.revisionPath;
  if (revisionPath !== undefined && !isJsonPointer(revisionPath)) {
    problems.add('spec.revisionPath', `must be a JSON pointer such as "/status/lastAppliedRevision", got ${JSON.stringify(revisionPath)}`);
  }
  const serviceAccountName = root.serviceAccountName === undefined
    ? undefined
    : problems.string(root.serviceAccountName, 'spec.serviceAccountName', isObjectName, DNS_SUBDOMAIN_MAX_LENGTH, 'a ServiceAccount name');
  if (environments !== undefined && promotion !== undefined) problems.list.push(...commitStatusProblems(environments, promotion));
  for (const [i, env] of (environments ?? []).entries()) {
    if (env.imagePolicy !== undefined && promotion !== undefined && promotion.strategy !== 'git') problems.add(`spec.environments[${i}].imagePolicy`, '$imagepolicy setters are written by the git strategy only');
  }
  if (promotion?.strategy === 'git' && promotion.pullRequest !== undefined) {
    for (const [i, env] of (environments ?? []).entries()) {
      if ((env.fleet?.waves.length ?? 0) > 0) problems.add(`spec.environments[${i}].fleet.waves`, 'waves are carried out by the patch and webhook strategies and by git pushing to the branch; git with pullRequest would need a merge per wave: drop pullRequest or the waves');
    }
  }
  if (app !== undefined && promotion !== undefined && (revisionPath === undefined || typeof revisionPath === 'string')) {
    validateUnderFlux(app, promotion, revisionPath, problems);
  }
  if (problems.list.length > 0 || app === undefined || environments === undefined || promotion === undefined) {
    return { valid: false, problems: problems.list.length > 0 ? problems.list : ['spec: invalid'] };
  }
  return { valid: true, spec: { app, environments, promotion, revisionPath: typeof revisionPath === 'string' ? revisionPath : undefined, serviceAccountName } };
}
