import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, isDns1035Label, isDnsLabel, isDnsSubdomain, isKindName, isLabelValue, isNamespaceName, isObjectName,
  isQualifiedName, isSecretKey,
} from './names.ts';

describe('names', () => {
  it('takes DNS-1123 labels of at most 63 characters, as namespace names', () => {
    for (const name of ['a', '0', 'team-a', '123-abc', 'a'.repeat(63)]) {
      assert.equal(isDnsLabel(name), true, name);
      assert.equal(isNamespaceName(name), true, name);
    }
    for (const name of ['', 'A', 'team_a', '-a', 'a-', 'a.b', 'a'.repeat(64), ' a', 'a\n', 'é']) assert.equal(isDnsLabel(name), false, JSON.stringify(name));
    for (const value of [undefined, null, 3, {}, ['a']]) assert.equal(isDnsLabel(value), false, JSON.stringify(value));
  });

  it('takes DNS-1123 subdomains of at most 253 characters (or less), as object names', () => {
    const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    assert.equal(long.length, 253);
    for (const name of ['a', 'example.com', 'my-app.v2', long]) {
      assert.equal(isDnsSubdomain(name), true, name);
      assert.equal(isObjectName(name), true, name);
    }
    for (const name of ['', 'a..b', '.a', 'a.', 'A.b', 'a_b', `${long}e`, 'a/b']) assert.equal(isDnsSubdomain(name), false, name);
    assert.equal(isObjectName('a'.repeat(242), 253 - '-kubeconfig'.length), true);
    assert.equal(isObjectName('a'.repeat(243), 253 - '-kubeconfig'.length), false, 'room left for a suffix');
    assert.equal(isDnsSubdomain(7), false);
  });

  it('takes DNS-1035 labels: a DNS-1123 label that starts with a letter', () => {
    assert.equal(isDns1035Label('pipelines'), true);
    assert.equal(isDns1035Label('1pipelines'), false);
    assert.equal(isDns1035Label('a'.repeat(64)), false);
  });

  it('gives the same rules as anchored pattern text, for CRD schemas', () => {
    assert.equal(DNS_LABEL_PATTERN, '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$');
    assert.equal(DNS_SUBDOMAIN_PATTERN, '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$');
  });

  it('takes Secret data keys and kinds', () => {
    for (const key of ['url', 'tls.crt', '.dockerconfigjson', 'A_b-1']) assert.equal(isSecretKey(key), true, key);
    for (const key of ['', 'a/b', 'a b', 'k'.repeat(254)]) assert.equal(isSecretKey(key), false, key);
    for (const kind of ['HelmRelease', 'v1Thing', 'K']) assert.equal(isKindName(kind), true, kind);
    for (const kind of ['', '1Kind', 'Helm-Release', 'K'.repeat(64)]) assert.equal(isKindName(kind), false, kind);
  });

  it('takes label keys with an optional DNS subdomain prefix, and label values', () => {
    for (const key of ['app', 'app.kubernetes.io/name', 'A_b.c-D', `${'p'.repeat(253)}/${'n'.repeat(63)}`]) assert.equal(isQualifiedName(key), true, key);
    for (const key of ['', '/name', 'Example.com/name', 'a/', 'a/b/c', '-a', 'a_', 'n'.repeat(64), `${'p'.repeat(254)}/n`]) assert.equal(isQualifiedName(key), false, key);
    for (const value of ['', 'v1', 'a.b_c-d', 'v'.repeat(63)]) assert.equal(isLabelValue(value), true, value);
    for (const value of ['-a', 'a b', 'v'.repeat(64), 'a/b']) assert.equal(isLabelValue(value), false, value);
  });
});
