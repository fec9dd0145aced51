/** A group/version/kind. The core group is the empty string. */
export interface GroupVersionKind {
  readonly group: string;
  readonly version: string;
  readonly kind: string;
}

/** `apps/v1, Kind=Deployment` or `v1, Kind=ConfigMap`: the form client-go prints. */
export function formatGvk(gvk: GroupVersionKind): string {
  return `${gvk.group === '' ? gvk.version : `${gvk.group}/${gvk.version}`}, Kind=${gvk.kind}`;
}

/** Splits an `apiVersion` (`v1`, `apps/v1`) and a kind into a GVK. */
export function gvkOf(apiVersion: string, kind: string): GroupVersionKind {
  const slash = apiVersion.indexOf('/');
  if (apiVersion === '' || kind === '' || slash !== apiVersion.lastIndexOf('/') || slash === 0 || slash === apiVersion.length - 1) {
    throw new TypeError(`invalid apiVersion/kind: ${JSON.stringify(apiVersion)}, ${JSON.stringify(kind)}`);
  }
  return slash < 0
    ? { group: '', version: apiVersion, kind }
    : { group: apiVersion.slice(0, slash), version: apiVersion.slice(slash + 1), kind };
}

/** The `apiVersion` string of a GVK. */
export function apiVersionOf(gvk: GroupVersionKind): string {
  return gvk.group === '' ? gvk.version : `${gvk.group}/${gvk.version}`;
}
