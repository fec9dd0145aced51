import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../transport/index.ts';
import { fieldMatcher, InvalidSelectorError, labelMatcher } from './index.ts';
import { MAX_SELECTOR_LENGTH, MAX_SELECTOR_TERMS, selectionOf } from './selectors.ts';

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

describe('selectionOf (a set target\'s selectors, canonical)', () => {
  it('writes equal selections the same way, so they share one cache key', () => {
    const same: [string, string][] = [
      ['a=1,b=2', 'b=2, a=1'],
      ['a=1', 'a==1'],
      ['a=1', 'a in (1)'],
      ['a!=1', 'a notin (1)'],
      ['env in (b,a)', 'env in (a, b, a)'],
      ['x,!y', '!y ,x,x'],
      ['n>2', 'n > 02'],
    ];
    for (const [a, b] of same) assert.deepEqual(selectionOf(a, undefined), selectionOf(b, undefined), `${a} ≡ ${b}`);
    assert.deepEqual(selectionOf('b=2, a=1', ' metadata.namespace==x , metadata.name=y'), { labels: 'a=1,b=2', fields: 'metadata.name=y,metadata.namespace=x' });
    assert.deepEqual(selectionOf('env in (b,a)', undefined).labels, 'env in (a,b)', 'the API\'s own spelling of a set');
    assert.deepEqual(selectionOf(' ', ''), { labels: '', fields: '' }, 'blank selects everything');
    assert.notDeepEqual(selectionOf('a=1', undefined), selectionOf('a=2', undefined));
  });

  it('refuses malformed, unsupported and oversized selectors with InvalidSelectorError listing what is accepted', () => {
    const refused: [string | undefined, string | undefined, string][] = [
      ['a in (b', undefined, 'unbalanced'],
      ['a=b c', undefined, 'cannot parse'],
      [undefined, 'spec.nodeName=n1', 'not a supported field'],
      [undefined, 'metadata.name=a\\,b', 'invalid value'],
      [Array.from({ length: MAX_SELECTOR_TERMS + 1 }, (_, i) => `k${i}`).join(','), undefined, 'requirements is over the limit'],
      ['a=1', Array.from({ length: MAX_SELECTOR_TERMS }, (_, i) => `metadata.name=n${i}`).join(','), 'requirements is over the limit'],
      [`a in (${'v,'.repeat(MAX_SELECTOR_LENGTH / 2)}v)`, undefined, 'characters is over the limit'],
    ];
    for (const [labels, fields, why] of refused) {
      assert.throws(() => selectionOf(labels, fields), (err: unknown) => err instanceof InvalidSelectorError && err.code === 'ERR_SELECTOR_INVALID' && err.message.includes(why) && err.message.includes('accepted: '), `${labels ?? ''} / ${fields ?? ''}`);
    }
  });
});
