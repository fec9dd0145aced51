// Build fan-out benchmark (issue 12): `node bench/build-fan-out.bench.ts [clusters] [maxConcurrentBuilds]`
// (default 1000 and 32). Asks the registry for one cache on each of N simulated clusters (served
// from a separate process) at once and prints the worst event-loop stall (the largest gap between
// ticks of a 5 ms timer), the event-loop delay histogram's p99 and max, and the time to all built
// and all synced. Run it once with the default bound and once with a bound above N (unbounded).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { StaticProvider } from '../lib/cluster/index.ts';
import { registryWithKeeper } from '../lib/registry/testing.ts';

const n = Number(process.argv[2] ?? 1000);
const max = Number(process.argv[3] ?? 32);
const host = spawn(process.execPath, [new URL('./scale/sim-host.ts', import.meta.url).pathname, String(n), '1'], { stdio: ['pipe', 'pipe', 'inherit'] });
const line = await new Promise<string>((resolve) => { createInterface({ input: host.stdout }).once('line', resolve); });
const fleet = JSON.parse(line) as { name: string; kubeconfig: string }[];
const registry = registryWithKeeper({ provider: new StaticProvider({ clusters: Object.fromEntries(fleet.map((c) => [c.name, c.kubeconfig])) }), credentialCheckIntervalMs: 0, maxConcurrentBuilds: max });
// Largest gap between timer ticks that should come every 5 ms.
let last = performance.now();
let worst = 0;
const tick = setInterval(() => { const now = performance.now(); worst = Math.max(worst, now - last - 5); last = now; }, 5);
const h = monitorEventLoopDelay({ resolution: 5 });
h.enable();
const started = performance.now();
const readers = await Promise.all(fleet.map((c) => registry.watchTargetAndGetReader({ kind: 'static', name: c.name }, { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, namespace: 'apps', name: 'obj-0' }, { namespace: 'team-a', name: 'o' })));
const built = performance.now() - started;
await Promise.all(readers.map((r) => r.waitForSync()));
const synced = performance.now() - started;
h.disable();
clearInterval(tick);
console.log(JSON.stringify({ n, maxConcurrentBuilds: max, builtMs: Math.round(built), syncedMs: Math.round(synced), worstStallMs: Math.round(worst), p99DelayMs: Math.round(h.percentile(99) / 1e6), maxDelayMs: Math.round(h.max / 1e6) }));
await registry.close();
host.stdin.end();
