// Label and field selectors in the API's string form, evaluated on cached objects as the API server
// evaluates them: shared by registry set targets and snapshot queries.
import type { KubeObject } from '../transport/index.ts';
import { isLabelValue, isQualifiedName } from '../util/index.ts';

/** Whether an object matches a selector. */
export type ObjectMatcher = (obj: KubeObject) => boolean;

type Requirement = (labels: Readonly<Record<string, string>>) => boolean;


/** Splits on commas outside parentheses (`a in (x,y),b` is two requirements). */
function splitTopLevel(text: string, option: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '(') depth++;
    else if (c === ')') {
      depth--;
      if (depth < 0) throw new TypeError(`${option}: unbalanced ")" in ${JSON.stringify(text)}`);
    } else if (c === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  if (depth !== 0) throw new TypeError(`${option}: unbalanced "(" in ${JSON.stringify(text)}`);
  parts.push(text.slice(start));
  return parts.map((p) => p.trim());
}

function checkKey(key: string, option: string): string {
  if (!isQualifiedName(key)) throw new TypeError(`${option}: invalid label key ${JSON.stringify(key)}`);
  return key;
}

function checkValue(value: string, option: string): string {
  if (!isLabelValue(value)) throw new TypeError(`${option}: invalid label value ${JSON.stringify(value)}`);
  return value;
}

function labelRequirement(text: string, option: string): Requirement {
  let m = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(text);
  if (m !== null) {
    const key = checkKey(m[1] ?? '', option);
    const values = new Set((m[3] ?? '').split(',').map((v) => checkValue(v.trim(), option)));
    return m[2] === 'in'
      ? (labels) => { const v = labels[key]; return v !== undefined && values.has(v); }
      : (labels) => { const v = labels[key]; return v === undefined || !values.has(v); };
  }
  m = /^([^=!<>\s]+)\s*(==|=|!=|<|>)\s*(\S*)$/.exec(text);
  if (m !== null) {
    const key = checkKey(m[1] ?? '', option);
    const op = m[2];
    const raw = m[3] ?? '';
    if (op === '<' || op === '>') {
      if (!/^-?\d+$/.test(raw)) throw new TypeError(`${option}: ${op} needs an integer, got ${JSON.stringify(raw)}`);
      const bound = Number(raw);
      return (labels) => {
        const v = labels[key];
        if (v === undefined || !/^-?\d+$/.test(v)) return false;
        return op === '<' ? Number(v) < bound : Number(v) > bound;
      };
    }
    const value = checkValue(raw, option);
    return op === '!=' ? (labels) => labels[key] !== value : (labels) => labels[key] === value;
  }
  m = /^(!?)\s*(\S+)$/.exec(text);
  if (m !== null) {
    const key = checkKey(m[2] ?? '', option);
    return m[1] === '!' ? (labels) => !(key in labels) : (labels) => key in labels;
  }
  throw new TypeError(`${option}: cannot parse ${JSON.stringify(text)}`);
}

/**
 * A label selector in the API's string form (`app=web,tier!=db,env in (a,b),!legacy,canary`),
 * evaluated as the API server does. Throws a TypeError naming `option` (the caller's name for the
 * selector, `snapshot query option web.labelSelector` say) for a malformed selector. Empty or unset
 * matches everything.
 */
export function labelMatcher(selector: string | undefined, option = 'labelSelector'): ObjectMatcher {
  if (selector === undefined || selector.trim() === '') return () => true;
  const requirements = splitTopLevel(selector, option).map((part) => {
    if (part === '') throw new TypeError(`${option}: empty requirement in ${JSON.stringify(selector)}`);
    return labelRequirement(part, option);
  });
  return (obj) => {
    const labels = obj.metadata?.labels ?? {};
    return requirements.every((r) => r(labels));
  };
}

/** The value of a dotted field path as the API server compares it (a string; '' when absent). */
function fieldValue(obj: KubeObject, path: readonly string[]): string {
  let current: unknown = obj;
  for (const part of path) {
    if (typeof current !== 'object' || current === null) return '';
    current = (current as Record<string, unknown>)[part];
  }
  if (typeof current === 'string') return current;
  if (typeof current === 'number' || typeof current === 'boolean') return String(current);
  return '';
}

/**
 * A field selector in the API's string form (`metadata.name=x,status.phase!=Running`), evaluated
 * on the object's JSON: each dotted path is read as a string ('' when absent), as the API server
 * does for the fields it supports. Throws a TypeError naming `option` for a malformed selector, or
 * for a path outside `fields` when that is given (the API server, too, supports only some fields
 * per kind). Default `fields`: any path.
 */
export function fieldMatcher(selector: string | undefined, option = 'fieldSelector', fields?: ReadonlySet<string>): ObjectMatcher {
  if (selector === undefined || selector.trim() === '') return () => true;
  const requirements = selector.split(',').map((part) => {
    const m = /^\s*([A-Za-z0-9_.-]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (m === null) throw new TypeError(`${option}: cannot parse ${JSON.stringify(part)}`);
    const path = (m[1] ?? '').split('.');
    if (path.some((p) => p === '')) throw new TypeError(`${option}: invalid field path ${JSON.stringify(m[1])}`);
    if (fields !== undefined && !fields.has(m[1] ?? '')) throw new TypeError(`${option}: ${JSON.stringify(m[1])} is not a supported field (only ${[...fields].join(', ')})`);
    const value = m[3] ?? '';
    const negate = m[2] === '!=';
    return (obj: KubeObject) => (fieldValue(obj, path) === value) !== negate;
  });
  return (obj) => requirements.every((r) => r(obj));
}
