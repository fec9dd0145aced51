// The four kinds every simulated cluster of the scale benchmarks serves (bench/scale/sim-host.ts),
// which each measured process asks its registry for.
export const FLEET_KINDS = [
  { group: '', version: 'v1', kind: 'ConfigMap' },
  { group: '', version: 'v1', kind: 'Secret' },
  { group: 'helm.toolkit.fluxcd.io', version: 'v2', kind: 'HelmRelease' },
  { group: 'kustomize.toolkit.fluxcd.io', version: 'v1', kind: 'Kustomization' },
] as const;
