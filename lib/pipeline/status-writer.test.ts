import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ClusterConnection } from '../transport/index.ts';
import { FakeClock, KubeApiError } from '../util/index.ts';
import { RecordingLogger } from '../../fixtures/support/index.ts';
import { StatusConflict, StatusWriter } from './status-writer.ts';
import type { Pipeline, PromotionRecord } from './types.ts';

interface Sent { readonly method: string; readonly path: string; readonly body?: unknown }

/** A management cluster that records every request and answers with `answer` (throw to fail). */
function writerWith(answer: (req: Sent) => unknown, options: { owned?: () => boolean; running?: () => boolean } = {}) {
  const sent: Sent[] = [];
  const fenced: string[] = [];
  const connection = { request: (req: Sent) => { sent.push(req); return Promise.resolve().then(() => answer(req)); } } as unknown as ClusterConnection;
  const writer = new StatusWriter({
    registry: { connectionFor: () => Promise.resolve(connection) },
    clock: new FakeClock(Date.parse('2026-01-01T00:00:00Z')),
    fence: (p, what) => {
      fenced.push(`${p.namespace}/${p.name}: ${what}`);
      if (options.owned?.() === false) throw new Error(`not the owner of ${p.namespace}/${p.name}`);
    },
    running: options.running ?? (() => true),
  });
  return { writer, sent, fenced };
}

const pipeline: Pipeline = { apiVersion: 'fleetcache.dev/v1alpha1', kind: 'Pipeline', metadata: { namespace: 'team-a', name: 'shop', uid: 'u1', resourceVersion: '7', generation: 2 } };
const record: PromotionRecord = { environment: 'prod', revision: '1.2.0', strategy: 'patch', state: 'Succeeded', attempts: 1, startedAt: '2026-01-01T00:00:00Z' };
const conflict = (): KubeApiError => new KubeApiError({ cluster: 'local', statusCode: 409, status: { reason: 'Conflict' } });

describe('StatusWriter', () => {
  it('checks the shard fence before every status PUT and Event, and sends nothing once it refuses', async () => {
    let owned = true;
    const { writer, sent, fenced } = writerWith(() => pipeline, { owned: () => owned });
    await writer.putStatus(pipeline, { observedGeneration: 2 });
    await writer.event(pipeline, 'Normal', 'Promoted', 'promoted', new RecordingLogger());
    assert.deepEqual(fenced, ['team-a/shop: the status', 'team-a/shop: the event Promoted']);
    assert.deepEqual(sent.map((r) => `${r.method} ${r.path}`), ['PUT /apis/fleetcache.dev/v1alpha1/namespaces/team-a/pipelines/shop/status', 'POST /api/v1/namespaces/team-a/events']);
    owned = false;
    await assert.rejects(writer.putStatus(pipeline, { observedGeneration: 2 }), /not the owner/);
    await assert.rejects(writer.event(pipeline, 'Warning', 'PromotionFailed', 'failed', new RecordingLogger()), /not the owner/, 'a refused fence ends the reconcile, it is not logged away');
    assert.equal(sent.length, 2, 'nothing sent after the fence refused');
  });

  it('writes a status only when it changed, and reports a conflict as false', async () => {
    const { writer, sent } = writerWith(() => { throw conflict(); });
    assert.equal(await writer.writeIfChanged({ ...pipeline, status: { observedGeneration: 2 } }, { observedGeneration: 2 }), true);
    assert.equal(sent.length, 0, 'an unchanged status is not written');
    assert.equal(await writer.writeIfChanged(pipeline, { observedGeneration: 2 }), false);
    await assert.rejects(writer.putStatus(pipeline, { observedGeneration: 2 }), StatusConflict);
    const put = sent[0];
    assert.equal((put?.body as Pipeline | undefined)?.metadata?.resourceVersion, '7', 'conditional on the resourceVersion read');
  });

  it('records an outcome against a concurrent writer: re-reads the Pipeline and sets just its record', async () => {
    const newer: Pipeline = { ...pipeline, metadata: { ...pipeline.metadata, resourceVersion: '8' }, status: { approvals: [] } };
    let puts = 0;
    const { writer, sent, fenced } = writerWith((req) => {
      if (req.method === 'GET') return newer;
      puts += 1;
      if (puts === 1) throw conflict();
      return req.body;
    });
    await writer.recordOutcome(pipeline, record);
    assert.deepEqual(sent.map((r) => r.method), ['PUT', 'GET', 'PUT']);
    assert.equal(fenced.length, 2, 'each PUT passes the fence');
    const body = sent[2]?.body as Pipeline;
    assert.equal(body.metadata?.resourceVersion, '8');
    assert.deepEqual(body.status?.approvals, [], 'what the other writer wrote is kept');
    assert.deepEqual(body.status.promotions, [record]);
  });

  it('gives up recording an outcome after five conflicts', async () => {
    const { writer, sent } = writerWith((req) => { if (req.method === 'GET') return pipeline; throw conflict(); });
    await assert.rejects(writer.recordOutcome(pipeline, record), StatusConflict);
    assert.equal(sent.filter((r) => r.method === 'PUT').length, 5);
  });

  it('logs an Event that could not be recorded instead of failing', async () => {
    const { writer } = writerWith(() => { throw new Error('connection refused'); });
    const log = new RecordingLogger();
    await writer.event(pipeline, 'Warning', 'Drifted', 'put back', log);
    assert.ok(log.lines.some((l) => l.message === 'could not record an event'));
  });

  it('writes nothing while the controller is not running', async () => {
    const { writer, sent } = writerWith(() => pipeline, { running: () => false });
    await assert.rejects(writer.putStatus(pipeline, { observedGeneration: 2 }), /PipelineController is not running/);
    assert.equal(sent.length, 0);
  });
});
