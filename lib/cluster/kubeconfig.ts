import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { Cluster, Context, User } from '@kubernetes/client-node';
import { load as parseYaml, YAMLException } from 'js-yaml';
import { KubeconfigInvalidError, KubeconfigRefusedError, nonEmptyString, type KubeconfigRule } from '../util/index.ts';

/** Options of {@link loadKubeconfig}. Every `allow*` option relaxes one safety rule; all default to false. */
export interface LoadKubeconfigOptions {
  /** The cluster's name as fleetcache knows it (a {@link clusterKey}); it prefixes every error. Required. */
  readonly cluster: string;
  /** Context to use. Default: the kubeconfig's `current-context`; unset or empty means that default. */
  readonly context?: string | undefined;
  /**
   * Accept `exec` credential plugins, and the `cmd-path` of `auth-provider` entries: both run a
   * command on this host. Default false.
   */
  readonly allowExec?: boolean | undefined;
  /** Accept `auth-provider` entries (oidc, gcp, azure, tokenFile plugins). Default false. */
  readonly allowAuthProvider?: boolean | undefined;
  /**
   * Accept references to files on this host: `certificate-authority`, `client-certificate`,
   * `client-key`, `tokenFile`, and file paths inside `auth-provider` configs. Default false.
   */
  readonly allowLocalFiles?: boolean | undefined;
  /** Accept `http://` servers, which send credentials unencrypted. Default false. */
  readonly allowPlainHttp?: boolean | undefined;
  /**
   * Accept `insecure-skip-tls-verify: true`, which lets anyone on the path read the credentials
   * (Flux refuses it unless `--insecure-kubeconfig-tls`). Default false.
   */
  readonly allowInsecureTls?: boolean | undefined;
  /**
   * Directory that relative file paths are resolved against, as kubectl resolves them against the
   * kubeconfig file's directory. Default unset: a relative path is invalid (it would depend on the
   * process's working directory).
   */
  readonly baseDirectory?: string | undefined;
}

type Mapping = Readonly<Record<string, unknown>>;

function isMapping(value: unknown): value is Mapping {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Quotes a name or path taken from the kubeconfig for an error message. Only names, paths and
 * command names are ever quoted, never credential fields, and they are truncated so a hostile
 * kubeconfig cannot flood the logs.
 */
function quote(text: string): string {
  return JSON.stringify(text.length > 120 ? `${text.slice(0, 120)}…` : text);
}

const hints: Readonly<Record<Exclude<KubeconfigRule, 'cross-namespace'>, string>> = {
  exec: 'exec plugins run a command on this host; set allowExec only for kubeconfig sources whose authors you trust with that',
  'auth-provider': 'auth-provider plugins run commands and call identity providers; set allowAuthProvider only for trusted kubeconfig sources',
  'local-file': 'an untrusted kubeconfig must embed its credentials (the *-data fields, token); set allowLocalFiles to let it read files on this host',
  'insecure-tls': 'without TLS verification anyone on the path can read the credentials; give certificate-authority-data, or set allowInsecureTls (flag --insecure-kubeconfig-tls)',
  proxy: 'proxy-url must be an http://, https:// or socks5:// URL with a host',
};

/** One entry of `clusters:` or `users:` after the shape check, still untrusted. */
interface NamedEntry {
  readonly name: string;
  readonly body: Mapping;
}

/**
 * The raw document, checked for shape only: a mapping whose lists hold named mappings, names
 * unique per list. Duplicates are refused because client-node and kubectl would silently pick
 * different ones.
 */
interface RawKubeconfig {
  readonly clusters: readonly NamedEntry[];
  readonly users: readonly NamedEntry[];
  readonly contexts: readonly NamedEntry[];
  readonly currentContext: string | undefined;
}

/** Every rule relaxed: for a kubeconfig the service's operator supplied, as kubectl would read it. */
const trusted = { allowExec: true, allowAuthProvider: true, allowLocalFiles: true, allowPlainHttp: true, allowInsecureTls: true } as const;

/**
 * Parses an untrusted kubeconfig and returns a new client-node `KubeConfig` that holds only the
 * chosen context, its cluster and its user, with that context current.
 *
 * The parsed YAML is inspected before anything reaches client-node, so nothing refused is ever
 * executed or read: client-node itself reads `token-file` while parsing, which is why this never
 * calls `loadFromString`. Every user and cluster in the document is checked against the safety
 * rules, not only the ones the context uses: a document that carries an `exec` entry is refused
 * even if the current context does not use it, so that changing the context later cannot
 * reach past the check.
 *
 * Errors never contain credentials: they name entries, fields, file paths and command names only,
 * and YAML syntax errors keep their line and column but not the source snippet.
 *
 * @throws KubeconfigRefusedError when a safety rule that was not relaxed forbids an entry.
 * @throws KubeconfigInvalidError when the document is not a usable kubeconfig.
 */
export function loadKubeconfig(yaml: string, options: LoadKubeconfigOptions): KubeConfig {
  const cluster = options.cluster;
  nonEmptyString('loadKubeconfig', 'cluster', cluster);
  const invalid = (message: string): KubeconfigInvalidError => new KubeconfigInvalidError(cluster, message);

  const raw = parseDocument(yaml, invalid);
  for (const entry of raw.clusters) checkClusterRules(cluster, entry, options, invalid);
  for (const entry of raw.users) checkUserRules(cluster, entry, options);

  const contextName = options.context === undefined || options.context === '' ? raw.currentContext : options.context;
  if (contextName === undefined) throw invalid('no current-context is set and no context was chosen');
  const context = raw.contexts.find((c) => c.name === contextName);
  if (context === undefined) throw invalid(`context ${quote(contextName)} does not exist`);
  const clusterName = context.body.cluster;
  if (typeof clusterName !== 'string' || clusterName === '') throw invalid(`context ${quote(contextName)} names no cluster`);
  const clusterEntry = raw.clusters.find((c) => c.name === clusterName);
  if (clusterEntry === undefined) throw invalid(`context ${quote(contextName)} names cluster ${quote(clusterName)}, which does not exist`);
  const userName = context.body.user ?? '';
  if (typeof userName !== 'string') throw invalid(`context ${quote(contextName)} field user must be a string`);
  const namespace = context.body.namespace ?? '';
  if (typeof namespace !== 'string') throw invalid(`context ${quote(contextName)} field namespace must be a string`);

  // An empty user name means anonymous access, as in kubectl.
  let user: User | undefined;
  if (userName !== '') {
    const userEntry = raw.users.find((u) => u.name === userName);
    if (userEntry === undefined) throw invalid(`context ${quote(contextName)} names user ${quote(userName)}, which does not exist`);
    user = buildUser(userEntry, options, invalid);
  }

  const ctx: Context = namespace === ''
    ? { name: contextName, cluster: clusterName, user: userName }
    : { name: contextName, cluster: clusterName, user: userName, namespace };
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [buildCluster(clusterEntry, options, invalid)],
    users: user === undefined ? [] : [user],
    contexts: [ctx],
    currentContext: contextName,
  });
  return kc;
}

function parseDocument(yaml: string, invalid: (message: string) => KubeconfigInvalidError): RawKubeconfig {
  if (yaml.trim() === '') throw invalid('the kubeconfig is empty');
  let doc: unknown;
  try {
    doc = parseYaml(yaml, { maxDepth: 32 });
  } catch (err) {
    // js-yaml's message and `mark` quote the offending source line, which may be a token: keep
    // only the position, and do not chain the original as `cause`.
    if (err instanceof YAMLException) {
      const at = err.mark === undefined ? '' : ` at line ${err.mark.line + 1}, column ${err.mark.column + 1}`;
      throw invalid(`not valid YAML${at}`);
    }
    throw invalid('not valid YAML');
  }
  if (!isMapping(doc)) throw invalid('the document is not a YAML mapping');
  if (doc.kind !== undefined && doc.kind !== 'Config') throw invalid(`kind must be Config, got ${typeof doc.kind === 'string' ? quote(doc.kind) : typeof doc.kind}`);
  const current = doc['current-context'] ?? '';
  if (typeof current !== 'string') throw invalid('current-context must be a string');
  return {
    clusters: namedList(doc, 'clusters', 'cluster', invalid),
    users: namedList(doc, 'users', 'user', invalid),
    contexts: namedList(doc, 'contexts', 'context', invalid),
    currentContext: current === '' ? undefined : current,
  };
}

function namedList(doc: Mapping, list: string, field: string, invalid: (message: string) => KubeconfigInvalidError): NamedEntry[] {
  const value = doc[list] ?? [];
  if (!Array.isArray(value)) throw invalid(`${list} must be a list`);
  const seen = new Set<string>();
  return value.map((item: unknown, i): NamedEntry => {
    if (!isMapping(item)) throw invalid(`${list}[${i}] is not a mapping`);
    const name = item.name;
    if (typeof name !== 'string' || name === '') throw invalid(`${list}[${i}] has no name`);
    if (seen.has(name)) throw invalid(`${list} has two entries named ${quote(name)}`);
    seen.add(name);
    const body = item[field] ?? {};
    if (!isMapping(body)) throw invalid(`${list}[${i}] (${quote(name)}) field ${field} is not a mapping`);
    return { name, body };
  });
}

function refuse(cluster: string, rule: Exclude<KubeconfigRule, 'cross-namespace'>, subject: string): KubeconfigRefusedError {
  return new KubeconfigRefusedError({ cluster, rule, subject, hint: hints[rule] });
}

/** A field that names a file, if present and non-empty: even a non-string value is a file reference. */
function fileField(body: Mapping, field: string): string | undefined {
  const value = body[field];
  if (value === undefined || value === null || value === '') return undefined;
  return typeof value === 'string' ? value : `<${typeof value}>`;
}

function checkClusterRules(cluster: string, entry: NamedEntry, options: LoadKubeconfigOptions, invalid: Invalid): void {
  const ca = fileField(entry.body, 'certificate-authority');
  if (ca !== undefined && options.allowLocalFiles !== true) {
    throw refuse(cluster, 'local-file', `cluster ${quote(entry.name)} certificate-authority file ${quote(ca)}`);
  }
  if (entry.body['insecure-skip-tls-verify'] === true && options.allowInsecureTls !== true) {
    throw refuse(cluster, 'insecure-tls', `cluster ${quote(entry.name)} insecure-skip-tls-verify`);
  }
  const proxy = entry.body['proxy-url'];
  if (proxy !== undefined && proxy !== null && proxy !== '') checkProxyUrl(cluster, entry.name, proxy, invalid);
}

const proxySchemes: readonly string[] = ['http:', 'https:', 'socks5:'];

/**
 * `proxy-url` is where every request goes first, credentials included: only an http, https or
 * socks5 proxy with a host is accepted (a `file:` URL, say, would be read as a connection to
 * localhost). The URL is never quoted in errors, nor chained as a cause: it may carry a password.
 */
function checkProxyUrl(cluster: string, entryName: string, proxy: unknown, invalid: Invalid): void {
  const where = `cluster ${quote(entryName)}`;
  if (typeof proxy !== 'string') throw invalid(`${where} field proxy-url must be a string`);
  let url: URL;
  try {
    url = new URL(proxy);
  } catch {
    throw invalid(`${where} proxy-url is not a valid URL`);
  }
  if (!proxySchemes.includes(url.protocol)) throw refuse(cluster, 'proxy', `${where} proxy-url with scheme ${quote(url.protocol)}`);
  if (url.hostname === '') throw refuse(cluster, 'proxy', `${where} proxy-url without a host`);
  if ((url.pathname !== '' && url.pathname !== '/') || url.search !== '' || url.hash !== '') throw refuse(cluster, 'proxy', `${where} proxy-url with a path, query or fragment`);
}

/** Fields of an auth-provider config that name files (client-node's FileAuth and OIDC read them). */
const authProviderFileFields = ['tokenFile', 'idp-certificate-authority'] as const;

function checkUserRules(cluster: string, entry: NamedEntry, options: LoadKubeconfigOptions): void {
  const who = `user ${quote(entry.name)}`;
  const exec = entry.body.exec;
  if (exec !== undefined && exec !== null && options.allowExec !== true) {
    const command = isMapping(exec) && typeof exec.command === 'string' ? ` ${quote(exec.command)}` : '';
    throw refuse(cluster, 'exec', `${who} exec command${command}`);
  }
  const provider = entry.body['auth-provider'];
  if (provider !== undefined && provider !== null) {
    const name = isMapping(provider) && typeof provider.name === 'string' ? quote(provider.name) : '(unnamed)';
    if (options.allowAuthProvider !== true) throw refuse(cluster, 'auth-provider', `${who} auth-provider ${name}`);
    const config = isMapping(provider) && isMapping(provider.config) ? provider.config : {};
    const cmd = fileField(config, 'cmd-path');
    if (cmd !== undefined && options.allowExec !== true) throw refuse(cluster, 'exec', `${who} auth-provider ${name} cmd-path ${quote(cmd)}`);
    for (const field of authProviderFileFields) {
      const file = fileField(config, field);
      if (file !== undefined && options.allowLocalFiles !== true) throw refuse(cluster, 'local-file', `${who} auth-provider ${name} ${field} ${quote(file)}`);
    }
  }
  if (options.allowLocalFiles !== true) {
    for (const field of ['client-certificate', 'client-key'] as const) {
      const file = fileField(entry.body, field);
      if (file !== undefined) throw refuse(cluster, 'local-file', `${who} ${field} file ${quote(file)}`);
    }
    // `tokenFile` is the kubeconfig field; client-node also honours the non-standard `token-file`.
    for (const field of ['tokenFile', 'token-file'] as const) {
      const file = fileField(entry.body, field);
      if (file !== undefined) throw refuse(cluster, 'local-file', `${who} ${field} ${quote(file)}`);
    }
  }
}

type Invalid = (message: string) => KubeconfigInvalidError;

function optionalString(body: Mapping, field: string, where: string, invalid: Invalid): string | undefined {
  const value = body[field];
  if (value === undefined || value === null || value === '') return undefined;
  if (typeof value !== 'string') throw invalid(`${where} field ${field} must be a string`);
  return value;
}

function localPath(file: string, where: string, options: LoadKubeconfigOptions, invalid: Invalid): string {
  if (path.isAbsolute(file)) return file;
  if (options.baseDirectory === undefined) throw invalid(`${where} refers to the relative path ${quote(file)} and no base directory is known`);
  return path.resolve(options.baseDirectory, file);
}

function buildCluster(entry: NamedEntry, options: LoadKubeconfigOptions, invalid: Invalid): Cluster {
  const where = `cluster ${quote(entry.name)}`;
  const server = optionalString(entry.body, 'server', where, invalid);
  if (server === undefined) throw invalid(`${where} has no server URL`);
  let url: URL;
  try {
    url = new URL(server);
  } catch {
    // The value is not echoed: a malformed URL may still carry userinfo.
    throw invalid(`${where} server is not a valid URL`);
  }
  if (url.protocol === 'http:') {
    if (options.allowPlainHttp !== true) throw invalid(`${where} server uses http:// without TLS; credentials would cross the network unencrypted`);
  } else if (url.protocol !== 'https:') {
    throw invalid(`${where} server must be an https:// URL, got scheme ${quote(url.protocol)}`);
  }
  if (url.username !== '' || url.password !== '') throw invalid(`${where} server URL must not carry credentials`);
  const skip = entry.body['insecure-skip-tls-verify'] ?? false;
  if (typeof skip !== 'boolean') throw invalid(`${where} field insecure-skip-tls-verify must be a boolean`);
  const caData = optionalString(entry.body, 'certificate-authority-data', where, invalid);
  const caFileRaw = optionalString(entry.body, 'certificate-authority', where, invalid);
  if (skip && (caData !== undefined || caFileRaw !== undefined)) {
    throw invalid(`${where} sets both insecure-skip-tls-verify and a certificate authority`);
  }
  const tlsServerName = optionalString(entry.body, 'tls-server-name', where, invalid);
  const proxyUrl = optionalString(entry.body, 'proxy-url', where, invalid);
  return {
    name: entry.name,
    server: server.replace(/\/$/, ''),
    skipTLSVerify: skip,
    ...(caData === undefined ? {} : { caData }),
    ...(caFileRaw === undefined ? {} : { caFile: localPath(caFileRaw, `${where} certificate-authority`, options, invalid) }),
    ...(tlsServerName === undefined ? {} : { tlsServerName }),
    ...(proxyUrl === undefined ? {} : { proxyUrl }),
  };
}

function buildUser(entry: NamedEntry, options: LoadKubeconfigOptions, invalid: Invalid): User {
  const where = `user ${quote(entry.name)}`;
  const b = entry.body;
  const token = optionalString(b, 'token', where, invalid);
  const certData = optionalString(b, 'client-certificate-data', where, invalid);
  const keyData = optionalString(b, 'client-key-data', where, invalid);
  const certFile = optionalString(b, 'client-certificate', where, invalid);
  const keyFile = optionalString(b, 'client-key', where, invalid);
  const tokenFile = optionalString(b, 'tokenFile', where, invalid) ?? optionalString(b, 'token-file', where, invalid);
  const username = optionalString(b, 'username', where, invalid);
  const password = optionalString(b, 'password', where, invalid);
  const impersonate = optionalString(b, 'as', where, invalid);
  if ((certData ?? certFile) !== undefined && (keyData ?? keyFile) === undefined) throw invalid(`${where} has a client certificate but no client key`);
  if ((keyData ?? keyFile) !== undefined && (certData ?? certFile) === undefined) throw invalid(`${where} has a client key but no client certificate`);
  if (certData !== undefined && certFile !== undefined) throw invalid(`${where} sets both client-certificate-data and client-certificate`);
  if (keyData !== undefined && keyFile !== undefined) throw invalid(`${where} sets both client-key-data and client-key`);

  let exec: unknown;
  if (b.exec !== undefined && b.exec !== null) {
    if (!isMapping(b.exec) || typeof b.exec.command !== 'string' || b.exec.command === '') throw invalid(`${where} exec has no command`);
    exec = b.exec;
  }
  let authProvider: unknown;
  const provider = b['auth-provider'];
  if (provider !== undefined && provider !== null) {
    if (!isMapping(provider) || typeof provider.name !== 'string' || provider.name === '') throw invalid(`${where} auth-provider has no name`);
    const config = provider.config ?? {};
    if (!isMapping(config)) throw invalid(`${where} auth-provider config is not a mapping`);
    // client-node's authenticators write refreshed tokens into this object: give it its own copy.
    authProvider = { name: provider.name, config: structuredClone(config) };
  }
  if (tokenFile !== undefined) {
    if (exec !== undefined || authProvider !== undefined) throw invalid(`${where} sets tokenFile together with exec or auth-provider`);
    // client-node re-reads a token file only through its tokenFile authenticator; bound service
    // account tokens rotate, so a one-time read would expire.
    authProvider = { name: 'tokenFile', config: { tokenFile: localPath(tokenFile, `${where} tokenFile`, options, invalid) } };
  }
  // The combinations client-go's validation refuses.
  if ((token ?? tokenFile) !== undefined && (username ?? password) !== undefined) throw invalid(`${where} sets both a token and a username/password`);
  if (exec !== undefined && provider !== undefined && provider !== null) throw invalid(`${where} sets both exec and auth-provider`);

  return {
    name: entry.name,
    ...(token === undefined ? {} : { token }),
    ...(certData === undefined ? {} : { certData }),
    ...(keyData === undefined ? {} : { keyData }),
    ...(certFile === undefined ? {} : { certFile: localPath(certFile, `${where} client-certificate`, options, invalid) }),
    ...(keyFile === undefined ? {} : { keyFile: localPath(keyFile, `${where} client-key`, options, invalid) }),
    ...(exec === undefined ? {} : { exec: structuredClone(exec) }),
    ...(authProvider === undefined ? {} : { authProvider }),
    ...(username === undefined ? {} : { username }),
    ...(password === undefined ? {} : { password }),
    ...(impersonate === undefined ? {} : { impersonateUser: impersonate }),
  };
}

/** Where the local cluster's credentials come from; give exactly one of the two. */
export interface LocalKubeConfigOptions {
  /**
   * Path of a kubeconfig file. It is trusted (it belongs to whoever runs the service): exec and
   * auth-provider plugins, file references and http:// servers are accepted, and relative paths are
   * resolved against the file's directory, as kubectl does. One file, not a `KUBECONFIG` list.
   */
  readonly kubeconfigPath?: string | undefined;
  /** With `kubeconfigPath`: the context to use. Default the file's `current-context`. */
  readonly context?: string | undefined;
  /**
   * The pod's own service account. `host` and `port` are what the `KUBERNETES_SERVICE_HOST` and
   * `KUBERNETES_SERVICE_PORT` environment variables say: the caller reads the environment, the
   * library does not.
   */
  readonly inCluster?: {
    readonly host: string;
    readonly port: string | number;
    /** Directory of the mounted token, CA and namespace. Default `/var/run/secrets/kubernetes.io/serviceaccount`. */
    readonly serviceAccountDir?: string | undefined;
  } | undefined;
}

const serviceAccountDirDefault = '/var/run/secrets/kubernetes.io/serviceaccount';

/**
 * Builds the KubeConfig of the cluster the service runs against, for `LocalProvider`. Unlike
 * {@link loadKubeconfig} this reads files, so only the embedder calls it, with paths and
 * environment values it chose.
 */
export async function localKubeConfig(options: LocalKubeConfigOptions): Promise<KubeConfig> {
  const { kubeconfigPath, inCluster } = options;
  if ((kubeconfigPath === undefined) === (inCluster === undefined)) {
    throw new TypeError('localKubeConfig needs exactly one of the options kubeconfigPath and inCluster');
  }
  if (inCluster === undefined) {
    const file = nonEmptyString('localKubeConfig', 'kubeconfigPath', kubeconfigPath);
    const text = await readFile(file, 'utf8');
    return loadKubeconfig(text, { ...trusted, cluster: 'local', context: options.context, baseDirectory: path.dirname(path.resolve(file)) });
  }
  const host = inCluster.host;
  nonEmptyString('localKubeConfig', 'inCluster.host', host);
  const port = Number(inCluster.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new TypeError(`localKubeConfig option inCluster.port must be a TCP port, got ${JSON.stringify(inCluster.port)}`);
  const dir = inCluster.serviceAccountDir ?? serviceAccountDirDefault;
  let namespace: string | undefined;
  try {
    namespace = (await readFile(path.join(dir, 'namespace'), 'utf8')).trim();
  } catch {
    namespace = undefined;
  }
  const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'in-cluster', server, caFile: path.join(dir, 'ca.crt'), skipTLSVerify: false }],
    // The tokenFile authenticator re-reads the token, which the kubelet rotates.
    users: [{ name: 'in-cluster', authProvider: { name: 'tokenFile', config: { tokenFile: path.join(dir, 'token') } } }],
    contexts: [{ name: 'in-cluster', cluster: 'in-cluster', user: 'in-cluster', ...(namespace === undefined || namespace === '' ? {} : { namespace }) }],
    currentContext: 'in-cluster',
  });
  return kc;
}
