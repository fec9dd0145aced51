// The compactor's schedule: one timer for every compressed cache, passes in slices, nothing armed
// once the last cache is gone.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { eventually } from '../../e2e/harness/index.ts';
import { Compactor, type Compactable } from './compactor.ts';
import { slotTicks } from './store.ts';

/** A cache whose walk takes `slices` calls to finish; records each call. */
function cache(slices: number): Compactable & { readonly calls: { olderThan: number; budgetMs: number }[] } {
  const calls: { olderThan: number; budgetMs: number }[] = [];
  let left = slices;
  return {
    calls,
    compact(olderThan, budgetMs) {
      calls.push({ olderThan, budgetMs });
      left--;
      if (left > 0) return false;
      left = slices;
      return true;
    },
  };
}

describe('Compactor', () => {
  it('walks every registered cache each period, cold by its own age, resuming an unfinished walk at the next turn', async () => {
    const compactor = new Compactor();
    const quick = cache(1);
    const long = cache(3);
    const stopQuick = compactor.register(quick, 200);
    const stopLong = compactor.register(long, 1_000);
    assert.ok(compactor.armed);
    await eventually('a pass over both', () => long.calls.length >= 3 && quick.calls.length >= 1, 5_000);
    const now = slotTicks();
    const q = quick.calls[0];
    const l = long.calls[0];
    assert.ok(q !== undefined && l !== undefined);
    // Ages in slot ticks (tenths of a second): 2 and 10.
    assert.ok(now - q.olderThan >= 2 && now - q.olderThan <= 4, `quick: ${String(now - q.olderThan)}`);
    assert.ok(now - l.olderThan >= 10 && now - l.olderThan <= 12, `long: ${String(now - l.olderThan)}`);
    assert.ok(l.budgetMs > 0 && l.budgetMs <= 5, 'each call gets what is left of a 5 ms slice');
    // A cache left registered shows passes going on; the two that left get no call in them.
    const witness = cache(1);
    const stopWitness = compactor.register(witness, 200);
    stopQuick();
    stopLong();
    const calls = quick.calls.length + long.calls.length;
    await eventually('two more passes', () => witness.calls.length >= 2, 5_000);
    assert.equal(quick.calls.length + long.calls.length, calls, 'no call to a cache after it left');
    stopWitness();
    assert.equal(compactor.armed, false, 'no timer once the last cache is gone');
  });

  it('a cache that throws ends its pass, and the others carry on', async () => {
    const compactor = new Compactor();
    const good = cache(1);
    let thrown = 0;
    const stopBad = compactor.register({ compact: () => { thrown++; throw new Error('zlib out of memory'); } }, 200);
    const stopGood = compactor.register(good, 200);
    await eventually('two passes', () => thrown >= 2 && good.calls.length >= 2, 5_000);
    stopBad();
    stopGood();
    assert.equal(compactor.armed, false);
  });
});
