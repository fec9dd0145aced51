import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { realClock } from './clock.ts';
import {
  booleanOption, clockOption, functionOption, integerAtLeast, nonEmptyString, nonNegativeInteger, nonNegativeNumber, numberAbove, numberAtLeast,
  oneOf, positiveInteger, positiveNumber, stringOption,
} from './options.ts';

describe('option checks', () => {
  it('return the value they accept', () => {
    assert.equal(positiveNumber('C', 'o', 0.5), 0.5);
    assert.equal(positiveInteger('C', 'o', 3), 3);
    assert.equal(nonNegativeNumber('C', 'o', 0), 0);
    assert.equal(nonNegativeInteger('C', 'o', 0), 0);
    assert.equal(numberAtLeast('C', 'o', 1, 1), 1);
    assert.equal(numberAbove('C', 'o', 0.1, 0), 0.1);
    assert.equal(integerAtLeast('C', 'o', 2, 2), 2);
    assert.equal(booleanOption('C', 'o', false), false);
    assert.equal(stringOption('C', 'o', ''), '');
    assert.equal(nonEmptyString('C', 'o', 'x'), 'x');
    assert.equal(oneOf('C', 'o', 'b', ['a', 'b']), 'b');
    const f = (): number => 1;
    assert.equal(functionOption('C', 'o', f), f);
    assert.equal(clockOption('C', realClock), realClock);
  });

  it('throw a TypeError naming the component, the option, what it must be and what it got', () => {
    const cases: [() => unknown, string][] = [
      [() => positiveNumber('ClusterSet', 'qps', 0), 'ClusterSet option qps must be a positive number, got 0'],
      [() => positiveNumber('ClusterSet', 'qps', Number.POSITIVE_INFINITY), 'ClusterSet option qps must be a positive number, got Infinity'],
      [() => positiveNumber('ClusterSet', 'qps', '5'), 'ClusterSet option qps must be a positive number, got "5"'],
      [() => positiveInteger('FairSlots', 'maxWaiting', 1.5), 'FairSlots option maxWaiting must be a positive integer, got 1.5'],
      [() => positiveInteger('FairSlots', 'maxWaiting', 2 ** 53), `FairSlots option maxWaiting must be a positive integer, got ${2 ** 53}`],
      [() => nonNegativeNumber('accumulator', 'minIntervalMs', -1), 'accumulator option minIntervalMs must be a non-negative number, got -1'],
      [() => nonNegativeNumber('accumulator', 'minIntervalMs', Number.NaN), 'accumulator option minIntervalMs must be a non-negative number, got NaN'],
      [() => nonNegativeInteger('informer', 'pageSize', 0.5), 'informer option pageSize must be a non-negative integer, got 0.5'],
      [() => numberAtLeast('backoff', 'factor', 0.5, 1), 'backoff option factor must be a finite number >= 1, got 0.5'],
      [() => numberAbove('TokenBucket', 'qps', 0, 0), 'TokenBucket option qps must be a finite number > 0, got 0'],
      [() => integerAtLeast('SocketBudget', 'turnMs', -1, 0), 'SocketBudget option turnMs must be an integer >= 0, got -1'],
      [() => booleanOption('SecretProvider', 'allowExec', 'yes'), 'SecretProvider option allowExec must be a boolean, got "yes"'],
      [() => stringOption('WorkQueue', 'name', 3), 'WorkQueue option name must be a string, got 3'],
      [() => nonEmptyString('ClusterConnection', 'name', ''), 'ClusterConnection option name must be a non-empty string, got ""'],
      [() => nonEmptyString('ClusterConnection', 'name', undefined), 'ClusterConnection option name must be a non-empty string, got undefined'],
      [() => oneOf('watchOwners', 'updates', 'all', ['any', 'generation']), 'watchOwners option updates must be one of any, generation, got "all"'],
      [() => functionOption('ClusterSet', 'onRequest', 42), 'ClusterSet option onRequest must be a function'],
      [() => clockOption('WorkQueue', {}), 'WorkQueue option clock must be a Clock (now, setTimer), got object'],
    ];
    for (const [check, message] of cases) assert.throws(check, { name: 'TypeError', message });
  });
});
