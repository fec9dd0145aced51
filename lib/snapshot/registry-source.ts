import type { InformerHandler } from '../informer/index.ts';
import type { KubeObject } from '../transport/index.ts';
import type { Registry } from '../registry/index.ts';
import type { SnapshotSource, SourceQuery, SourceReader, WriteConnection } from './source.ts';

/** The owner name the accumulator's writes are admitted under (admission is by namespace and identity). */
const WRITER = 'fleet-snapshot';

/**
 * A {@link SnapshotSource} on a registry: each query holds the registry's shared cache of its kind
 * (`registry.reader`, no owner registered, never a second watch), and writes go through the
 * registry's connection to the query's cluster, admitted for the query's namespace and identity.
 */
export function registrySource(registry: Registry): SnapshotSource {
  return {
    async open<T extends KubeObject>(query: SourceQuery, handler: InformerHandler<T>, signal: AbortSignal): Promise<SourceReader<T>> {
      return registry.reader<T>(query.cluster, query.gvk, {
        identity: query.identity,
        namespace: query.namespace,
        ownerNamespace: query.ownerNamespace,
        handler: handler as InformerHandler,
        signal,
      });
    },
    async connection(query: SourceQuery, signal?: AbortSignal): Promise<WriteConnection> {
      return registry.connectionFor(query.cluster, { namespace: query.ownerNamespace, name: WRITER, identity: query.identity }, signal);
    },
  };
}
