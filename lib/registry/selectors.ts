// Label and field selectors in the API's string form, evaluated on cached objects as the API server
// evaluates them: shared by registry set targets and snapshot queries.
import type { KubeObject } from '../transport/index.ts';
import { FleetcacheError, isLabelValue, isQualifiedName, toError } from '../util/index.ts';

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

/** One parsed label requirement: `=`/`!=` carry one value, `in`/`notin` a set, `exists`/`!` none, `<`/`>` an integer. */
interface LabelTerm {
  readonly key: string;
  readonly op: '=' | '!=' | 'in' | 'notin' | 'exists' | '!' | '<' | '>';
  readonly values: readonly string[];
}

function parseLabelTerm(text: string, option: string): LabelTerm {
  let m = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(text);
  if (m !== null) {
    const key = checkKey(m[1] ?? '', option);
    const values = (m[3] ?? '').split(',').map((v) => checkValue(v.trim(), option));
    return { key, op: m[2] === 'in' ? 'in' : 'notin', values };
  }
  m = /^([^=!<>\s]+)\s*(==|=|!=|<|>)\s*(\S*)$/.exec(text);
  if (m !== null) {
    const key = checkKey(m[1] ?? '', option);
    const op = m[2];
    const raw = m[3] ?? '';
    if (op === '<' || op === '>') {
      if (!/^-?\d+$/.test(raw)) throw new TypeError(`${option}: ${op} needs an integer, got ${JSON.stringify(raw)}`);
      return { key, op, values: [BigInt(raw).toString()] };
    }
    return { key, op: op === '!=' ? '!=' : '=', values: [checkValue(raw, option)] };
  }
  m = /^(!?)\s*(\S+)$/.exec(text);
  if (m !== null) {
    const key = checkKey(m[2] ?? '', option);
    return { key, op: m[1] === '!' ? '!' : 'exists', values: [] };
  }
  throw new TypeError(`${option}: cannot parse ${JSON.stringify(text)}`);
}

function labelRequirement(term: LabelTerm): Requirement {
  const { key, op, values } = term;
  if (op === 'in' || op === 'notin') {
    const set = new Set(values);
    return op === 'in'
      ? (labels) => { const v = labels[key]; return v !== undefined && set.has(v); }
      : (labels) => { const v = labels[key]; return v === undefined || !set.has(v); };
  }
  if (op === '<' || op === '>') {
    const bound = Number(values[0]);
    return (labels) => {
      const v = labels[key];
      if (v === undefined || !/^-?\d+$/.test(v)) return false;
      return op === '<' ? Number(v) < bound : Number(v) > bound;
    };
  }
  if (op === 'exists') return (labels) => key in labels;
  if (op === '!') return (labels) => !(key in labels);
  const value = values[0] ?? '';
  return op === '!=' ? (labels) => labels[key] !== value : (labels) => labels[key] === value;
}

function parseLabelSelector(selector: string, option: string): LabelTerm[] {
  return splitTopLevel(selector, option).map((part) => {
    if (part === '') throw new TypeError(`${option}: empty requirement in ${JSON.stringify(selector)}`);
    return parseLabelTerm(part, option);
  });
}

/**
 * A label selector in the API's string form (`app=web,tier!=db,env in (a,b),!legacy,canary`),
 * evaluated as the API server does. Throws a TypeError naming `option` (the caller's name for the
 * selector, `snapshot query option web.labelSelector` say) for a malformed selector. Empty or unset
 * matches everything.
 */
export function labelMatcher(selector: string | undefined, option = 'labelSelector'): ObjectMatcher {
  if (selector === undefined || selector.trim() === '') return () => true;
  const requirements = parseLabelSelector(selector, option).map(labelRequirement);
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

/** The most characters a set target's selector may have, label and field selectors each. */
export const MAX_SELECTOR_LENGTH = 1_024;
/** The most requirements a set target's selectors may have, label and field requirements together. */
export const MAX_SELECTOR_TERMS = 32;

/** The fields a set target's field selector may name: those every kind supports on the server. */
export const SET_TARGET_FIELDS: readonly string[] = ['metadata.name', 'metadata.namespace'];

const ACCEPTED_LABELS = 'label requirements separated by commas: key=value, key==value, key!=value, key in (v1,v2), key notin (v1,v2), key, !key, key<integer, key>integer'
  + ' (keys [prefix/]name: a name of up to 63 of [A-Za-z0-9._-], a DNS-subdomain prefix; values up to 63 of [A-Za-z0-9._-], alphanumeric at both ends)';
const ACCEPTED_FIELDS = `field requirements separated by commas: ${SET_TARGET_FIELDS.join(' or ')} with =, == or != and a name (letters, digits, '.', '-', '_', ':')`;
const LIMITS = `at most ${MAX_SELECTOR_TERMS} requirements and ${MAX_SELECTOR_LENGTH} characters per selector`;

/**
 * A set target's selector was refused (`ERR_SELECTOR_INVALID`): malformed, naming an unsupported
 * field, or over the bounds ({@link MAX_SELECTOR_LENGTH}, {@link MAX_SELECTOR_TERMS}). The message
 * says why and lists what is accepted; the parser's complaint, if any, is the `cause`.
 */
export class InvalidSelectorError extends FleetcacheError {
  /** `labelSelector` or `fieldSelector`. */
  readonly option: 'labelSelector' | 'fieldSelector';
  /** The selector as given (cut at 200 characters). */
  readonly selector: string;

  constructor(option: 'labelSelector' | 'fieldSelector', selector: string, reason: string, options?: ErrorOptions) {
    const shown = selector.length > 200 ? `${selector.slice(0, 200)}…` : selector;
    super('ERR_SELECTOR_INVALID', `target ${option} ${JSON.stringify(shown)}: ${reason}; accepted: ${option === 'labelSelector' ? ACCEPTED_LABELS : ACCEPTED_FIELDS}; ${LIMITS}`, options);
    this.option = option;
    this.selector = shown;
  }
}

/**
 * A set target's selectors in canonical form: the same selection always reads the same
 * (requirements sorted and de-duplicated, `==` written `=`, a one-value `in`/`notin` written
 * `=`/`!=`, set values sorted, no spaces but the API's `key in (…)`), so equal selections share one
 * cache. '' selects everything.
 */
export interface Selection {
  readonly labels: string;
  readonly fields: string;
}

/** The selection of every object of a cache's kind and namespace scope. */
export const EVERYTHING: Selection = { labels: '', fields: '' };

function labelTermText(term: LabelTerm): string {
  switch (term.op) {
    case 'in':
    case 'notin': {
      const values = [...new Set(term.values)].sort();
      if (values.length === 1) return `${term.key}${term.op === 'in' ? '=' : '!='}${values[0] ?? ''}`;
      return `${term.key} ${term.op} (${values.join(',')})`;
    }
    case 'exists': return term.key;
    case '!': return `!${term.key}`;
    default: return `${term.key}${term.op}${term.values[0] ?? ''}`;
  }
}

function canonicalTerms(terms: readonly string[]): string[] {
  return [...new Set(terms)].sort();
}

/** The canonical label selector (see {@link Selection}); throws {@link InvalidSelectorError}. */
function canonicalLabels(selector: string): string[] {
  try {
    return canonicalTerms(parseLabelSelector(selector, 'labelSelector').map(labelTermText));
  } catch (err) {
    throw new InvalidSelectorError('labelSelector', selector, toError(err).message.replace(/^labelSelector: /, ''), { cause: err });
  }
}

const FIELD_VALUE = /^[A-Za-z0-9._:-]*$/;

/** The canonical field selector (see {@link Selection}); throws {@link InvalidSelectorError}. */
function canonicalFields(selector: string): string[] {
  return canonicalTerms(selector.split(',').map((part) => {
    const m = /^\s*([A-Za-z0-9_.-]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(part);
    if (m === null) throw new InvalidSelectorError('fieldSelector', selector, `cannot parse ${JSON.stringify(part)}`);
    const path = m[1] ?? '';
    if (!SET_TARGET_FIELDS.includes(path)) throw new InvalidSelectorError('fieldSelector', selector, `${JSON.stringify(path)} is not a supported field`);
    const value = m[3] ?? '';
    if (!FIELD_VALUE.test(value)) throw new InvalidSelectorError('fieldSelector', selector, `invalid value ${JSON.stringify(value)}`);
    return `${path}${m[2] === '!=' ? '!=' : '='}${value}`;
  }));
}

/** Canonical selections by the selectors as given: a reconcile's repeated calls parse nothing. Bounded. */
const canonical = new Map<string, Selection>();
const CANONICAL_KEPT = 1_024;

/**
 * The canonical {@link Selection} of a set target's selectors (unset or blank: everything).
 * Throws {@link InvalidSelectorError} for a malformed selector, a field other than
 * {@link SET_TARGET_FIELDS}, or one over the bounds.
 */
export function selectionOf(labelSelector: string | undefined, fieldSelector: string | undefined): Selection {
  const labels: unknown = labelSelector ?? '';
  const fields: unknown = fieldSelector ?? '';
  // The type says string; JavaScript callers and casts do not.
  if (typeof labels !== 'string') throw new InvalidSelectorError('labelSelector', String(labels), 'not a string');
  if (typeof fields !== 'string') throw new InvalidSelectorError('fieldSelector', String(fields), 'not a string');
  if (labels.trim() === '' && fields.trim() === '') return EVERYTHING;
  const memo = `${labels}\u0000${fields}`;
  const known = canonical.get(memo);
  if (known !== undefined) return known;
  for (const [option, text] of [['labelSelector', labels], ['fieldSelector', fields]] as const) {
    if (text.length > MAX_SELECTOR_LENGTH) throw new InvalidSelectorError(option, text, `${text.length} characters is over the limit`);
  }
  const labelTerms = labels.trim() === '' ? [] : canonicalLabels(labels);
  const fieldTerms = fields.trim() === '' ? [] : canonicalFields(fields);
  if (labelTerms.length + fieldTerms.length > MAX_SELECTOR_TERMS) {
    throw new InvalidSelectorError(labelTerms.length > 0 ? 'labelSelector' : 'fieldSelector', labelTerms.length > 0 ? labels : fields, `${labelTerms.length + fieldTerms.length} requirements is over the limit`);
  }
  const selection: Selection = { labels: labelTerms.join(','), fields: fieldTerms.join(',') };
  if (canonical.size >= CANONICAL_KEPT) canonical.delete(canonical.keys().next().value ?? '');
  canonical.set(memo, selection);
  return selection;
}

/** `app=web` or `app=web; metadata.name=x`: a selection as people read it ('' for everything). */
export function describeSelection(selection: Selection): string {
  return [selection.labels, selection.fields].filter((s) => s !== '').join('; ');
}

/** Whether an object matches a (canonical, hence valid) selection. */
export function selectionMatcher(selection: Selection): ObjectMatcher {
  const byLabels = labelMatcher(selection.labels);
  const byFields = fieldMatcher(selection.fields);
  return selection.labels === '' ? byFields : selection.fields === '' ? byLabels : (obj) => byLabels(obj) && byFields(obj);
}
