// The service's own metrics, beside the manager kit's in the same prom-client registry.
import { Counter, type Registry } from 'prom-client';

/** What the pipeline controller reports for `/metrics` (its `stats()`). */
export interface ControllerStats {
  readonly reconciles: number;
  readonly reconcileErrors: number;
  readonly promotions: { readonly succeeded: number; readonly failed: number };
}

/**
 * Registers `fleetcache_promotions_total{outcome}` in `registry`, read from `stats` at scrape time.
 * No `pipeline` label, on purpose: one series per Pipeline would grow with tenants' objects (a
 * Pipeline's promotions are in its status and Events).
 */
export function registerServiceMetrics(registry: Registry, stats: () => ControllerStats): void {
  new Counter({
    name: 'fleetcache_promotions_total', help: 'Promotions of a revision to the next environment, by outcome.', labelNames: ['outcome'], registers: [registry],
    collect() {
      const { promotions } = stats();
      this.reset();
      this.inc({ outcome: 'succeeded' }, promotions.succeeded);
      this.inc({ outcome: 'failed' }, promotions.failed);
    },
  });
}
