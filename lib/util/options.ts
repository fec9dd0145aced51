import type { Clock } from './clock.ts';

// The checks of a constructor's options, written once: each returns the value when it is what the
// option needs, else throws `TypeError('<owner> option <name> must be <expected>, got <value>')`,
// naming the component, the option and what it was given. Values are typed `unknown` because the
// checks guard callers that are not type-checked (plain JavaScript, JSON configuration).

/** A value as an error message shows it: strings quoted, numbers as written, objects by type only. */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint' || value === undefined || value === null) return String(value);
  return typeof value;
}

/** Throws the TypeError every check below throws: `owner` is the component (`ClusterSet`), `option` the field. */
export function invalidOption(owner: string, option: string, value: unknown, expected: string): never {
  throw new TypeError(`${owner} option ${option} must be ${expected}, got ${describeValue(value)}`);
}

/** A finite number > 0. */
export function positiveNumber(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return invalidOption(owner, option, value, 'a positive number');
  return value;
}

/** A (safe) integer >= 1. */
export function positiveInteger(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) return invalidOption(owner, option, value, 'a positive integer');
  return value;
}

/** A finite number >= 0. */
export function nonNegativeNumber(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) return invalidOption(owner, option, value, 'a non-negative number');
  return value;
}

/** A (safe) integer >= 0. */
export function nonNegativeInteger(owner: string, option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) return invalidOption(owner, option, value, 'a non-negative integer');
  return value;
}

/** A finite number >= `min`. */
export function numberAtLeast(owner: string, option: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) return invalidOption(owner, option, value, `a finite number >= ${min}`);
  return value;
}

/** A finite number > `min`. */
export function numberAbove(owner: string, option: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= min) return invalidOption(owner, option, value, `a finite number > ${min}`);
  return value;
}

/** A (safe) integer >= `min`. */
export function integerAtLeast(owner: string, option: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) return invalidOption(owner, option, value, `an integer >= ${min}`);
  return value;
}

/** `true` or `false`. */
export function booleanOption(owner: string, option: string, value: unknown): boolean {
  if (typeof value !== 'boolean') return invalidOption(owner, option, value, 'a boolean');
  return value;
}

/** Any string, the empty one included. */
export function stringOption(owner: string, option: string, value: unknown): string {
  if (typeof value !== 'string') return invalidOption(owner, option, value, 'a string');
  return value;
}

/** A string with at least one character. */
export function nonEmptyString(owner: string, option: string, value: unknown): string {
  if (typeof value !== 'string' || value === '') return invalidOption(owner, option, value, 'a non-empty string');
  return value;
}

/** One of `choices`. */
export function oneOf<T extends string>(owner: string, option: string, value: unknown, choices: readonly T[]): T {
  if (typeof value !== 'string' || !(choices as readonly string[]).includes(value)) return invalidOption(owner, option, value, `one of ${choices.join(', ')}`);
  return value as T;
}

/**
 * A function. The message names no value (a function's text is its source): `<owner> option
 * <name> must be a function`.
 */
export function functionOption<F>(owner: string, option: string, value: F): F {
  if (typeof value !== 'function') throw new TypeError(`${owner} option ${option} must be a function`);
  return value;
}

/** A {@link Clock}: an object with `now` and `setTimer`. */
export function clockOption(owner: string, value: unknown): Clock {
  const clock = value as Partial<Clock> | null;
  if (typeof clock !== 'object' || clock === null || typeof clock.now !== 'function' || typeof clock.setTimer !== 'function') {
    return invalidOption(owner, 'clock', value, 'a Clock (now, setTimer)');
  }
  return clock as Clock;
}
