// The measured side of the cold-sync benchmark: one connection, one informer on ConfigMaps with the
// default page size (500), from start to synced. Uses only APIs that exist before and after issue
// 12, so the same file measures main's lib/ when copied into a checkout of main. argv: a file
// holding the sim host's JSON line. Prints one JSON line: wall time to synced, peak RSS over the
// RSS before, CPU.
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { ResourceInformer } from '../../lib/informer/index.ts';
import { ClusterConnection } from '../../lib/transport/index.ts';

const { kubeconfig } = JSON.parse(readFileSync(process.argv[2] ?? '', 'utf8')) as { kubeconfig: string };
const kubeConfig = new KubeConfig();
kubeConfig.loadFromString(kubeconfig);
(globalThis as { gc?: () => void }).gc?.();
const base = process.memoryUsage.rss();
let peak = base;
const sampler = setInterval(() => { peak = Math.max(peak, process.memoryUsage.rss()); }, 5);
const cpu0 = process.cpuUsage();
const started = performance.now();
const connection = new ClusterConnection({ name: 'cold', kubeConfig, ...(process.env.COLD_HTTP2 === '0' ? { http2: false } : {}) });
const informer = new ResourceInformer({ connection, gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, namespace: 'apps' });
informer.start();
await informer.waitForSync(AbortSignal.timeout(600_000));
const syncedMs = performance.now() - started;
peak = Math.max(peak, process.memoryUsage.rss());
const cpu = process.cpuUsage(cpu0);
clearInterval(sampler);
const objects = informer.store.list().length;
await informer.stop();
await connection.close();
process.stdout.write(`${JSON.stringify({ syncedMs, peakRssGrowth: peak - base, cpuMs: (cpu.user + cpu.system) / 1000, objects })}\n`);
process.exit(0);
