import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isIP } from 'node:net';
import { abortReason, functionOption, positiveNumber, realClock, sleep, type Clock } from '../util/index.ts';
import { GitOpsError, type GitOpsReason } from './errors.ts';
import { checkRepositoryPath, DEFAULT_MAX_SCAN_BYTES, IMAGE_POLICY_PATTERN, markerFor, REVISION_PATTERN, updateMarkers, type MarkerSelector } from './marker.ts';
import { ProviderClient, type ProviderKind, type PullRequest } from './provider.ts';
import { pushOutcome } from './push.ts';
import { runGit, treeSize, type GitOutput } from './run.ts';
import { sparsePatterns, TreeListing } from './tree.ts';
import { checkUrl, pinUrl, type CheckedUrl, type PinnedUrl, type UrlPolicy } from './url.ts';

/** How to authenticate to the repository (and the provider's API). */
export type GitCredentials =
  | { readonly kind: 'none' }
  /** HTTPS: sent as an `Authorization: Basic` header through git's config from the environment, never in the URL or argv. */
  | { readonly kind: 'basic'; readonly username: string; readonly password: string }
  /** SSH: a private key and the known_hosts lines the server's key must match (strict checking). */
  | { readonly kind: 'ssh'; readonly identity: string; readonly knownHosts: string };

/** Where and how one environment is promoted. */
export interface GitPromotionRequest {
  readonly url: string;
  /** The branch the GitOps tool reconciles from: pushed to directly, or the pull request's base. */
  readonly branch: string;
  /** Directory of the repository to look for markers in. Default: the whole repository. */
  readonly path?: string | undefined;
  /** Open a pull request instead of pushing to `branch`. */
  readonly pullRequest?: { readonly provider: ProviderKind; readonly apiUrl?: string | undefined } | undefined;
  readonly marker: { readonly namespace: string; readonly pipeline: string; readonly environment: string };
  /**
   * `<namespace>:<name>` of the ImagePolicy whose Flux image-automation setters (`# {"$imagepolicy":
   * "<it>"}`, `"<it>:tag"`, `"<it>:name"`, `"<it>:digest"`) the environment owns beside its
   * `$promotion` markers: they get the revision as the image's tag ({@link setterValue}).
   */
  readonly imagePolicy?: string | undefined;
  readonly revision: string;
  readonly credentials: GitCredentials;
  readonly signal?: AbortSignal | undefined;
}

/** What a promotion through Git did. */
export type GitPromotionResult =
  /**
   * `created` false: the branch already had the revision at every marker (a re-run, or another
   * writer's push of the same promotion, possibly the very same commit); `sha` is its head then.
   * Of writers promoting the same thing at once, exactly one gets `created` true.
   */
  | { readonly kind: 'commit'; readonly sha: string; readonly created: boolean; readonly attempts: number }
  /** `created` false: the request existed already (a re-run, or a poll for its merge). */
  | { readonly kind: 'pull-request'; readonly pullRequest: PullRequest; readonly branch: string; readonly created: boolean; readonly sha: string | undefined };

/** Options of {@link GitPromoter}. */
export interface GitPromoterOptions extends UrlPolicy {
  /** Commit author and committer. Default `fleetcache <fleetcache@users.noreply.fleetcache.dev>`. */
  readonly author?: { readonly name: string; readonly email: string };
  /** The git binary. Default `/usr/bin/git` (Debian's). */
  readonly gitPath?: string;
  /** The ssh binary git runs for ssh:// URLs. Default `/usr/bin/ssh`. */
  readonly sshPath?: string;
  /** Where each operation's private directory is made. Default the OS temporary directory. */
  readonly tmpDir?: string;
  /** Bound on each git command (clone, fetch, push, …). Default 60 000. */
  readonly timeoutMs?: number;
  /**
   * Deadline of one promotion as a whole, every git command and provider call in it: at the
   * deadline the running git is killed and the promotion fails with `DeadlineExceeded`.
   * Default 180 000 (3 minutes).
   */
  readonly promotionTimeoutMs?: number;
  /**
   * Bound on the branch's files, their sizes added up from the objects' headers before anything
   * is checked out, and on the objects a clone or fetch writes to disk. Default 128 MiB.
   */
  readonly maxRepositoryBytes?: number;
  /** Bound on the number of files in the branch, counted before checkout. Default 50 000. */
  readonly maxRepositoryFiles?: number;
  /** YAML files under the path larger than this are neither checked out nor scanned. Default 1 MiB. */
  readonly maxFileBytes?: number;
  /** Bound on the YAML bytes the marker scan reads in one promotion. Default 32 MiB. */
  readonly maxScanBytes?: number;
  /**
   * Address space of each git process (the kernel's RLIMIT_AS, set with `prlimit`): git streams
   * large blobs (core.bigFileThreshold 1 MiB) and fails rather than grow past it. Default 256 MiB.
   */
  readonly maxGitMemoryBytes?: number;
  /**
   * util-linux's `prlimit`, which sets the hard limits on git (address space, and the size of any
   * file written at `maxRepositoryBytes`). Default `/usr/bin/prlimit`; empty: no hard limits.
   */
  readonly prlimitPath?: string;
  /** Pushes tried when concurrent pushes keep winning. Default 5. */
  readonly maxPushAttempts?: number;
  /** Bound on a provider API call, answer included. Default 10 000. */
  readonly providerTimeoutMs?: number;
  /** Bound on a provider API answer. Default 1 MiB. */
  readonly maxResponseBytes?: number;
  /** Default: the wall clock (git timeouts run on it). */
  readonly clock?: Clock;
}

const BRANCH_PATTERN = /^(?!.*\.\.)(?!.*\/\/)(?!.*\.lock$)(?!.*\/\.)[A-Za-z0-9][A-Za-z0-9._/-]{0,199}(?<![./])$/;
const MAX_OUTPUT = 1_048_576;
const MiB = 1_048_576;

// git's own bounds on memory, so that it streams what it can instead of holding it: blobs over
// 1 MiB are hashed and written as they are inflated (index-pack, checkout), pack windows and
// caches stay small, one thread. Together with the address-space limit, a small pack that
// inflates to hundreds of MiB costs a few MiB of memory.
const MEMORY_CONFIG = ['core.bigFileThreshold=1m', 'core.packedGitWindowSize=16m', 'core.packedGitLimit=64m', 'core.deltaBaseCacheLimit=16m', 'pack.windowMemory=16m', 'pack.deltaCacheSize=16m', 'pack.threads=1', 'core.sparseCheckout=true'];

/**
 * One component of a ref name that decodes to exactly `value`: letters, digits, `-` and `.` stay
 * (a `.` where git refuses it is escaped), every other byte is `_` and two hex digits (`_` too).
 * Past 150 characters: the first 150, `_h` (never an escape) and the SHA-256 of the whole.
 */
function refComponent(value: string): string {
  let out = '';
  for (const byte of Buffer.from(value, 'utf8')) {
    const c = String.fromCharCode(byte);
    const dot = c === '.' && (out === '' || out.endsWith('.'));
    out += /[A-Za-z0-9-]/.test(c) || (c === '.' && !dot) ? c : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  if (out.endsWith('.')) out = `${out.slice(0, -1)}_2E`;
  if (out.endsWith('.lock')) out = `${out.slice(0, -5)}_2Elock`;
  if (out.length <= 150) return out;
  return `${out.slice(0, 150)}_h${createHash('sha256').update(value).digest('hex')}`;
}

/**
 * `fleetcache/<namespace>/<pipeline>/<environment>/<revision>`, each a component of its own,
 * encoded by {@link refComponent}: two different ⟨namespace, pipeline, environment, revision⟩
 * never share a branch (and so never a pull request), which a restarted service computes again to
 * find its own request.
 */
export function pullRequestBranch(marker: GitPromotionRequest['marker'], revision: string): string {
  return ['fleetcache', marker.namespace, marker.pipeline, marker.environment, revision].map((v, i) => (i === 0 ? v : refComponent(v))).join('/');
}

/** `promise`, or the signal's reason as soon as it aborts (the promise is left to settle unobserved). */
async function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  let onAbort = (): void => undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = (): void => { reject(abortReason(signal)); };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  promise.catch(() => undefined);
  try {
    return await Promise.race([promise, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/** Checks a branch name the tenant wrote (a subset of git's ref-name rules, never option-like). */
export function checkBranch(branch: string): string {
  if (!BRANCH_PATTERN.test(branch)) throw new GitOpsError('InvalidInput', 'the branch is not a plain branch name');
  return branch;
}

/** How {@link GitPromoter} runs one git command. */
interface GitStep {
  readonly step: string;
  readonly failure: GitOpsReason;
  readonly signal: AbortSignal;
  /** Run in the workspace, not the clone (the clone itself). Default false. */
  readonly outsideRepo?: boolean;
  /** Resolve with a non-zero exit instead of rejecting (the caller reads it). Default false. */
  readonly allowFailure?: boolean;
  /** Stream stdout to this instead of collecting it (see {@link runGit}). */
  readonly onStdout?: (chunk: Buffer) => Error | undefined;
}

interface Workspace {
  readonly dir: string;
  readonly repo: string;
  readonly env: Readonly<Record<string, string>>;
  readonly config: readonly string[];
  readonly remote: string;
}

/**
 * Promotes a revision by committing it to the Git repository a GitOps tool (Flux) reconciles
 * from, with the `git` command: a shallow single-branch clone without checkout into a private
 * temporary directory (removed afterwards), the tree sized from its object headers and refused
 * past the limits ({@link TreeListing}), a sparse checkout of the YAML files under the path, the
 * lines marked for the environment set ({@link updateMarkers}), a commit, and a push to the
 * branch — or to a branch of its own with a pull request opened through the provider's API.
 *
 * Idempotent: a branch that already has the revision at its markers gets no second commit; a
 * pull request from the same head branch is found (open, merged or closed) rather than opened
 * again. A push that loses to a concurrent one, in any of the forms a race takes ({@link pushOutcome}),
 * fetches, re-applies and retries; a marked line someone else changed meanwhile is a
 * `MarkerConflict`, never overwritten.
 *
 * Hostile input: the URL is checked ({@link checkUrl}) and its host resolved once, every address
 * checked, and git pinned to that address (`http.curloptResolve`; for ssh, the address with
 * `HostKeyAlias`). git runs with no system or global config, no terminal prompts, no hooks, no
 * redirects, only the URL's protocol allowed, a timeout and bounded output; its stderr and the
 * provider's answers never reach an error message. The repository's content is hostile too: git
 * streams large blobs and runs under hard limits of address space and file size (`prlimit`), the
 * marker scan is linear and bounded, `path` never goes through a link, and one deadline
 * (`promotionTimeoutMs`) bounds the whole promotion.
 */
export class GitPromoter {
  readonly #policy: UrlPolicy;
  readonly #author: { readonly name: string; readonly email: string };
  readonly #gitPath: string;
  readonly #sshPath: string;
  readonly #tmpDir: string | undefined;
  readonly #timeoutMs: number;
  readonly #promotionTimeoutMs: number;
  readonly #maxRepositoryBytes: number;
  readonly #maxRepositoryFiles: number;
  readonly #maxFileBytes: number;
  readonly #maxScanBytes: number;
  readonly #maxGitMemoryBytes: number;
  readonly #prlimitPath: string;
  readonly #maxPushAttempts: number;
  readonly #providerTimeoutMs: number;
  readonly #maxResponseBytes: number;
  readonly #clock: Clock;

  constructor(options: GitPromoterOptions = {}) {
    const author = options.author ?? { name: 'fleetcache', email: 'fleetcache@users.noreply.fleetcache.dev' };
    // eslint-disable-next-line no-control-regex
    const bad = /[\u0000-\u001f<>]/;
    if (author.name === '' || author.email === '' || bad.test(author.name) || bad.test(author.email)) throw new TypeError('GitPromoter option author must have a non-empty name and email without control characters or <>');
    if (options.lookup !== undefined) functionOption('GitPromoter', 'lookup', options.lookup);
    this.#policy = { allowHttp: options.allowHttp === true, allowPrivateNetworks: options.allowPrivateNetworks === true, ...(options.lookup === undefined ? {} : { lookup: options.lookup }) };
    this.#author = { name: author.name, email: author.email };
    this.#gitPath = options.gitPath ?? '/usr/bin/git';
    this.#sshPath = options.sshPath ?? '/usr/bin/ssh';
    this.#tmpDir = options.tmpDir;
    this.#timeoutMs = positiveNumber('GitPromoter', 'timeoutMs', options.timeoutMs ?? 60_000);
    this.#promotionTimeoutMs = positiveNumber('GitPromoter', 'promotionTimeoutMs', options.promotionTimeoutMs ?? 180_000);
    this.#maxRepositoryBytes = positiveNumber('GitPromoter', 'maxRepositoryBytes', options.maxRepositoryBytes ?? 128 * MiB);
    this.#maxRepositoryFiles = Math.floor(positiveNumber('GitPromoter', 'maxRepositoryFiles', options.maxRepositoryFiles ?? 50_000));
    this.#maxFileBytes = positiveNumber('GitPromoter', 'maxFileBytes', options.maxFileBytes ?? MiB);
    this.#maxScanBytes = positiveNumber('GitPromoter', 'maxScanBytes', options.maxScanBytes ?? DEFAULT_MAX_SCAN_BYTES);
    this.#maxGitMemoryBytes = Math.floor(positiveNumber('GitPromoter', 'maxGitMemoryBytes', options.maxGitMemoryBytes ?? 256 * MiB));
    if (options.prlimitPath !== undefined && options.prlimitPath !== '' && !path.isAbsolute(options.prlimitPath)) throw new TypeError(`GitPromoter option prlimitPath must be an absolute path or empty, got ${JSON.stringify(options.prlimitPath)}`);
    this.#prlimitPath = options.prlimitPath ?? '/usr/bin/prlimit';
    this.#maxPushAttempts = Math.floor(positiveNumber('GitPromoter', 'maxPushAttempts', options.maxPushAttempts ?? 5));
    this.#providerTimeoutMs = positiveNumber('GitPromoter', 'providerTimeoutMs', options.providerTimeoutMs ?? 10_000);
    this.#maxResponseBytes = positiveNumber('GitPromoter', 'maxResponseBytes', options.maxResponseBytes ?? 1_048_576);
    this.#clock = options.clock ?? realClock;
  }

  /**
   * Carries out one promotion within its deadline (`promotionTimeoutMs`); rejects with a
   * {@link GitOpsError}, or the signal's reason.
   */
  async promote(request: GitPromotionRequest): Promise<GitPromotionResult> {
    if (!REVISION_PATTERN.test(request.revision)) throw new GitOpsError('InvalidInput', 'the revision is not a plain version, tag or commit name');
    const branch = checkBranch(request.branch);
    if (request.imagePolicy !== undefined && !IMAGE_POLICY_PATTERN.test(request.imagePolicy)) throw new GitOpsError('InvalidInput', 'the image policy is not <namespace>:<name>');
    const subdir = checkRepositoryPath(request.path ?? '.');
    const checked = checkUrl(request.url, { ...this.#policy, allowSsh: true });
    if (checked.scheme === 'ssh' && request.credentials.kind !== 'ssh') throw new GitOpsError('UrlRefused', 'an ssh:// repository needs an SSH key and known_hosts in the Secret');
    if (checked.scheme !== 'ssh' && request.credentials.kind === 'ssh') throw new GitOpsError('UrlRefused', 'an SSH key is only used with an ssh:// repository URL');
    // One deadline for everything below: each git command and provider call is stopped by it.
    const deadline = new AbortController();
    const timer = this.#clock.setTimer(this.#promotionTimeoutMs, () => {
      deadline.abort(new GitOpsError('DeadlineExceeded', `the promotion did not finish within its deadline of ${this.#promotionTimeoutMs} ms (promotionTimeoutMs)`));
    });
    const signal = request.signal === undefined ? deadline.signal : AbortSignal.any([deadline.signal, request.signal]);
    try {
      return await this.#promote(request, { branch, subdir, checked, signal });
    } finally {
      timer.cancel();
    }
  }

  async #promote(request: GitPromotionRequest, checkedRequest: { readonly branch: string; readonly subdir: string; readonly checked: CheckedUrl; readonly signal: AbortSignal }): Promise<GitPromotionResult> {
    const { branch, subdir, checked, signal } = checkedRequest;
    const pinned = await raceAbort(pinUrl(checked, this.#policy), signal);

    const pr = request.pullRequest;
    let provider: ProviderClient | undefined;
    let head: string | undefined;
    if (pr !== undefined) {
      provider = new ProviderClient({
        kind: pr.provider,
        apiUrl: pr.apiUrl,
        repositoryUrl: checked.url,
        token: request.credentials.kind === 'basic' ? request.credentials.password : undefined,
        policy: this.#policy,
        timeoutMs: this.#providerTimeoutMs,
        maxResponseBytes: this.#maxResponseBytes,
        signal,
      });
      head = pullRequestBranch(request.marker, request.revision);
      // A re-run (or a poll for the merge) finds the request the first run opened.
      const existing = await provider.find(head, branch);
      if (existing !== undefined) return { kind: 'pull-request', pullRequest: existing, branch: head, created: false, sha: undefined };
    }

    const work = await this.#workspace(pinned, request.credentials);
    try {
      // No checkout yet: the tree's sizes are read from the objects' headers first.
      await this.#git(work, ['clone', '--no-checkout', '--depth', '1', '--single-branch', '--branch', branch, '--no-tags', '--template=', '--', work.remote, work.repo], { step: 'clone', failure: 'CloneFailed', signal, outsideRepo: true });
      if (await treeSize(work.repo, this.#maxRepositoryBytes) > this.#maxRepositoryBytes) throw new GitOpsError('RepositoryTooLarge', `the clone is larger than ${this.#maxRepositoryBytes} bytes (maxRepositoryBytes)`);
      await this.#checkout(work, 'HEAD', subdir, ['read-tree', '-mu', 'HEAD'], signal);
      const marker: MarkerSelector = { promotion: markerFor(request.marker.namespace, request.marker.pipeline, request.marker.environment), imagePolicy: request.imagePolicy };
      const message = `promote ${request.marker.namespace}/${request.marker.pipeline} to ${request.marker.environment}: ${request.revision}\n\n`
        + `Pipeline: ${request.marker.namespace}/${request.marker.pipeline}\nEnvironment: ${request.marker.environment}\nRevision: ${request.revision}\n`;
      const scan = { maxFileBytes: this.#maxFileBytes, maxScanBytes: this.#maxScanBytes, budget: { bytesRead: 0 }, signal };

      // What the marked lines held on the tip the promotion began from: a later attempt, on a tip
      // someone else moved, never overwrites a line changed since (MarkerConflict).
      let began: ReadonlyMap<string, readonly string[]> | undefined;
      for (let attempt = 1; ; attempt++) {
        const update = await updateMarkers(work.repo, subdir, marker, request.revision, { ...scan, began });
        began ??= update.held;
        if (update.changedFiles.length === 0) {
          return { kind: 'commit', sha: await this.#head(work, signal), created: false, attempts: attempt };
        }
        await this.#git(work, ['add', '--', ...update.changedFiles], { step: 'add', failure: 'CommitFailed', signal });
        const messageFile = path.join(work.dir, 'message');
        await writeFile(messageFile, message);
        await this.#git(work, ['commit', '--quiet', '--no-verify', '--no-gpg-sign', '-F', messageFile], { step: 'commit', failure: 'CommitFailed', signal });
        const sha = await this.#head(work, signal);
        const target = head === undefined ? `HEAD:refs/heads/${branch}` : `+HEAD:refs/heads/${head}`;
        const push = await this.#git(work, ['push', '--porcelain', '--no-verify', '--', 'origin', target], { step: 'push', failure: 'PushFailed', signal, allowFailure: true });
        const outcome = pushOutcome(push.exitCode, push.stdout, push.stderr, `refs/heads/${head ?? branch}`);
        if (outcome === 'pushed' || outcome === 'present') {
          // `present`: another writer pushed this very commit (same parent, tree, message, author
          // and second, so the same SHA) first; the branch carries the change, but not by us.
          if (provider === undefined || head === undefined) return { kind: 'commit', sha, created: outcome === 'pushed', attempts: attempt };
          const title = `Promote ${request.marker.pipeline} to ${request.marker.environment}: ${request.revision}`;
          const body = `fleetcache promotes revision \`${request.revision}\` of pipeline \`${request.marker.namespace}/${request.marker.pipeline}\` into environment \`${request.marker.environment}\`.`;
          const opened = await provider.create(head, branch, title, body) ?? await provider.find(head, branch);
          if (opened === undefined) throw new GitOpsError('ProviderError', 'the provider refused to open the request and lists none for the branch');
          return { kind: 'pull-request', pullRequest: opened, branch: head, created: true, sha };
        }
        // A lost race, in whichever words (ours or the server's): fetch, re-apply on the new tip, push.
        if (outcome !== 'lost' || head !== undefined) throw new GitOpsError('PushFailed', `git push exited with code ${push.exitCode}`, { exitCode: push.exitCode });
        if (attempt >= this.#maxPushAttempts) throw new GitOpsError('PushConflict', `the branch kept moving: ${attempt} pushes lost to concurrent ones (maxPushAttempts)`);
        // Writers that lost together should not collide again at once: up to 50 ms × attempt.
        await sleep(Math.floor(Math.random() * 50 * attempt), signal, this.#clock);
        const remoteRef = `refs/remotes/origin/${branch}`;
        await this.#git(work, ['fetch', '--depth', '1', '--no-tags', '--', 'origin', `+refs/heads/${branch}:${remoteRef}`], { step: 'fetch', failure: 'CloneFailed', signal });
        // The branch moved: its new tree is sized and checked like the first before it is checked out.
        await this.#checkout(work, remoteRef, subdir, ['reset', '--quiet', '--hard', remoteRef], signal);
      }
    } finally {
      await rm(work.dir, { recursive: true, force: true });
    }
  }

  /**
   * Lists `ref`'s tree with each file's size from its object header (`git ls-tree -l`, nothing
   * inflated), refuses it past `maxRepositoryBytes`/`maxRepositoryFiles` or when `git.path` goes
   * through a link, then checks out with `checkout` only the YAML files under the path (sparse).
   */
  async #checkout(work: Workspace, ref: string, subdir: string, checkout: readonly string[], signal: AbortSignal): Promise<void> {
    const listing = new TreeListing(subdir, { maxBytes: this.#maxRepositoryBytes, maxFiles: this.#maxRepositoryFiles, maxFileBytes: this.#maxFileBytes });
    await this.#git(work, ['ls-tree', '-r', '-l', '-z', '--full-tree', ref], { step: 'ls-tree', failure: 'CloneFailed', signal, onStdout: (chunk) => listing.push(chunk) });
    const tree = listing.summary();
    await mkdir(path.join(work.repo, '.git', 'info'), { recursive: true });
    await writeFile(path.join(work.repo, '.git', 'info', 'sparse-checkout'), sparsePatterns(subdir, tree.oversized));
    await this.#git(work, checkout, { step: 'checkout', failure: 'CloneFailed', signal });
  }

  /** A private directory with the environment and config every git command of one operation gets. */
  async #workspace(pinned: PinnedUrl, credentials: GitCredentials): Promise<Workspace> {
    const dir = await mkdtemp(path.join(this.#tmpDir ?? tmpdir(), 'fleetcache-git-'));
    try {
      const home = path.join(dir, 'home');
      await mkdir(home, { mode: 0o700 });
      const env: Record<string, string> = {
        PATH: '/usr/bin:/bin',
        HOME: home,
        LC_ALL: 'C',
        GIT_TERMINAL_PROMPT: '0',
        // Fewer malloc arenas: each reserves 64 MiB of the address space git is limited to.
        MALLOC_ARENA_MAX: '2',
        GIT_ASKPASS: '/bin/false',
        SSH_ASKPASS: '/bin/false',
        GIT_CONFIG_NOSYSTEM: '1',
        GIT_CONFIG_GLOBAL: '/dev/null',
        GIT_ALLOW_PROTOCOL: pinned.scheme,
        GIT_PROTOCOL_FROM_USER: '0',
        GIT_AUTHOR_NAME: this.#author.name,
        GIT_AUTHOR_EMAIL: this.#author.email,
        GIT_COMMITTER_NAME: this.#author.name,
        GIT_COMMITTER_EMAIL: this.#author.email,
      };
      const config = [...MEMORY_CONFIG.flatMap((c) => ['-c', c]), '-c', 'core.hooksPath=/dev/null', '-c', 'credential.helper=', '-c', 'http.followRedirects=false', '-c', 'submodule.recurse=false', '-c', 'protocol.allow=never', '-c', `protocol.${pinned.scheme}.allow=always`];
      let remote = pinned.url.href;
      if (pinned.scheme === 'ssh') {
        if (credentials.kind !== 'ssh') throw new GitOpsError('UrlRefused', 'an ssh:// repository needs an SSH key');
        const identity = path.join(dir, 'identity');
        const knownHosts = path.join(dir, 'known_hosts');
        await writeFile(identity, credentials.identity.endsWith('\n') ? credentials.identity : `${credentials.identity}\n`, { mode: 0o600 });
        await writeFile(knownHosts, credentials.knownHosts, { mode: 0o600 });
        // Connect to the checked address; the host key is still checked against the host's name.
        const user = pinned.url.username === '' ? '' : `${pinned.url.username}@`;
        const address = isIP(pinned.address) === 6 ? `[${pinned.address}]` : pinned.address;
        remote = `ssh://${user}${address}:${pinned.port}${pinned.url.pathname}`;
        env.GIT_SSH_COMMAND = [this.#sshPath, '-F', '/dev/null', '-i', identity, '-o', 'IdentitiesOnly=yes', '-o', 'StrictHostKeyChecking=yes', '-o', `UserKnownHostsFile=${knownHosts}`,
          '-o', 'GlobalKnownHostsFile=/dev/null', '-o', `HostKeyAlias=${pinned.port === 22 ? pinned.host : `[${pinned.host}]:${pinned.port}`}`, '-o', 'BatchMode=yes', '-o', 'ProxyCommand=none', '-o', 'ConnectTimeout=15']
          .map((a) => `'${a.replaceAll("'", "'\\''")}'`).join(' ');
        env.GIT_SSH_VARIANT = 'ssh';
      } else {
        const resolveHost = pinned.host.includes(':') ? `[${pinned.host}]` : pinned.host;
        const resolveAddress = isIP(pinned.address) === 6 ? `[${pinned.address}]` : pinned.address;
        config.push('-c', `http.curloptResolve=${resolveHost}:${pinned.port}:${resolveAddress}`);
        if (credentials.kind === 'basic') {
          // From the environment, so the token is in no argv (ps) and no URL (logs, .git/config).
          env.GIT_CONFIG_COUNT = '1';
          env.GIT_CONFIG_KEY_0 = 'http.extraHeader';
          env.GIT_CONFIG_VALUE_0 = `Authorization: Basic ${Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64')}`;
        }
      }
      return { dir, repo: path.join(dir, 'repo'), env, config, remote };
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw err;
    }
  }

  async #head(work: Workspace, signal: AbortSignal): Promise<string> {
    const out = await this.#git(work, ['rev-parse', 'HEAD'], { step: 'rev-parse', failure: 'CloneFailed', signal });
    return out.stdout.trim();
  }

  /** Runs one git command in the workspace (in the clone unless `outsideRepo`); a non-zero exit rejects unless `allowFailure`. */
  async #git(work: Workspace, args: readonly string[], how: GitStep): Promise<GitOutput> {
    const { step, failure, signal } = how;
    const output = await runGit({
      gitPath: this.#gitPath,
      args: [...work.config, ...(how.outsideRepo === true ? [] : ['-C', work.repo]), ...args],
      cwd: work.dir,
      env: work.env,
      step,
      failure,
      timeoutMs: this.#timeoutMs,
      maxOutputBytes: MAX_OUTPUT,
      sizeLimit: step === 'clone' || step === 'fetch' ? { dir: work.dir, maxBytes: this.#maxRepositoryBytes } : undefined,
      clock: this.#clock,
      signal,
      hardLimits: this.#prlimitPath === '' ? undefined : { prlimitPath: this.#prlimitPath, maxMemoryBytes: this.#maxGitMemoryBytes, maxFileBytes: this.#maxRepositoryBytes },
      onStdout: how.onStdout,
    });
    if (how.allowFailure !== true && output.exitCode !== 0) throw new GitOpsError(failure, `git ${step} exited with code ${output.exitCode}`, { exitCode: output.exitCode });
    return output;
  }
}
