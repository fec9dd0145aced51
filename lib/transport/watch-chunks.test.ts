// ClusterConnection's onWatchChunk hook: it sees every byte of a watch response before the decoder
// hands out the events in it, and watching it loses nothing (even bytes that came before the first read).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, describe, it } from 'node:test';
import { ClusterConnection } from './index.ts';
import { kubeConfigFor } from '../../fixtures/support/index.ts';

const configMaps = { gvk: { group: '', version: 'v1', kind: 'ConfigMap' }, resource: 'configmaps', namespaced: true, verbs: ['list', 'watch'] } as const;

const line = (name: string, rv: number): string => `${JSON.stringify({ type: 'ADDED', object: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'apps', resourceVersion: String(rv) } } })}\n`;

describe('ClusterConnection onWatchChunk', () => {
  const sent: string[] = [line('early-1', 2), line('early-2', 3), line('late', 4)];
  const server = createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    // Two events at once, before the client reads anything; the third later, split in two writes.
    res.write(sent[0]);
    res.write(sent[1]);
    const late = sent[2] ?? '';
    setTimeout(() => { res.write(late.slice(0, 20)); }, 100);
    setTimeout(() => { res.write(late.slice(20)); }, 150);
  });
  after(() => { server.closeAllConnections(); server.close(); });

  it('is told every chunk before the decoder hands out its events; a throwing observer fails nothing', async (t) => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    for (const throwing of [false, true]) {
      let seen = '';
      const connection = new ClusterConnection({
        name: 'observed',
        kubeConfig: kubeConfigFor(url),
        onWatchChunk: (chunk) => {
          seen += chunk.toString();
          if (throwing) throw new Error('observer broke');
        },
      });
      after(() => connection.close());
      const stop = new AbortController();
      // Lost bytes would leave the loop below waiting for an event that never comes: fail instead.
      const bound = setTimeout(() => { stop.abort(new Error('not every event arrived within 5 s')); }, 5_000);
      t.after(() => { clearTimeout(bound); });
      const stream = await connection.resourceClient(configMaps).watch({ namespace: 'apps', resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true, signal: stop.signal });
      // The first two events arrive while nobody reads: the observer must not start the flow without the decoder.
      await new Promise((resolve) => setTimeout(resolve, 50));
      const names: string[] = [];
      for await (const batch of stream) {
        for (const event of batch) {
          const name = event.type === 'ADDED' ? event.object.metadata?.name : undefined;
          if (name === undefined) continue;
          names.push(name);
          // The bytes of the event were shown to the observer before the event was handed out.
          assert.ok(seen.includes(`"name":"${name}"`), `${name} handed out before the observer saw its bytes`);
        }
        if (names.length === 3) break;
      }
      stop.abort();
      assert.deepEqual(names, ['early-1', 'early-2', 'late'], 'every event decoded');
      assert.equal(seen, sent.join(''), 'the observer saw every byte, in order');
    }
  });

  it('refuses an observer that is not a function', () => {
    assert.throws(() => new ClusterConnection({ name: 'x', kubeConfig: kubeConfigFor('http://127.0.0.1:1'), onWatchChunk: 'no' as never }), /onWatchChunk must be a function/);
  });
});
