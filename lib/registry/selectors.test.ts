import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../transport/index.ts';
import { fieldMatcher, labelMatcher } from './index.ts';

const obj = (labels: Record<string, string>, extra: Record<string, unknown> = {}): KubeObject => ({ metadata: { name: 'x', namespace: 'ns', labels }, ...extra });

describe('labelMatcher', () => {
  it('evaluates equality, set, existence and numeric requirements as the API server does', () => {
    const cases: [string, Record<string, string>, boolean][] = [
      ['app=web', { app: 'web' }, true],
      ['app==web', { app: 'db' }, false],
      ['app!=web', {}, true],
      ['env in (a,b)', { env: 'b' }, true],
      ['env in (a,b)', {}, false],
      ['env notin (a, b)', {}, true],
      ['env notin (a,b)', { env: 'a' }, false],
      ['canary', { canary: '' }, true],
      ['!canary', { canary: '' }, false],
      ['app=web,env in (a,b),!legacy', { app: 'web', env: 'a' }, true],
      ['app=web,env in (a,b),!legacy', { app: 'web', env: 'a', legacy: 'y' }, false],
      ['replicas>2', { replicas: '3' }, true],
      ['replicas<2', { replicas: '3' }, false],
      ['example.com/tier=db', { 'example.com/tier': 'db' }, true],
      ['', { any: 'thing' }, true],
    ];
    for (const [selector, labels, expected] of cases) assert.equal(labelMatcher(selector)(obj(labels)), expected, `${selector} on ${JSON.stringify(labels)}`);
  });

  it('rejects malformed selectors with a TypeError naming the option', () => {
    for (const bad of ['a in (b', 'a)', 'a=b,', '=b', 'a=b c', 'a>x', 'a=-b']) {
      assert.throws(() => labelMatcher(bad, 'q.labelSelector'), (err: unknown) => err instanceof TypeError && err.message.includes('q.labelSelector'), bad);
    }
  });
});

describe('fieldMatcher', () => {
  it('compares dotted JSON paths as strings, absent as empty', () => {
    const pod = obj({}, { spec: { nodeName: 'n1', replicas: 2 }, status: { phase: 'Running' } });
    assert.equal(fieldMatcher('metadata.name=x')(pod), true);
    assert.equal(fieldMatcher('metadata.namespace!=ns')(pod), false);
    assert.equal(fieldMatcher('spec.nodeName==n1,status.phase=Running')(pod), true);
    assert.equal(fieldMatcher('spec.replicas=2')(pod), true);
    assert.equal(fieldMatcher('spec.missing=')(pod), true);
    assert.equal(fieldMatcher('status.phase!=Running')(pod), false);
  });

  it('rejects malformed selectors with a TypeError naming the option', () => {
    for (const bad of ['nonsense', 'a..b=c', '=x']) {
      assert.throws(() => fieldMatcher(bad, 'q.fieldSelector'), (err: unknown) => err instanceof TypeError && err.message.includes('q.fieldSelector'), bad);
    }
  });
});
