/**
 * `fleetcache/testing`: what operators need to test their own controllers the way fleetcache tests
 * itself — real kube-apiservers on loopback (no Docker), simulated API servers with fault injection
 * (hundreds per process), a hostile webhook receiver (huge answers, answers that hang after the
 * headers, answers that echo secrets), CRDs shaped like Flux's, and an in-memory snapshot source
 * (`FakeSnapshotSource`) to unit-test a fleet-snapshot consumer on a fake clock (`FakeClock`, for
 * the `clock` option of `Registry`, `ClusterSet` and `FleetAccumulator`).
 */
export * from './harness/index.ts';
export * from '../fixtures/index.ts';
export { helmReleaseCrd, kustomizationCrd, openCrd } from '../fixtures/crds/index.ts';
export { FakeCache, FakeSnapshotSource } from '../lib/snapshot/testing.ts';
export { FakeClock } from '../lib/util/index.ts';
