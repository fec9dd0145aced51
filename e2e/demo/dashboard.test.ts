import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { freePort } from '../harness/index.ts';
import { dashboardLine } from './dashboard.ts';

async function serve(t: { after: (fn: () => Promise<void>) => void }, status: number): Promise<{ port: number; paths: string[] }> {
  const paths: string[] = [];
  const server: Server = createServer((req, res) => {
    paths.push(req.url ?? '');
    res.writeHead(req.url === '/dashboard/' ? status : 404, { 'content-type': 'text/html' }).end('<!doctype html><title>fleetcache</title>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => { server.close(() => { resolve(); }); }));
  return { port: (server.address() as AddressInfo).port, paths };
}

describe('dashboardLine', () => {
  it('gives the address, and that no token is needed, when the dashboard answers', async (t) => {
    const { port, paths } = await serve(t, 200);
    const line = await dashboardLine(port, (url) => `<${url}>`);
    assert.equal(line, `<http://127.0.0.1:${port}/dashboard/>  (open it in a browser; no token needed: the demo serves metrics over plain HTTP, --metrics-secure=false)`);
    assert.deepEqual(paths, ['/dashboard/']);
  });

  it('says what the server answered when there is no dashboard', async (t) => {
    const { port } = await serve(t, 404);
    assert.equal(await dashboardLine(port), `not served by this build of the service (GET http://127.0.0.1:${port}/dashboard/ answered 404)`);
  });

  it('says nothing answered when nothing listens on the port', async () => {
    const port = await freePort();
    assert.equal(await dashboardLine(port), `not served by this build of the service (GET http://127.0.0.1:${port}/dashboard/ answered nothing)`);
  });
});
