/**
 * Who fleetcache is on a cluster. `own` is whatever credentials the cluster reference resolves to
 * (the service's own account on the management cluster, the kubeconfig's user on a remote one).
 * `impersonate` sends those credentials with Kubernetes impersonation headers, so the API server
 * authorises every request as `user` (and `groups`): RBAC decides what a tenant reaches, never the
 * service's own rights. Impersonation applies where the tenant's account lives, the management
 * cluster; on a remote cluster the tenant's own kubeconfig is already the tenant's identity.
 */
export type Identity =
  | { readonly kind: 'own' }
  | { readonly kind: 'impersonate'; readonly user: string; readonly groups: readonly string[] };

/** The credentials a cluster reference resolves to, unchanged. */
export const OWN_IDENTITY: Identity = Object.freeze({ kind: 'own' });

/**
 * A ServiceAccount, as the API server itself names it when it authenticates the account's token:
 * user `system:serviceaccount:<namespace>:<name>`, groups `system:serviceaccounts`,
 * `system:serviceaccounts:<namespace>` and `system:authenticated`.
 */
export function serviceAccountIdentity(namespace: string, name: string): Identity {
  return Object.freeze({
    kind: 'impersonate',
    user: `system:serviceaccount:${namespace}:${name}`,
    groups: Object.freeze(['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated']),
  });
}

/** A stable, printable key for an identity ('' for own), for cache and connection keys. */
export function identityKey(identity: Identity | undefined): string {
  if (identity === undefined || identity.kind === 'own') return '';
  return `as=${identity.user}${identity.groups.length > 0 ? `;groups=${[...identity.groups].sort().join(',')}` : ''}`;
}

const SA_USER = /^system:serviceaccount:([^:]+):[^:]+$/;

/**
 * The impersonation headers for an identity, or undefined for `own`. For a ServiceAccount whose
 * groups are exactly the ones the API server derives for it, the groups are left out: the server
 * adds them itself, and sending them would need `impersonate` on groups as well as on
 * ServiceAccounts.
 */
export function impersonationOf(identity: Identity | undefined): { readonly user: string; readonly groups: readonly string[] } | undefined {
  if (identity === undefined || identity.kind === 'own') return undefined;
  const sa = SA_USER.exec(identity.user);
  if (sa !== null) {
    const derived = new Set(['system:serviceaccounts', `system:serviceaccounts:${sa[1] ?? ''}`, 'system:authenticated']);
    if (identity.groups.every((g) => derived.has(g))) return { user: identity.user, groups: [] };
  }
  return { user: identity.user, groups: identity.groups };
}
