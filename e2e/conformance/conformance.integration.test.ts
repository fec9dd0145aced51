// Fidelity of the simulated API server: every case runs, unchanged, against a real kube-apiserver
// (from the harness) and against the simulator, through the same raw HTTP client. A failure on the
// simulated side is a bug in the simulator. Where the two must differ, the case says so in one line.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { eventually, useClusters } from '../harness/index.ts';
import type { RawResponse, WatchConnection } from '../../fixtures/sim/raw-client.ts';
import { realTarget, simulatedTarget, WIDGET, type Target } from './targets.ts';

const fixture = useClusters(1, { namePrefix: 'conformance' });

type Obj = Record<string, unknown> & {
  metadata: Record<string, unknown> & { name: string; namespace?: string; resourceVersion: string; uid: string; generation?: number; labels?: Record<string, string> };
};
interface List { kind?: string; metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number }; items: Obj[] }
interface Status { kind: 'Status'; code: number; reason: string; message: string; details?: Record<string, unknown>; metadata: { continue?: string } }

/** Server-side apply bookkeeping the simulator does not write; never part of a comparison. */
function strip<T>(value: T): T {
  if (Array.isArray(value)) return value.map(strip) as T;
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (k !== 'managedFields') out[k] = strip(v);
  return out as T;
}

function obj(res: RawResponse): Obj {
  assert.ok(res.status >= 200 && res.status < 300, `expected success, got ${res.status}: ${res.text}`);
  return strip(res.json as Obj);
}

function list(res: RawResponse): List {
  assert.equal(res.status, 200, res.text);
  return strip(res.json as List);
}

function status(res: RawResponse): Status {
  assert.equal((res.json as { kind?: unknown }).kind, 'Status', `expected a Status body, got HTTP ${res.status}: ${res.text}`);
  assert.equal((res.json as Status).code, res.status, 'the Status code is the HTTP status');
  return res.json as Status;
}

function names(l: List): string[] {
  return l.items.map((i) => i.metadata.name);
}

async function nextEvent(w: WatchConnection): Promise<{ type: string; object: Obj }> {
  const line = await w.nextEvent(15_000);
  return { type: line.type, object: strip(line.object as Obj) };
}

const WIDGETS_V = `/apis/${WIDGET.group}/${WIDGET.version}`;
/** storageVersionHash as both servers derive it: base64(sha256("group/version/Kind")[:8]). */
const WIDGET_HASH = createHash('sha256').update(`${WIDGET.group}/${WIDGET.version}/${WIDGET.kind}`).digest().subarray(0, 8).toString('base64');
let namespaceCounter = 0;

for (const kind of ['real', 'simulated'] as const) {
  describe(`conformance: ${kind} API server`, () => {
    let target: Target;
    before(async () => {
      const cluster = fixture.clusters[0];
      target = kind === 'real' ? await realTarget(cluster) : await simulatedTarget();
    }, { timeout: 120_000 });
    after(async () => { await target.close(); });

    const req = (method: string, path: string, options?: Parameters<Target['client']['request']>[2]): Promise<RawResponse> => target.client.request(method, path, options);
    /** A fresh namespace per case keeps cases independent on the shared real server. */
    async function namespace(): Promise<string> {
      namespaceCounter += 1;
      const name = `conf-${kind === 'real' ? 'r' : 's'}-${namespaceCounter}`;
      obj(await req('POST', '/api/v1/namespaces', { body: { metadata: { name } } }));
      return name;
    }
    const cms = (ns: string): string => `/api/v1/namespaces/${ns}/configmaps`;
    const widgets = (ns: string): string => `${WIDGETS_V}/namespaces/${ns}/${WIDGET.plural}`;
    const widget = (name: string, spec: Record<string, unknown> = {}): Record<string, unknown> => ({ apiVersion: `${WIDGET.group}/${WIDGET.version}`, kind: WIDGET.kind, metadata: { name }, spec });
    const mergePatch = { contentType: 'application/merge-patch+json' } as const;

    describe('discovery', () => {
      it('describes core resources identically', async () => {
        const api = (await req('GET', '/api')).json as { kind: string; versions: string[]; serverAddressByClientCIDRs: unknown[] };
        assert.deepEqual([api.kind, api.versions, api.serverAddressByClientCIDRs.length], ['APIVersions', ['v1'], 1]);
        const core = (await req('GET', '/api/v1')).json as { kind: string; apiVersion?: string; groupVersion: string; resources: { name: string }[] };
        assert.deepEqual([core.kind, core.apiVersion, core.groupVersion], ['APIResourceList', undefined, 'v1']);
        const pick = (n: string): unknown => core.resources.find((r) => r.name === n);
        assert.deepEqual(pick('configmaps'), { name: 'configmaps', singularName: 'configmap', namespaced: true, kind: 'ConfigMap', verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'], shortNames: ['cm'], storageVersionHash: 'qFsyl6wFWjQ=' });
        assert.deepEqual(pick('secrets'), { name: 'secrets', singularName: 'secret', namespaced: true, kind: 'Secret', verbs: ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'], storageVersionHash: 'S6u1pOWzb84=' });
        assert.deepEqual(pick('namespaces'), { name: 'namespaces', singularName: 'namespace', namespaced: false, kind: 'Namespace', verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'], shortNames: ['ns'], storageVersionHash: 'Q3oi5N2YM8M=' });
        assert.deepEqual(pick('namespaces/status'), { name: 'namespaces/status', singularName: '', namespaced: false, kind: 'Namespace', verbs: ['get', 'patch', 'update'] });
        // Differs: the real server serves ~60 more core resources (pods, services, ...) the simulator has not been given.
      });

      it('describes a custom resource like its CRD', async () => {
        const groups = (await req('GET', '/apis')).json as { kind: string; groups: { name: string }[] };
        assert.equal(groups.kind, 'APIGroupList');
        const versions = [{ groupVersion: `${WIDGET.group}/v1`, version: 'v1' }];
        assert.deepEqual(groups.groups.find((g) => g.name === WIDGET.group), { name: WIDGET.group, versions, preferredVersion: versions[0] });
        assert.deepEqual((await req('GET', `/apis/${WIDGET.group}`)).json, { kind: 'APIGroup', apiVersion: 'v1', name: WIDGET.group, versions, preferredVersion: versions[0] });
        assert.deepEqual((await req('GET', WIDGETS_V)).json, {
          kind: 'APIResourceList', apiVersion: 'v1', groupVersion: `${WIDGET.group}/v1`, resources: [
            { name: 'widgets', singularName: 'widget', namespaced: true, kind: 'Widget', verbs: ['delete', 'deletecollection', 'get', 'list', 'patch', 'create', 'update', 'watch'], shortNames: ['wd'], categories: ['fleetcache'], storageVersionHash: WIDGET_HASH },
            { name: 'widgets/status', singularName: '', namespaced: true, kind: 'Widget', verbs: ['get', 'patch', 'update'] },
          ],
        });
      });

      it('answers /version, /readyz and unknown paths alike', async () => {
        const version = (await req('GET', '/version')).json as Record<string, string>;
        assert.deepEqual([version.major, version.minor, version.gitVersion], ['1', '34', 'v1.34.4']);
        const ready = await req('GET', '/readyz');
        assert.deepEqual([ready.status, ready.text, ready.headers['content-type']], [200, 'ok', 'text/plain; charset=utf-8']);
        const group = await req('GET', '/apis/nope.example.com/v1');
        assert.deepEqual([group.status, group.text], [404, '404 page not found\n']);
        assert.deepEqual((await req('GET', '/api/v1/nopes')).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'the server could not find the requested resource', reason: 'NotFound', details: {}, code: 404 });
        assert.deepEqual((await req('GET', '/api/v1/configmaps/x')).json, (await req('GET', '/api/v1/nopes')).json, 'a namespaced item needs its namespace');
        assert.deepEqual((await req('POST', '/api/v1/namespaces/default/configmaps/x', { body: {} })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'the server does not allow this method on the requested resource', reason: 'MethodNotAllowed', details: {}, code: 405 });
      });
    });

    describe('authentication', () => {
      it('answers 401 to a wrong token and 403 to anonymous requests, except public paths', async () => {
        assert.deepEqual((await req('GET', '/version', { token: 'wrong' })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Unauthorized', reason: 'Unauthorized', code: 401 });
        assert.deepEqual((await req('GET', '/api', { token: null })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'forbidden: User "system:anonymous" cannot get path "/api"', reason: 'Forbidden', details: {}, code: 403 });
        const denied = status(await req('GET', '/api/v1/namespaces/default/configmaps', { token: null }));
        assert.deepEqual([denied.reason, denied.message, denied.details], ['Forbidden', 'configmaps is forbidden: User "system:anonymous" cannot list resource "configmaps" in API group "" in the namespace "default"', { kind: 'configmaps' }]);
        assert.equal((await req('GET', '/version', { token: null })).status, 200);
      });
    });

    describe('create, read, update, delete', () => {
      it('creates with server-set metadata and refuses what the server refuses', async () => {
        const ns = await namespace();
        const created = await req('POST', cms(ns), { body: { metadata: { name: 'a', labels: { x: '1' } }, data: { k: 'v' } } });
        assert.equal(created.status, 201);
        const a = obj(created);
        assert.deepEqual(Object.keys(a), ['kind', 'apiVersion', 'metadata', 'data']);
        assert.deepEqual(Object.keys(a.metadata), ['name', 'namespace', 'uid', 'resourceVersion', 'creationTimestamp', 'labels']);
        assert.match(a.metadata.uid, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
        assert.match(a.metadata.creationTimestamp as string, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
        assert.deepEqual(obj(await req('GET', `${cms(ns)}/a`)), a);

        assert.deepEqual((await req('POST', cms(ns), { body: { metadata: { name: 'a' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'configmaps "a" already exists', reason: 'AlreadyExists', details: { name: 'a', kind: 'configmaps' }, code: 409 });
        assert.deepEqual((await req('POST', '/api/v1/namespaces/conf-missing/configmaps', { body: { metadata: { name: 'a' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'namespaces "conf-missing" not found', reason: 'NotFound', details: { name: 'conf-missing', kind: 'namespaces' }, code: 404 });
        assert.deepEqual((await req('POST', cms(ns), { body: { metadata: { name: 'b', namespace: 'default' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'the namespace of the provided object does not match the namespace sent on the request', reason: 'BadRequest', code: 400 });
        assert.deepEqual(status(await req('POST', cms(ns), { body: { metadata: { name: 'Bad_Name' } } })), {
          kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', reason: 'Invalid', code: 422,
          message: 'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \'-\' or \'.\', and must start and end with an alphanumeric character (e.g. \'example.com\', regex used for validation is \'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\')',
          details: { name: 'Bad_Name', kind: 'ConfigMap', causes: [{ reason: 'FieldValueInvalid', message: 'Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \'-\' or \'.\', and must start and end with an alphanumeric character (e.g. \'example.com\', regex used for validation is \'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\')', field: 'metadata.name' }] },
        });
        assert.deepEqual((await req('POST', cms(ns), { body: { metadata: {} } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required', reason: 'Invalid', details: { kind: 'ConfigMap', causes: [{ reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' }] }, code: 422 });
        const wrongKind = status(await req('POST', cms(ns), { body: { kind: 'Secret', apiVersion: 'v1', metadata: { name: 'c' } } }));
        // Differs: after the colon the real server names its internal conversion; the simulator says the kind is not this resource's.
        assert.deepEqual([wrongKind.code, wrongKind.reason, wrongKind.message.split(':')[0]], [400, 'BadRequest', 'Secret in version "v1" cannot be handled as a ConfigMap']);
        assert.deepEqual((await req('GET', `${cms(ns)}/zz`)).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'configmaps "zz" not found', reason: 'NotFound', details: { name: 'zz', kind: 'configmaps' }, code: 404 });
        const generated = obj(await req('POST', cms(ns), { body: { metadata: { generateName: 'gen-' } } }));
        assert.match(generated.metadata.name, /^gen-[a-z0-9]{5}$/);
      });

      it('updates with optimistic concurrency, and a no-op update writes nothing', async () => {
        const ns = await namespace();
        const a = obj(await req('POST', cms(ns), { body: { metadata: { name: 'a' }, data: { k: '1' } } }));
        const conflict = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again', reason: 'Conflict', details: { name: 'a', kind: 'configmaps' }, code: 409 };
        assert.deepEqual((await req('PUT', `${cms(ns)}/a`, { body: { ...a, metadata: { ...a.metadata, resourceVersion: '1' }, data: { k: '2' } } })).json, conflict);
        const same = obj(await req('PUT', `${cms(ns)}/a`, { body: a }));
        assert.equal(same.metadata.resourceVersion, a.metadata.resourceVersion);
        const changed = obj(await req('PUT', `${cms(ns)}/a`, { body: { ...a, data: { k: '2' } } }));
        assert.ok(Number(changed.metadata.resourceVersion) > Number(a.metadata.resourceVersion));
        const unconditional = obj(await req('PUT', `${cms(ns)}/a`, { body: { metadata: { name: 'a' }, data: { k: '3' } } }));
        assert.deepEqual([unconditional.metadata.uid, unconditional.metadata.creationTimestamp, unconditional.data], [a.metadata.uid, a.metadata.creationTimestamp, { k: '3' }]);
        assert.deepEqual((await req('PUT', `${cms(ns)}/a`, { body: { metadata: { name: 'b' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'the name of the object (b) does not match the name on the URL (a)', reason: 'BadRequest', code: 400 });
        assert.deepEqual((await req('PUT', `${cms(ns)}/zz`, { body: { metadata: { name: 'zz' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'configmaps "zz" not found', reason: 'NotFound', details: { name: 'zz', kind: 'configmaps' }, code: 404 });
        const uid = status(await req('PUT', `${cms(ns)}/a`, { body: { metadata: { name: 'a', uid: '1234' } } }));
        assert.deepEqual([uid.reason, uid.message], ['Conflict', `Operation cannot be fulfilled on configmaps "a": StorageError: invalid object, Code: 4, Key: /registry/configmaps/${ns}/a, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: 1234, UID in object meta: ${a.metadata.uid}`]);
      });

      it('patches: merge and JSON patches, preconditions and unsupported types', async () => {
        const ns = await namespace();
        const a = obj(await req('POST', cms(ns), { body: { metadata: { name: 'a' }, data: { k: '1', drop: 'x' } } }));
        assert.deepEqual(obj(await req('PATCH', `${cms(ns)}/a`, { body: { data: { k: '2', drop: null } }, ...mergePatch })).data, { k: '2' });
        assert.deepEqual(obj(await req('PATCH', `${cms(ns)}/a`, { body: [{ op: 'add', path: '/data/j', value: '3' }], contentType: 'application/json-patch+json' })).data, { k: '2', j: '3' });
        assert.equal(status(await req('PATCH', `${cms(ns)}/a`, { body: { metadata: { resourceVersion: a.metadata.resourceVersion } }, ...mergePatch })).reason, 'Conflict');
        assert.deepEqual((await req('PATCH', `${cms(ns)}/a`, { body: [{ op: 'test', path: '/data/k', value: 'no' }], contentType: 'application/json-patch+json' })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'the server rejected our request due to an error in our request', reason: 'Invalid', details: {}, code: 422 });
        assert.deepEqual((await req('PATCH', `${cms(ns)}/a`, { body: {}, contentType: 'text/plain' })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: '415: Unsupported Media Type', reason: 'UnsupportedMediaType', details: {}, code: 415 });
        assert.deepEqual((await req('PATCH', `${cms(ns)}/zz`, { body: {}, ...mergePatch })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'configmaps "zz" not found', reason: 'NotFound', details: { name: 'zz', kind: 'configmaps' }, code: 404 });
        obj(await req('POST', widgets(ns), { body: widget('w') }));
        assert.deepEqual((await req('PATCH', `${widgets(ns)}/w`, { body: { spec: { a: 1 } }, contentType: 'application/strategic-merge-patch+json' })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml', reason: 'UnsupportedMediaType', code: 415 });
      });

      it('deletes with the same answers and preconditions', async () => {
        const ns = await namespace();
        const a = obj(await req('POST', cms(ns), { body: { metadata: { name: 'a' } } }));
        assert.deepEqual((await req('DELETE', `${cms(ns)}/a`, { body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { resourceVersion: '1' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `Operation cannot be fulfilled on ConfigMap "a": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (${a.metadata.resourceVersion}). The object might have been modified`, reason: 'Conflict', details: { name: 'a', kind: 'ConfigMap' }, code: 409 });
        assert.deepEqual((await req('DELETE', `${cms(ns)}/a`, { body: { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid: 'nope' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition (nope) does not match the UID in record (${a.metadata.uid}). The object might have been deleted and then recreated`, reason: 'Conflict', details: { name: 'a', kind: 'ConfigMap' }, code: 409 });
        const deleted = await req('DELETE', `${cms(ns)}/a`);
        assert.deepEqual([deleted.status, deleted.json], [200, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name: 'a', kind: 'configmaps', uid: a.metadata.uid } }]);
        assert.equal((await req('DELETE', `${cms(ns)}/a`)).status, 404);
        const w = obj(await req('POST', widgets(ns), { body: widget('w') }));
        assert.deepEqual((await req('DELETE', `${widgets(ns)}/w`)).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', details: { name: 'w', group: WIDGET.group, kind: 'widgets', uid: w.metadata.uid } });
      });

      it('holds objects with finalizers until the last one is removed', async () => {
        const ns = await namespace();
        obj(await req('POST', cms(ns), { body: { metadata: { name: 'f', finalizers: ['example.com/hold'] } } }));
        const held = obj(await req('DELETE', `${cms(ns)}/f`));
        assert.deepEqual([typeof held.metadata.deletionTimestamp, held.metadata.deletionGracePeriodSeconds, held.metadata.finalizers], ['string', 0, ['example.com/hold']]);
        assert.deepEqual(obj(await req('DELETE', `${cms(ns)}/f`)), held, 'deleting again changes nothing');
        const adding = status(await req('PATCH', `${cms(ns)}/f`, { body: { metadata: { finalizers: ['example.com/hold', 'example.com/more'] } }, ...mergePatch }));
        assert.deepEqual([adding.code, adding.message], [422, 'ConfigMap "f" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/more"}']);
        const released = obj(await req('PATCH', `${cms(ns)}/f`, { body: { metadata: { finalizers: null } }, ...mergePatch }));
        assert.equal(released.metadata.resourceVersion, held.metadata.resourceVersion, 'the answer still carries the last stored resourceVersion');
        assert.equal((await req('GET', `${cms(ns)}/f`)).status, 404);
      });

      it('terminates a namespace and refuses new content in it', async () => {
        const ns = await namespace();
        const created = obj(await req('GET', `/api/v1/namespaces/${ns}`));
        assert.deepEqual([created.metadata.labels, created.spec, created.status], [{ 'kubernetes.io/metadata.name': ns }, { finalizers: ['kubernetes'] }, { phase: 'Active' }]);
        const terminating = obj(await req('DELETE', `/api/v1/namespaces/${ns}`));
        assert.deepEqual([typeof terminating.metadata.deletionTimestamp, terminating.status], ['string', { phase: 'Terminating' }]);
        assert.deepEqual((await req('POST', cms(ns), { body: { metadata: { name: 'a' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `configmaps "a" is forbidden: unable to create new content in namespace ${ns} because it is being terminated`, reason: 'Forbidden', details: { name: 'a', kind: 'configmaps', causes: [{ reason: 'NamespaceTerminating', message: `namespace ${ns} is being terminated`, field: 'metadata.namespace' }] }, code: 403 });
        // Differs: the simulator then empties and removes the namespace (a namespace controller's job); the harness runs no controller-manager, so the real one stays Terminating.
      });

      it('deletes a collection by selector and answers with what it deleted', async () => {
        const ns = await namespace();
        for (let i = 0; i < 3; i++) obj(await req('POST', cms(ns), { body: { metadata: { name: `c${i}`, labels: { parity: i % 2 === 0 ? 'even' : 'odd' } } } }));
        const deleted = list(await req('DELETE', `${cms(ns)}?labelSelector=parity%3Deven`));
        assert.deepEqual([deleted.kind, names(deleted), deleted.items[0]?.kind], ['ConfigMapList', ['c0', 'c2'], undefined]);
        assert.deepEqual(names(list(await req('GET', cms(ns)))), ['c1']);
      });

      it('converts secret stringData and rejects bad base64', async () => {
        const ns = await namespace();
        const s = obj(await req('POST', `/api/v1/namespaces/${ns}/secrets`, { body: { metadata: { name: 's' }, stringData: { a: 'b' }, data: { c: 'ZA==' } } }));
        assert.deepEqual([s.data, s.type, s.stringData], [{ a: 'Yg==', c: 'ZA==' }, 'Opaque', undefined]);
        assert.deepEqual((await req('POST', `/api/v1/namespaces/${ns}/secrets`, { body: { metadata: { name: 't' }, data: { c: '!!!' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 0', reason: 'BadRequest', code: 400 });
      });
    });

    describe('custom resources', () => {
      it('track generation, the status subresource and server key order', async () => {
        const ns = await namespace();
        const created = await req('POST', widgets(ns), { body: { ...widget('w', { size: 1 }), status: { ready: true } } });
        const w = obj(created);
        assert.deepEqual([w.metadata.generation, w.status], [1, undefined]);
        assert.deepEqual(Object.keys(w), ['apiVersion', 'kind', 'metadata', 'spec'], 'custom resources are serialized with sorted keys');
        const noKind = status(await req('POST', widgets(ns), { body: { metadata: { name: 'x' } } }));
        assert.deepEqual([noKind.code, noKind.message.split(':')[0]], [400, 'the object provided is unrecognized (must be of type Widget)']);
        assert.deepEqual((await req('PUT', `${widgets(ns)}/w`, { body: { ...w, metadata: { name: 'w' } } })).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `widgets.${WIDGET.group} "w" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update`, reason: 'Invalid', details: { name: 'w', group: WIDGET.group, kind: 'widgets', causes: [{ reason: 'FieldValueInvalid', message: 'Invalid value: 0: must be specified for an update', field: 'metadata.resourceVersion' }] }, code: 422 });
        const ignored = obj(await req('PUT', `${widgets(ns)}/w`, { body: { ...w, status: { ready: true } } }));
        assert.deepEqual([ignored.metadata.resourceVersion, ignored.status], [w.metadata.resourceVersion, undefined], 'status through the main resource is ignored: nothing changed');
        const labelled = obj(await req('PUT', `${widgets(ns)}/w`, { body: { ...w, metadata: { ...w.metadata, labels: { a: 'b' } } } }));
        assert.equal(labelled.metadata.generation, 1);
        const resized = obj(await req('PUT', `${widgets(ns)}/w`, { body: { ...labelled, spec: { size: 2 } } }));
        assert.equal(resized.metadata.generation, 2);
        const statused = obj(await req('PUT', `${widgets(ns)}/w/status`, { body: { ...resized, spec: { size: 9 }, status: { ready: true }, metadata: { ...resized.metadata, labels: { c: 'd' } } } }));
        assert.deepEqual([statused.metadata.generation, statused.spec, statused.status, statused.metadata.labels], [2, { size: 2 }, { ready: true }, { a: 'b' }]);
        const patched = obj(await req('PATCH', `${widgets(ns)}/w/status`, { body: { status: { ready: false } }, ...mergePatch }));
        assert.deepEqual([patched.metadata.generation, patched.status], [2, { ready: false }]);
        const l = list(await req('GET', widgets(ns)));
        assert.deepEqual([l.kind, l.metadata.continue, l.items[0]?.kind], ['WidgetList', '', 'Widget'], 'custom resource lists keep kind on items and send an empty continue');
      });
    });

    describe('list', () => {
      async function seed(ns: string, n: number): Promise<void> {
        for (let i = 0; i < n; i++) obj(await req('POST', cms(ns), { body: { metadata: { name: `c${i}`, labels: { i: String(i), parity: i % 2 === 0 ? 'even' : 'odd' } } } }));
      }

      it('selects by labels and fields, with the same errors', async () => {
        const ns = await namespace();
        await seed(ns, 4);
        const get = async (q: string): Promise<string[]> => names(list(await req('GET', `${cms(ns)}?${q}`)));
        assert.deepEqual(await get('labelSelector=parity%3Deven'), ['c0', 'c2']);
        assert.deepEqual(await get('labelSelector=parity%3D%3Dodd,i!%3D3'), ['c1']);
        assert.deepEqual(await get('labelSelector=i%20in%20(0,3),parity'), ['c0', 'c3']);
        assert.deepEqual(await get('labelSelector=i%20notin%20(0,3),!missing'), ['c1', 'c2']);
        assert.deepEqual(await get('labelSelector=i%3E1'), ['c2', 'c3']);
        assert.deepEqual(await get('fieldSelector=metadata.name%3Dc1'), ['c1']);
        assert.deepEqual(names(list(await req('GET', `/api/v1/configmaps?fieldSelector=metadata.namespace%3D${ns},metadata.name!%3Dc0`))), ['c1', 'c2', 'c3']);
        const errors: [string, string][] = [
          ['fieldSelector=spec.x%3D1', '"spec.x" is not a known field selector: only "metadata.name", "metadata.namespace"'],
          ['fieldSelector=metadata.name', "invalid selector: 'metadata.name'; can't understand 'metadata.name'"],
          ['fieldSelector=metadata.name%3Dx%3Dy', 'invalid field selector: unescaped character in value: 61'],
          ['labelSelector=!', "unable to parse requirement: found '', expected: identifier"],
          ['labelSelector=a%3Db%3Dc', "found '=', expected: ',' or 'end of string'"],
          ['labelSelector=a%3Ex', 'unable to parse requirement: values[0]: Invalid value: "x": for \'Gt\', \'Lt\' operators, the value must be an integer'],
        ];
        for (const [q, message] of errors) {
          assert.deepEqual((await req('GET', `${cms(ns)}?${q}`)).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason: 'BadRequest', code: 400 }, q);
        }
      });

      it('selects custom resources by a CRD selectable field', async () => {
        const ns = await namespace();
        for (const [name, color] of [['a', 'red'], ['b', 'blue']] as const) obj(await req('POST', widgets(ns), { body: widget(name, { color }) }));
        assert.deepEqual(names(list(await req('GET', `${widgets(ns)}?fieldSelector=spec.color%3Dblue`))), ['b']);
        assert.equal(status(await req('GET', `${widgets(ns)}?fieldSelector=spec.size%3D1`)).code, 400);
      });

      it('pages at one consistent resourceVersion', async () => {
        const ns = await namespace();
        await seed(ns, 5);
        const first = list(await req('GET', `${cms(ns)}?limit=2`));
        assert.deepEqual([names(first), first.metadata.remainingItemCount, typeof first.metadata.continue], [['c0', 'c1'], 3, 'string']);
        obj(await req('POST', cms(ns), { body: { metadata: { name: 'c9' } } }));
        await req('DELETE', `${cms(ns)}/c4`);
        const second = list(await req('GET', `${cms(ns)}?limit=2&continue=${first.metadata.continue ?? ''}`));
        assert.deepEqual([names(second), second.metadata.resourceVersion, second.metadata.remainingItemCount], [['c2', 'c3'], first.metadata.resourceVersion, 1]);
        const third = list(await req('GET', `${cms(ns)}?limit=2&continue=${second.metadata.continue ?? ''}`));
        assert.deepEqual([names(third), third.metadata.continue], [['c4'], undefined], 'the deleted c4 is still there, the new c9 is not');
        const filtered = list(await req('GET', `${cms(ns)}?limit=1&labelSelector=parity%3Dodd`));
        assert.deepEqual([names(filtered), filtered.metadata.remainingItemCount, typeof filtered.metadata.continue], [['c1'], undefined, 'string'], 'no remainingItemCount with a selector');
        assert.deepEqual((await req('GET', `${cms(ns)}?continue=${first.metadata.continue ?? ''}&resourceVersion=5`)).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'specifying resource version is not allowed when using continue', reason: 'BadRequest', code: 400 });
        const bad = status(await req('GET', `${cms(ns)}?continue=zzz`));
        // Differs: after "continue key is not valid:" each server names its own decoding error.
        assert.deepEqual([bad.code, bad.reason, bad.message.startsWith('invalid continue token: continue key is not valid: ')], [400, 'BadRequest', true]);
      });

      it('honours resourceVersion semantics: 0, exact, legacy exact and too large', async () => {
        const ns = await namespace();
        await seed(ns, 3);
        // resourceVersion=0 is "any": the real server answers from its watch cache, which may not
        // have seen the last create yet, so wait for it; a server that honoured limit never shows 3.
        const any = await eventually('a resourceVersion=0 list shows every object', async () => {
          const answer = list(await req('GET', `${cms(ns)}?resourceVersion=0&limit=1`));
          return names(answer).length > 1 ? answer : undefined;
        }, 10_000);
        assert.deepEqual([names(any), any.metadata.continue], [['c0', 'c1', 'c2'], undefined], 'resourceVersion=0 is served from the watch cache, which ignores limit');
        const c1 = obj(await req('GET', `${cms(ns)}/c1`));
        const exact = list(await req('GET', `${cms(ns)}?resourceVersion=${c1.metadata.resourceVersion}&resourceVersionMatch=Exact`));
        assert.deepEqual([names(exact), exact.metadata.resourceVersion], [['c0', 'c1'], c1.metadata.resourceVersion]);
        const legacy = list(await req('GET', `${cms(ns)}?resourceVersion=${c1.metadata.resourceVersion}&limit=10`));
        assert.deepEqual(names(legacy), ['c0', 'c1'], 'limit with a resourceVersion is an exact read');
        const notOlder = list(await req('GET', `${cms(ns)}?resourceVersion=${c1.metadata.resourceVersion}`));
        assert.deepEqual(names(notOlder), ['c0', 'c1', 'c2']);
        const tooLarge = status(await req('GET', `${cms(ns)}?resourceVersion=999999999`));
        assert.deepEqual([tooLarge.code, tooLarge.reason, tooLarge.details], [504, 'Timeout', { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }], retryAfterSeconds: 1 }]);
        assert.match(tooLarge.message, /^Timeout: Too large resource version: 999999999, current: \d+$/);
        assert.deepEqual((await req('GET', `${cms(ns)}?resourceVersion=abc`)).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'invalid resource version: resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax', reason: 'BadRequest', code: 400 });
        assert.deepEqual((await req('GET', `${cms(ns)}?resourceVersionMatch=Exact`)).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided', reason: 'Invalid', details: { group: 'meta.k8s.io', kind: 'ListOptions', causes: [{ reason: 'FieldValueForbidden', message: 'Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided', field: 'resourceVersionMatch' }] }, code: 422 });
      });
    });

    describe('watch', () => {
      it('streams ADDED, MODIFIED and DELETED after a list\'s resourceVersion', async () => {
        const ns = await namespace();
        const start = list(await req('GET', cms(ns)));
        const w = await target.client.watch(`${cms(ns)}?resourceVersion=${start.metadata.resourceVersion}`);
        try {
          assert.deepEqual([w.status, w.headers['content-type']], [200, 'application/json']);
          const created = obj(await req('POST', cms(ns), { body: { metadata: { name: 'a' }, data: { k: '1' } } }));
          const modified = obj(await req('PATCH', `${cms(ns)}/a`, { body: { data: { k: '2' } }, ...mergePatch }));
          obj(await req('DELETE', `${cms(ns)}/a`));
          const events = [await nextEvent(w), await nextEvent(w), await nextEvent(w)];
          assert.deepEqual(events.map((e) => e.type), ['ADDED', 'MODIFIED', 'DELETED']);
          assert.deepEqual(events[0]?.object, created);
          assert.deepEqual(events[1]?.object, modified);
          const gone = events[2]?.object;
          assert.ok(Number(gone?.metadata.resourceVersion) > Number(modified.metadata.resourceVersion), 'DELETED carries the deletion\'s resourceVersion');
          assert.deepEqual({ ...gone, metadata: { ...gone?.metadata, resourceVersion: '' } }, { ...modified, metadata: { ...modified.metadata, resourceVersion: '' } }, 'and the last state');
        } finally {
          w.close();
        }
      });

      it('turns selector transitions into ADDED and DELETED', async () => {
        const ns = await namespace();
        const a = obj(await req('POST', cms(ns), { body: { metadata: { name: 'a', labels: { on: 'yes' } } } }));
        const w = await target.client.watch(`${cms(ns)}?labelSelector=on%3Dyes&resourceVersion=${a.metadata.resourceVersion}`);
        try {
          const off = obj(await req('PATCH', `${cms(ns)}/a`, { body: { metadata: { labels: { on: 'no' } } }, ...mergePatch }));
          const out = await nextEvent(w);
          assert.deepEqual([out.type, out.object.metadata.labels, out.object.metadata.resourceVersion], ['DELETED', { on: 'yes' }, off.metadata.resourceVersion]);
          obj(await req('PATCH', `${cms(ns)}/a`, { body: { metadata: { labels: { on: 'yes' } } }, ...mergePatch }));
          assert.equal((await nextEvent(w)).type, 'ADDED');
        } finally {
          w.close();
        }
      });

      it('starts a watch without resourceVersion with the current state and the initial-events-end bookmark', async () => {
        const ns = await namespace();
        obj(await req('POST', cms(ns), { body: { metadata: { name: 'a' } } }));
        obj(await req('POST', widgets(ns), { body: widget('w') }));
        const w = await target.client.watch(`${cms(ns)}?allowWatchBookmarks=true`);
        const cw = await target.client.watch(`${widgets(ns)}?allowWatchBookmarks=true&resourceVersion=0`);
        try {
          assert.deepEqual([(await nextEvent(w)).type], ['ADDED']);
          const bookmark = await w.nextEvent();
          assert.deepEqual(Object.keys(bookmark.object), ['kind', 'apiVersion', 'metadata']);
          const meta = bookmark.object.metadata as Record<string, unknown>;
          assert.deepEqual([bookmark.type, Object.keys(meta), meta.annotations], ['BOOKMARK', ['resourceVersion', 'annotations'], { 'k8s.io/initial-events-end': 'true' }]);
          assert.equal((await nextEvent(cw)).type, 'ADDED');
          const crBookmark = await cw.nextEvent();
          assert.deepEqual([crBookmark.type, Object.keys(crBookmark.object), Object.keys(crBookmark.object.metadata as object)], ['BOOKMARK', ['apiVersion', 'kind', 'metadata'], ['annotations', 'resourceVersion']]);
        } finally {
          w.close();
          cw.close();
        }
        const plain = await target.client.watch(cms(ns));
        try {
          assert.equal((await nextEvent(plain)).type, 'ADDED');
          obj(await req('POST', cms(ns), { body: { metadata: { name: 'b' } } }));
          assert.equal((await nextEvent(plain)).type, 'ADDED', 'no bookmark unless allowed');
        } finally {
          plain.close();
        }
        // Differs: periodic bookmarks (a minute apart on the real server) are not compared; the simulator's interval is configurable.
      });

      it('streams initial events when asked explicitly, and only new events when not', async () => {
        const ns = await namespace();
        obj(await req('POST', cms(ns), { body: { metadata: { name: 'a' } } }));
        const listing = await target.client.watch(`${cms(ns)}?sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=`);
        const fresh = await target.client.watch(`${cms(ns)}?sendInitialEvents=false&resourceVersionMatch=NotOlderThan&resourceVersion=0`);
        try {
          assert.equal((await nextEvent(listing)).type, 'ADDED');
          const end = await nextEvent(listing);
          assert.deepEqual([end.type, end.object.metadata.annotations], ['BOOKMARK', { 'k8s.io/initial-events-end': 'true' }]);
          obj(await req('POST', cms(ns), { body: { metadata: { name: 'b' } } }));
          const first = await nextEvent(fresh);
          assert.deepEqual([first.type, first.object.metadata.name], ['ADDED', 'b'], 'no initial events without sendInitialEvents');
          assert.equal((await nextEvent(listing)).object.metadata.name, 'b');
        } finally {
          listing.close();
          fresh.close();
        }
      });

      it('ends at timeoutSeconds and refuses invalid watch options', async () => {
        const ns = await namespace();
        const started = Date.now();
        const w = await target.client.watch(`${cms(ns)}?resourceVersion=0&timeoutSeconds=1`);
        assert.deepEqual(await w.ended, { kind: 'end' });
        assert.ok(Date.now() - started >= 900);
        const sie = await target.client.watch(`${cms(ns)}?sendInitialEvents=true`);
        sie.close();
        assert.equal(sie.status, 422);
        const invalid = await req('GET', `${cms(ns)}?watch=true&resourceVersionMatch=NotOlderThan&resourceVersion=1`);
        assert.deepEqual(invalid.json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided', reason: 'Invalid', details: { group: 'meta.k8s.io', kind: 'ListOptions', causes: [{ reason: 'FieldValueForbidden', message: 'Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided', field: 'resourceVersionMatch' }] }, code: 422 });
      });
    });

    describe('after compaction', () => {
      it('answers 410 Expired to old resourceVersions: continue tokens, exact lists and watches', async () => {
        const ns = await namespace();
        for (let i = 0; i < 3; i++) obj(await req('POST', cms(ns), { body: { metadata: { name: `c${i}` } } }));
        const first = list(await req('GET', `${cms(ns)}?limit=1`));
        const old = first.metadata.resourceVersion;
        obj(await req('POST', cms(ns), { body: { metadata: { name: 'late' } } }));
        await target.compact();

        const expired = status(await req('GET', `${cms(ns)}?limit=1&continue=${first.metadata.continue ?? ''}`));
        assert.deepEqual([expired.code, expired.reason, expired.message], [410, 'Expired', 'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.']);
        const resumed = list(await req('GET', `${cms(ns)}?continue=${expired.metadata.continue ?? ''}`));
        assert.deepEqual(names(resumed), ['c1', 'c2', 'late'], 'the token in the 410 resumes at the latest state');

        assert.deepEqual((await req('GET', `${cms(ns)}?resourceVersion=${old}&resourceVersionMatch=Exact`)).json, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'The resourceVersion for the provided list is too old.', reason: 'Expired', code: 410 });

        const w = await target.client.watch(`${cms(ns)}?resourceVersion=${old}`);
        assert.equal(w.status, 200, 'a watch from a compacted resourceVersion starts, then fails');
        const error = await w.nextEvent();
        assert.equal(error.type, 'ERROR');
        assert.match((error.object as { message: string }).message, new RegExp(`^too old resource version: ${old} \\(\\d+\\)$`));
        assert.deepEqual({ ...error.object, message: '' }, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: '', reason: 'Expired', code: 410 });
        assert.deepEqual(await w.next(), { kind: 'end' });
      });
    });
  });
}

