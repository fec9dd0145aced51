import { createHash, type Hash } from 'node:crypto';
import { createSecureContext, type SecureContext } from 'node:tls';

/** The TLS material a kubeconfig yields: what goes into a secure context. */
export interface ContextMaterial {
  readonly ca?: unknown;
  readonly cert?: unknown;
  readonly key?: unknown;
  readonly pfx?: unknown;
  readonly passphrase?: string | undefined;
}

/**
 * Feeds `value` to `hash` so that two different values never feed the same bytes: every string
 * and buffer carries its type and length, every array its length, every object its sorted keys.
 */
function feed(hash: Hash, value: unknown): void {
  if (value === undefined || value === null) {
    hash.update('u;');
  } else if (typeof value === 'string') {
    hash.update(`s${Buffer.byteLength(value)}:`).update(value);
  } else if (value instanceof Uint8Array) {
    hash.update(`b${value.length}:`).update(value);
  } else if (Array.isArray(value)) {
    hash.update(`a${value.length}:`);
    for (const item of value) feed(hash, item);
  } else if (typeof value === 'object') {
    const keys = Object.keys(value).sort();
    hash.update(`o${keys.length}:`);
    for (const key of keys) {
      feed(hash, key);
      feed(hash, (value as Record<string, unknown>)[key]);
    }
  } else if (typeof value === 'number' || typeof value === 'boolean') {
    hash.update(`${typeof value}:${String(value)};`);
  } else {
    // Nothing a kubeconfig yields; refusing beats a fingerprint that two values could share.
    throw new TypeError(`TLS material of type ${typeof value} cannot be fingerprinted`);
  }
}

/** A fingerprint of everything a secure context is built from (unambiguous, see `feed`). */
export function materialFingerprint(material: ContextMaterial): string {
  const hash = createHash('sha256');
  for (const part of [material.ca, material.cert, material.key, material.pfx, material.passphrase]) feed(hash, part);
  return hash.digest('hex');
}

/**
 * One secure context per TLS material in the whole process, not one per connection: a fleet whose
 * kubeconfigs carry the same CA (and client certificate) parses it once. Measured over 200 raw
 * TLS connections to simulated clusters (issue 12): a context with a CA is about 11 KiB of native
 * memory, and a connection verifying through a context of its own about 29 KiB more RSS than through
 * a shared one. A context is immutable once built and keeps no per-peer state (Node's contexts keep
 * no client sessions), so connections to different servers may share it.
 *
 * Invariant: `#contexts` maps a fingerprint to a context built from exactly the material it was
 * computed from; an entry whose context was collected is removed by `#collected` (or replaced by
 * the next build). Held weakly: a context lives as long as some connection uses it, no longer.
 */
class SharedContexts {
  readonly #contexts = new Map<string, WeakRef<SecureContext>>();
  readonly #collected = new FinalizationRegistry<string>((fingerprint) => {
    // A newer context may have taken the key since: remove only a dead entry.
    if (this.#contexts.get(fingerprint)?.deref() === undefined) this.#contexts.delete(fingerprint);
  });

  /** The context for this material: the live one, or a new one. Throws what `createSecureContext` throws. */
  get(material: ContextMaterial): SecureContext {
    const fingerprint = materialFingerprint(material);
    const alive = this.#contexts.get(fingerprint)?.deref();
    if (alive !== undefined) return alive;
    const context = createSecureContext({
      ...(material.ca === undefined ? {} : { ca: material.ca as string }),
      ...(material.cert === undefined ? {} : { cert: material.cert as string }),
      ...(material.key === undefined ? {} : { key: material.key as string }),
      ...(material.pfx === undefined ? {} : { pfx: material.pfx as string }),
      ...(material.passphrase === undefined ? {} : { passphrase: material.passphrase }),
    });
    this.#contexts.set(fingerprint, new WeakRef(context));
    this.#collected.register(context, fingerprint);
    return context;
  }

  /** Whether a context built from this material is alive. */
  has(material: ContextMaterial): boolean {
    return this.#contexts.get(materialFingerprint(material))?.deref() !== undefined;
  }

  /** Fingerprints with an entry (alive, or collected and not yet swept). */
  get size(): number {
    return this.#contexts.size;
  }
}

/** The process-wide cache of secure contexts every {@link Transport} builds its contexts through. */
export const sharedSecureContexts = new SharedContexts();
