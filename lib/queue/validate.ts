import type { Clock } from '../util/index.ts';

// Option checks shared by the queue's constructors. Values are typed `unknown` because they guard
// callers that are not type-checked (plain JavaScript, JSON config).

/** Throws the TypeError the style guide asks for: it names the option and the offending value. */
export function invalid(owner: string, option: string, value: unknown, expected: string): never {
  throw new TypeError(`${owner} option ${option} must be ${expected}, got ${describe(value)}`);
}

function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint' || value === undefined || value === null) return String(value);
  return typeof value;
}

/** A finite number >= `min`. */
export function finiteAtLeast(owner: string, option: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) return invalid(owner, option, value, `a finite number >= ${min}`);
  return value;
}

/** A finite number > 0. */
export function finitePositive(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return invalid(owner, option, value, 'a finite number > 0');
  return value;
}

/** An integer >= `min`. */
export function integerAtLeast(owner: string, option: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) return invalid(owner, option, value, `an integer >= ${min}`);
  return value;
}

export function checkString(owner: string, option: string, value: unknown): string {
  if (typeof value !== 'string') return invalid(owner, option, value, 'a string');
  return value;
}

export function checkClock(owner: string, value: unknown): Clock {
  const clock = value as Partial<Clock> | null;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function' || typeof clock.setTimer !== 'function') {
    return invalid(owner, 'clock', value, 'a Clock (now, setTimer)');
  }
  return clock as Clock;
}
