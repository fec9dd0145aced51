// Cold sync at wire speed: the next LIST page is asked for as soon as its continue token is known
// (read from the start of the body), at most one page ahead and only for pages a caller took.
import assert from 'node:assert/strict';
import { createServer, type ServerResponse } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { ClusterConnection, createListLimiter } from './index.ts';
import { continueTokenOf } from './resource-client.ts';
import { closeServer, kubeConfigFor, listenLoopback, settle } from '../../fixtures/support/index.ts';

const configMaps = { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list'] } as const;
const PAGES = 5;

describe('LIST paging', () => {
  /** Page numbers in the order their requests arrived. */
  const requested: number[] = [];
  /** Pages whose body the server holds half-sent, by page number: sending the rest completes them. */
  const held = new Map<number, () => void>();
  const finished = new Set<number>();
  let holdPages = true;
  const server = createServer((req, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const page = Number(url.searchParams.get('continue') ?? '0');
    requested.push(page);
    const head = `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"7"${page + 1 < PAGES ? `,"continue":"${page + 1}"` : ''}},"items":[`;
    const rest = `{"metadata":{"name":"cm-${page}","namespace":"ns"}}]}`;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(head);
    res.on('finish', () => { finished.add(page); });
    const complete = (): void => { res.end(rest); };
    if (holdPages) held.set(page, complete);
    else complete();
  });
  let url = '';
  const listLimiter = createListLimiter(4);
  before(async () => { url = await listenLoopback(server); });
  after(async () => {
    await closeServer(server);
    await listLimiter.stop();
  });

  it('reads the continue token from the start of a body', () => {
    assert.equal(continueTokenOf(Buffer.from('{"kind":"List","metadata":{"resourceVersion":"1","continue":"ab\\"c"},"items":[{"metadata":{"continue":"no"}}')), 'ab"c');
    assert.equal(continueTokenOf(Buffer.from('{"kind":"List","metadata":{"resourceVersion":"1"},"items":[{"metadata":{"continue":"no"}}')), '', 'a last page');
    assert.equal(continueTokenOf(Buffer.from('{"kind":"List","metadata":{"resourceVersion":"1","cont')), undefined, 'not known yet');
  });

  it('asks for the next page while the current one is still arriving, one page ahead at most', async () => {
    requested.length = 0;
    held.clear();
    finished.clear();
    holdPages = true;
    // Requests the client has read to the end: page 1's token (at its start) was read before.
    let read = 0;
    const conn = new ClusterConnection({ name: 'pager', kubeConfig: kubeConfigFor(url), listLimiter, http2: false, onRequest: () => { read += 1; } });
    try {
      const client = conn.resourceClient(configMaps);
      const signal = AbortSignal.timeout(30_000);
      const first = client.list({ namespace: 'ns', limit: 1, signal });
      // Page 0 is half-sent and held: its token alone must bring the request for page 1.
      await eventually('page 1 is asked for before page 0 is complete', () => requested.includes(1) && !finished.has(0));
      held.get(0)?.();
      const page0 = await first;
      assert.equal(page0.metadata.continue, '1');
      // Page 1 completes, and no caller has taken it yet: nothing more is fetched ahead.
      held.get(1)?.();
      await eventually('the client read page 1 to its end', () => read === 2);
      await settle();
      assert.equal(listLimiter.held, 0, 'no page is fetched ahead of a page nobody took');
      assert.deepEqual(requested, [0, 1]);
      holdPages = false;
      const names = [page0.items[0]?.metadata?.name];
      let token: string | undefined = page0.metadata.continue;
      while (token !== undefined) {
        const page = await client.list({ namespace: 'ns', limit: 1, continue: token, signal });
        names.push(page.items[0]?.metadata?.name);
        token = page.metadata.continue;
      }
      assert.deepEqual(names, ['cm-0', 'cm-1', 'cm-2', 'cm-3', 'cm-4']);
      assert.deepEqual(requested, [0, 1, 2, 3, 4], 'each page asked for once');
    } finally {
      for (const complete of held.values()) complete();
      await conn.close();
    }
  });

  it('with objectText, every page (those fetched ahead too) carries its items as text and their metadata only', async () => {
    requested.length = 0;
    holdPages = false;
    const conn = new ClusterConnection({ name: 'pager', kubeConfig: kubeConfigFor(url), listLimiter, http2: false });
    try {
      const client = conn.resourceClient(configMaps);
      const signal = AbortSignal.timeout(30_000);
      const texts: string[] = [];
      let token: string | undefined;
      do {
        const page = await client.list({ namespace: 'ns', limit: 1, continue: token, dropManagedFields: true, objectText: true, signal });
        assert.deepEqual(page.items[0], { metadata: { name: `cm-${String(texts.length)}`, namespace: 'ns' } });
        texts.push(page.texts?.[0]?.text ?? 'none');
        token = page.metadata.continue;
      } while (token !== undefined);
      assert.deepEqual(texts, [0, 1, 2, 3, 4].map((p) => `{"metadata":{"name":"cm-${String(p)}","namespace":"ns"}}`));
      assert.deepEqual(requested, [0, 1, 2, 3, 4], 'pages fetched ahead were taken');
    } finally {
      await conn.close();
    }
  });

  it('drops a page fetched ahead when the next call asks for something else', async () => {
    requested.length = 0;
    holdPages = false;
    const conn = new ClusterConnection({ name: 'pager', kubeConfig: kubeConfigFor(url), listLimiter, http2: false });
    try {
      const client = conn.resourceClient(configMaps);
      const signal = AbortSignal.timeout(30_000);
      await client.list({ namespace: 'ns', limit: 1, signal });
      await eventually('page 1 was fetched ahead', () => requested.includes(1));
      // A new LIST from the start (as after an expired token): page 0 again, not the page ahead.
      const again = await client.list({ namespace: 'ns', limit: 1, signal });
      assert.equal(again.items[0]?.metadata?.name, 'cm-0');
      assert.deepEqual(requested.slice(0, 3), [0, 1, 0]);
    } finally {
      await conn.close();
    }
  });
});
