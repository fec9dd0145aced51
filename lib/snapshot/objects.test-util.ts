// The kinds and clusters the snapshot tests (fakes and real apiservers alike) name.
import type { ClusterRef } from '../cluster/index.ts';
import type { KubeObject } from '../transport/index.ts';
import type { GroupVersionKind } from '../util/index.ts';

export interface ConfigMap extends KubeObject {
  readonly data?: Readonly<Record<string, string>>;
}

export const CM: GroupVersionKind = { group: '', version: 'v1', kind: 'ConfigMap' };
export const SECRET: GroupVersionKind = { group: '', version: 'v1', kind: 'Secret' };
export const east: ClusterRef = { kind: 'static', name: 'east' };
export const west: ClusterRef = { kind: 'static', name: 'west' };
