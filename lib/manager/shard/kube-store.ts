// The shard Lease store on a real cluster: coordination.k8s.io/v1 Leases selected by group label.
import { checkNamespace, type ClusterConnection } from '../../transport/index.ts';
import { KubeApiError, positiveInteger } from '../../util/index.ts';
import { leaseBody, storedLease } from '../leader.ts';
import { checkGroup, SHARD_GROUP_LABEL, SHARD_KEY_ANNOTATION, SHARD_ROLE_LABEL, SHARD_WEIGHT_ANNOTATION } from './names.ts';
import type { ShardLease, ShardLeaseDraft, ShardLeaseStore } from './store.ts';

/** Options of {@link KubeShardLeaseStore}. */
export interface KubeShardLeaseStoreOptions {
  /** The management cluster. Required. */
  readonly connection: ClusterConnection;
  /** Where the group's Leases live (the service's own namespace). Required. */
  readonly namespace: string;
  /** The shard group: the `fleetcache.io/shard-group` label value. Required. */
  readonly group: string;
  /** Leases per LIST page. Default 500. */
  readonly pageSize?: number | undefined;
  /** A listing of more pages than this fails rather than growing without end. Default 200 (100 000 Leases). */
  readonly maxPages?: number | undefined;
}

interface LeaseMeta {
  readonly metadata?: { readonly name?: string; readonly labels?: Record<string, string>; readonly annotations?: Record<string, string> };
}

interface LeaseList {
  readonly items?: readonly unknown[];
  readonly metadata?: { readonly continue?: string };
}

/** A positive integer weight from the annotation; anything else counts as 1 (never 0: a peer is never starved by a typo). */
function parseWeight(text: string | undefined): number {
  const value = Number(text);
  return text !== undefined && /^[1-9][0-9]{0,5}$/.test(text) && Number.isSafeInteger(value) ? value : 1;
}

/** A group Lease read from the API, or undefined when it is neither a peer nor a fence. */
function parseLease(body: unknown): ShardLease | undefined {
  const meta = (typeof body === 'object' && body !== null ? body : {}) as LeaseMeta;
  const name = meta.metadata?.name;
  if (name === undefined) return undefined;
  const { resourceVersion, record } = storedLease(body);
  const role = meta.metadata?.labels?.[SHARD_ROLE_LABEL];
  const annotations = meta.metadata?.annotations ?? {};
  if (role === 'peer') return { role, name, weight: parseWeight(annotations[SHARD_WEIGHT_ANNOTATION]), record, resourceVersion };
  const key = annotations[SHARD_KEY_ANNOTATION];
  if (role === 'fence' && key !== undefined) return { role, name, key, record, resourceVersion };
  return undefined;
}

function required(lease: ShardLease | undefined, what: string): ShardLease {
  if (lease === undefined) throw new Error(`the API server answered a Lease ${what} without a name or role`);
  return lease;
}

/**
 * {@link ShardLeaseStore} over a {@link ClusterConnection}: a paginated LIST by label selector,
 * POST, PUT with the resourceVersion, DELETE with a resourceVersion precondition.
 */
export class KubeShardLeaseStore implements ShardLeaseStore {
  readonly description: string;
  readonly #connection: ClusterConnection;
  readonly #namespace: string;
  readonly #group: string;
  readonly #pageSize: number;
  readonly #maxPages: number;

  constructor(options: KubeShardLeaseStoreOptions) {
    checkNamespace(options.namespace);
    this.#group = checkGroup(options.group);
    this.#connection = options.connection;
    this.#namespace = options.namespace;
    this.#pageSize = positiveInteger('KubeShardLeaseStore', 'pageSize', options.pageSize ?? 500);
    this.#maxPages = positiveInteger('KubeShardLeaseStore', 'maxPages', options.maxPages ?? 200);
    this.description = `${options.namespace}/${options.group}`;
  }

  get #collection(): string {
    return `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(this.#namespace)}/leases`;
  }

  async list(signal: AbortSignal): Promise<readonly ShardLease[]> {
    const leases: ShardLease[] = [];
    let next: string | undefined;
    for (let page = 0; page < this.#maxPages; page++) {
      const query = { labelSelector: `${SHARD_GROUP_LABEL}=${this.#group}`, limit: this.#pageSize, continue: next };
      const body = (await this.#connection.request({ method: 'GET', path: this.#collection, query, signal })) as LeaseList | undefined;
      for (const item of body?.items ?? []) {
        const lease = parseLease(item);
        if (lease !== undefined) leases.push(lease);
      }
      next = body?.metadata?.continue;
      // A continue token is a snapshot of the first page's revision: the pages form one listing.
      if (next === undefined || next === '') return leases;
    }
    throw new Error(`the shard group ${this.description} has more than ${this.#maxPages * this.#pageSize} Leases`);
  }

  #body(draft: ShardLeaseDraft, resourceVersion?: string): object {
    const lease = leaseBody(this.#namespace, draft.name, draft.record, resourceVersion) as { metadata: object };
    const annotations = draft.role === 'peer' ? { [SHARD_WEIGHT_ANNOTATION]: String(draft.weight) } : { [SHARD_KEY_ANNOTATION]: draft.key };
    return { ...lease, metadata: { ...lease.metadata, labels: { [SHARD_GROUP_LABEL]: this.#group, [SHARD_ROLE_LABEL]: draft.role }, annotations } };
  }

  async create(draft: ShardLeaseDraft, signal: AbortSignal): Promise<ShardLease> {
    return required(parseLease(await this.#connection.request({ method: 'POST', path: this.#collection, body: this.#body(draft), signal })), 'created');
  }

  async update(draft: ShardLeaseDraft, resourceVersion: string, signal: AbortSignal): Promise<ShardLease> {
    const path = `${this.#collection}/${encodeURIComponent(draft.name)}`;
    return required(parseLease(await this.#connection.request({ method: 'PUT', path, body: this.#body(draft, resourceVersion), signal })), 'updated');
  }

  async delete(name: string, resourceVersion: string, signal: AbortSignal): Promise<void> {
    const body = { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { resourceVersion } };
    try {
      await this.#connection.request({ method: 'DELETE', path: `${this.#collection}/${encodeURIComponent(name)}`, body, signal });
    } catch (err) {
      if (err instanceof KubeApiError && err.statusCode === 404) return;
      throw err;
    }
  }
}
