// Compressed objects (issue 27, `objects: 'compressed'`): a lazy cache packs the text of objects
// unchanged for `compressAfterMs`, in the background, against a dictionary of its own objects;
// every read, handler and relist sees exactly what a lazy cache would.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, it } from 'node:test';
import { FakeResourceClient } from '../transport/testing.ts';
import type { KubeObject } from '../transport/index.ts';
import { KubeApiError } from '../util/index.ts';
import { ResourceInformer, type InformerOptions, type ObjectHead } from './index.ts';
import { lzPack } from './lz.ts';
import { dictionaryFrom, pack } from './pack.ts';
import { settle } from '../../fixtures/support/index.ts';
import { eventually } from '../../e2e/harness/index.ts';

const running: ResourceInformer[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((i) => i.stop()));
});

/** A Deployment-like object as clusters hold them: similar across objects, every one different. */
function deployment(i: number, image = `1.${i % 9}.${i}`): KubeObject {
  return {
    metadata: { namespace: 'apps', name: `web-${i}`, uid: `6f1c2a7e-0d3b-4c5e-9a8f-${String(i).padStart(12, '0')}`, labels: { app: `web-${i}`, 'app.kubernetes.io/part-of': 'shop', team: `t${i % 7}` }, managedFields: [{ manager: 'kubectl', fieldsV1: { 'f:spec': {} } }] },
    spec: {
      replicas: 1 + (i % 3),
      selector: { matchLabels: { app: `web-${i}` } },
      template: {
        metadata: { labels: { app: `web-${i}`, team: `t${i % 7}` } },
        spec: { containers: [{ name: 'web', image: `ghcr.io/acme/web-${i % 13}:${image}`, ports: [{ containerPort: 8080 + (i % 4), name: 'http', protocol: 'TCP' }], env: [{ name: 'LOG_LEVEL', value: i % 2 === 0 ? 'debug' : 'info' }, { name: 'REGION', value: `eu-${i % 3}` }], resources: { requests: { cpu: `${100 + i}m`, memory: `${64 + i}Mi` } }, readinessProbe: { httpGet: { path: '/healthz', port: 'http', scheme: 'HTTP' }, periodSeconds: 10, timeoutSeconds: 1 }, imagePullPolicy: 'IfNotPresent', terminationMessagePath: '/dev/termination-log' }], restartPolicy: 'Always', dnsPolicy: 'ClusterFirst', schedulerName: 'default-scheduler' },
      },
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: '25%', maxSurge: '25%' } },
    },
  };
}

function started(objects: readonly KubeObject[], options: Partial<InformerOptions> = {}): { client: FakeResourceClient; informer: ResourceInformer } {
  const client = new FakeResourceClient();
  for (const obj of objects) client.upsert(obj);
  const informer = new ResourceInformer({ client, objects: 'compressed', compressAfterMs: 100, ...options });
  running.push(informer);
  return { client, informer };
}

const FLEET = Array.from({ length: 40 }, (_, i) => deployment(i));

/**
 * Resolves once the process's compactor has made full passes after every object cached so far was
 * cold: a witness cache made now is packed whole (its objects are younger than any before it), and
 * then a second one (so that a whole pass ran after the first was done). What a test that expects
 * nothing to be packed waits for, instead of a length of time.
 */
async function compactorPassed(): Promise<void> {
  for (let k = 0; k < 2; k++) {
    const { informer: witness } = started(FLEET);
    witness.start();
    await witness.waitForSync(AbortSignal.timeout(10_000));
    await eventually('the witness cache packed', () => witness.stats().compressed === FLEET.length, { timeoutMs: 10_000 });
    await witness.stop();
  }
}

describe('compressed objects', () => {
  it('cold objects are packed in the background and read back exactly as a lazy cache reads them, frozen', async () => {
    const { informer } = started(FLEET);
    const lazy = new ResourceInformer({ client: started(FLEET, { objects: 'lazy' }).client, objects: 'lazy' });
    running.push(lazy);
    informer.start();
    lazy.start();
    await informer.waitForSync(AbortSignal.timeout(10_000));
    await lazy.waitForSync(AbortSignal.timeout(10_000));
    const text = informer.stats().retainedBytes;
    await eventually('every object packed', () => informer.stats().compressed === FLEET.length, { timeoutMs: 10_000 });
    const packed = informer.stats().retainedBytes;
    assert.ok(packed < text / 2, `${String(packed)} B held packed against ${String(text)} B as text`);
    for (let i = 0; i < FLEET.length; i++) {
      const obj = informer.store.get(`apps/web-${String(i)}`);
      assert.deepEqual(obj, lazy.store.get(`apps/web-${String(i)}`));
      assert.ok(obj !== undefined && Object.isFrozen(obj) && Object.isFrozen(obj.metadata));
    }
    assert.equal(informer.store.byIndex('namespace', 'apps').length, FLEET.length);
    assert.equal(informer.stats().decodes, FLEET.length, 'each read past the decoded cache parses once');
  });

  it('a change to a packed object stores it as text again; handlers see the packed old object and the new one; a delete and a relist work on packed slots', async () => {
    // Two seconds cold: the changed object is seen as text before it is packed again.
    const { client, informer } = started(FLEET, { compressAfterMs: 2_000 });
    const updates: [ObjectHead, ObjectHead][] = [];
    const whole: [string, string][] = [];
    const deletes: string[] = [];
    informer.addHeadHandler({ update: (old, current) => { updates.push([old, current]); }, delete: (h) => { deletes.push(h.metadata.name ?? ''); } });
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(10_000));
    await eventually('packed', () => informer.stats().compressed === FLEET.length, { timeoutMs: 20_000 });
    const before = informer.store.get('apps/web-3');
    client.upsert(deployment(3, '2.0.0'));
    await settle();
    assert.equal(informer.stats().compressed, FLEET.length - 1, 'the changed object is text until it is cold again');
    const [old, current] = updates.at(-1) ?? [];
    assert.equal(old?.metadata.resourceVersion, before?.metadata?.resourceVersion, 'the old head comes from the packed text');
    assert.deepEqual(old?.metadata.labels, before?.metadata?.labels);
    assert.notEqual(current?.metadata.resourceVersion, old?.metadata.resourceVersion);
    const now = informer.store.get('apps/web-3') as { spec: { template: { spec: { containers: { image: string }[] } } } } | undefined;
    assert.equal(now?.spec.template.spec.containers[0]?.image, 'ghcr.io/acme/web-3:2.0.0');
    // A whole-object handler added now gets every object, packed ones unpacked.
    informer.addHandler({ add: (obj) => { whole.push([obj.metadata?.name ?? '', String((obj as { spec?: { replicas?: number } }).spec?.replicas)]); } });
    await settle();
    assert.equal(whole.length, FLEET.length);
    assert.ok(whole.some(([name, replicas]) => name === 'web-5' && replicas === '3'));
    client.remove('apps/web-7');
    await settle();
    assert.deepEqual(deletes, ['web-7']);
    // A relist compares resourceVersions of packed slots: nothing unchanged is reported.
    const relistUpdates = updates.length;
    const packedBefore = informer.stats().compressed;
    client.stream?.fail(new KubeApiError({ cluster: 'fake', gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, statusCode: 410, status: { kind: 'Status', reason: 'Expired', code: 410 } }));
    await eventually('relisted', () => informer.stats().relists === 1);
    await settle();
    assert.equal(updates.length, relistUpdates, 'no update for objects the relist found unchanged');
    assert.ok(informer.stats().compressed >= packedBefore, 'and they stay packed');
    assert.equal(informer.stats().objects, FLEET.length - 1);
  });

  it('objects packing would not shrink stay text and are not tried again; Secrets are never packed', async () => {
    const random = Array.from({ length: 30 }, (_, i): KubeObject => ({ metadata: { namespace: 'apps', name: `blob-${String(i)}` }, data: { blob: randomBytes(4000).toString('base64') } }));
    const { informer } = started(random);
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(10_000));
    const text = informer.stats().retainedBytes;
    await compactorPassed();
    // The objects after the dictionary's samples do not pack against it: the cache holds none.
    assert.equal(informer.stats().compressed, 0);
    assert.ok(informer.stats().retainedBytes > text * 0.9);
    assert.equal(informer.store.get('apps/blob-4')?.metadata?.name, 'blob-4');

    const secrets = new FakeResourceClient({ info: { gvk: { group: '', version: 'v1', kind: 'Secret' }, resource: 'secrets', namespaced: true, verbs: ['list', 'watch'] } });
    for (const obj of FLEET) secrets.upsert(obj);
    const secretInformer = new ResourceInformer({ client: secrets, objects: 'compressed', compressAfterMs: 100 });
    running.push(secretInformer);
    secretInformer.start();
    await secretInformer.waitForSync(AbortSignal.timeout(10_000));
    await compactorPassed();
    assert.equal(secretInformer.stats().compressed, 0, 'a compressed size could tell what repeats in a Secret');
  });

  it('objects read lately stay text; the option is checked', async () => {
    const { informer } = started(FLEET, { decodedCacheSize: 8 });
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(10_000));
    for (let i = 0; i < 8; i++) informer.store.get(`apps/web-${String(i)}`);
    await eventually('the rest packed', () => informer.stats().compressed === FLEET.length - 8, { timeoutMs: 10_000 });
    await compactorPassed();
    assert.equal(informer.stats().compressed, FLEET.length - 8, 'the 8 in the decoded cache were left as text');
    const client = new FakeResourceClient();
    assert.throws(() => new ResourceInformer({ client, objects: 'compressed', compressAfterMs: 10 }), /compressAfterMs must be at least 100/);
  });

  it('packing frees the text: the heap holds a fraction of what the same objects held as text', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const many = Array.from({ length: 4_000 }, (_, i) => deployment(i));
    const { informer } = started(many, { compressAfterMs: 100, decodedCacheSize: 0 });
    gc();
    const base = process.memoryUsage().heapUsed;
    informer.start();
    await informer.waitForSync(AbortSignal.timeout(20_000));
    gc();
    const asText = process.memoryUsage().heapUsed - base;
    await eventually('every object packed', () => informer.stats().compressed === many.length, 30_000);
    gc();
    const packed = process.memoryUsage().heapUsed - base;
    // A uid sliced from the text would keep each whole text alive (a V8 sliced string): then packed ≈ as text.
    assert.ok(packed < asText / 2, `${String(Math.round(packed / many.length))} B/object packed, ${String(Math.round(asText / many.length))} B/object as text`);
  });

  it('a dictionary of the cache\'s own objects shrinks a similar object far more than packing alone', () => {
    const texts = FLEET.map((o) => JSON.stringify(o));
    const textBytes = texts.reduce((sum, t) => sum + t.length, 0);
    const dictionary = dictionaryFrom(texts.slice(0, 6), textBytes);
    assert.ok(dictionary !== undefined && dictionary.length <= textBytes / 8 && dictionary.length > 4096, `${String(dictionary?.length)} B`);
    assert.equal(dictionaryFrom(texts.slice(0, 6), 8 * 1024), undefined, 'a cache of 8 KiB of text is not worth a dictionary');
    const random = Array.from({ length: 20 }, () => randomBytes(1_500).toString('base64'));
    assert.equal(dictionaryFrom(random, 1 << 20), undefined, 'objects that do not pack against their samples get none');
    const sample = texts[30] ?? '';
    const packed = pack(sample, dictionary);
    const alone = lzPack(sample, new Uint8Array(0), Number.MAX_SAFE_INTEGER) ?? '';
    assert.ok(packed !== undefined);
    assert.ok(packed.length < alone.length / 3, `${String(packed.length)} with the dictionary, ${String(alone.length)} without`);
    assert.equal(pack(sample, new Uint8Array(0)), undefined, 'without one it saves less than a third: kept as text');
    assert.equal(packed.text(), sample);
    assert.equal(pack(randomBytes(600).toString('base64'), dictionary), undefined, 'random text is not worth it');
  });
});
