// The API path of a resource collection or of one object, built only from checked segments.
import { checkGvk, checkName, checkNamespace, checkResource } from './segments.ts';
import type { ResourceInfo } from './types.ts';

/**
 * The API path of a resource collection or of one object. `namespace` is ignored for cluster-scoped
 * resources; without it a namespaced resource's path covers all namespaces.
 */
export function resourcePath(info: ResourceInfo, where: { readonly namespace?: string | undefined; readonly name?: string | undefined } = {}): string {
  // Every value is checked as a path segment before it is pasted: a version such as
  // `v1/namespaces/kube-system/secrets/db?` must not reach another resource with our credentials.
  checkGvk(info.gvk);
  checkResource(info.resource);
  if (info.namespaced && where.namespace !== undefined && where.namespace !== '') checkNamespace(where.namespace);
  if (where.name !== undefined) checkName(where.name);
  const { group, version } = info.gvk;
  const root = group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
  const ns = info.namespaced && where.namespace !== undefined && where.namespace !== '' ? `/namespaces/${encodeURIComponent(where.namespace)}` : '';
  const name = where.name === undefined ? '' : `/${encodeURIComponent(where.name)}`;
  return `${root}${ns}/${info.resource}${name}`;
}
