// A real Git server for tests and the demo: Debian's `git http-backend` (smart HTTP, the CGI that
// cgit, GitLab's workhorse predecessors and Apache setups use) behind a small node:http CGI
// bridge on loopback, with optional Basic auth, over bare repositories the caller seeds.
import { execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const exec = promisify(execFile);
const HTTP_BACKEND = '/usr/lib/git-core/git-http-backend';
const ENV = { PATH: '/usr/bin:/bin', HOME: '/nonexistent', GIT_CONFIG_NOSYSTEM: '1', GIT_CONFIG_GLOBAL: '/dev/null', LC_ALL: 'C' };

/** One request the server answered. */
export interface SeenRequest {
  readonly method: string;
  readonly url: string;
  readonly authorization: string | undefined;
  readonly status: number;
}

/** Runs git for test setup (never the code under test). */
export async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await exec('/usr/bin/git', ['-c', 'user.name=seed', '-c', 'user.email=seed@example.test', '-c', 'init.defaultBranch=main', ...args], { cwd, env: ENV });
  return stdout;
}

export interface GitServerOptions {
  /** Require `Authorization: Basic` with these. Default: no authentication. */
  readonly auth?: { readonly username: string; readonly password: string };
  /** Called before each request is served; may change the repositories (a concurrent push). */
  readonly beforeRequest?: (request: { readonly method: string; readonly url: string }) => Promise<void>;
}

/** `git http-backend` on 127.0.0.1. */
export class GitServer {
  readonly root: string;
  readonly requests: SeenRequest[] = [];
  readonly #server: http.Server;
  #options: GitServerOptions;

  private constructor(root: string, server: http.Server, options: GitServerOptions) {
    this.root = root;
    this.#server = server;
    this.#options = options;
  }

  static async start(options: GitServerOptions = {}): Promise<GitServer> {
    const root = await mkdtemp(path.join(tmpdir(), 'fleetcache-gitserver-'));
    const server = http.createServer();
    const instance = new GitServer(root, server, options);
    server.on('request', (req, res) => { void instance.#serve(req, res); });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return instance;
  }

  set options(options: GitServerOptions) {
    this.#options = options;
  }

  get port(): number {
    return (this.#server.address() as AddressInfo).port;
  }

  /** `http://127.0.0.1:<port>/<name>.git`. */
  url(name: string, host = '127.0.0.1'): string {
    return `http://${host}:${this.port}/${name}.git`;
  }

  /** The bare repository's directory. */
  bare(name: string): string {
    return path.join(this.root, `${name}.git`);
  }

  /** Creates a bare repository with one commit on `main` holding `files`. */
  async seed(name: string, files: Readonly<Record<string, string>>): Promise<void> {
    const bare = this.bare(name);
    await git(this.root, 'init', '--quiet', '--bare', bare);
    await git(bare, 'config', 'http.receivepack', 'true');
    await this.commit(name, files, 'seed');
  }

  /** Commits `files` on top of `branch` straight into the bare repository (another writer). */
  async commit(name: string, files: Readonly<Record<string, string>>, message: string, branch = 'main'): Promise<string> {
    const work = await mkdtemp(path.join(tmpdir(), 'fleetcache-gitseed-'));
    try {
      const bare = this.bare(name);
      const has = (await git(bare, 'for-each-ref', `refs/heads/${branch}`)).trim() !== '';
      if (has) await git(work, 'clone', '--quiet', '--branch', branch, bare, '.');
      else await git(work, 'init', '--quiet', '-b', branch);
      for (const [file, text] of Object.entries(files)) {
        await mkdir(path.dirname(path.join(work, file)), { recursive: true });
        await writeFile(path.join(work, file), text);
      }
      await git(work, 'add', '--all');
      await git(work, 'commit', '--quiet', '-m', message);
      await git(work, 'push', '--quiet', bare, `HEAD:refs/heads/${branch}`);
      return (await git(work, 'rev-parse', 'HEAD')).trim();
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /**
   * Commits a file of `bytes` zero bytes on top of `branch`, streamed into the object store (never
   * written out as a file): a small pack that inflates to a large tree.
   */
  async commitZeros(name: string, file: string, bytes: number, message: string, branch = 'main'): Promise<string> {
    const oid = await this.#hashObject(name, (stdin) => {
      const chunk = Buffer.alloc(1_048_576);
      let left = bytes;
      const write = (): void => {
        while (left > 0) {
          const part = left >= chunk.length ? chunk : chunk.subarray(0, left);
          left -= part.length;
          if (!stdin.write(part)) {
            stdin.once('drain', write);
            return;
          }
        }
        stdin.end();
      };
      write();
    });
    return this.#commitEntry(name, '100644', oid, file, message, branch);
  }

  /** Commits a symbolic link `file` → `target` on top of `branch` (a tenant's repository may hold any). */
  async commitSymlink(name: string, file: string, target: string, message: string, branch = 'main'): Promise<string> {
    const oid = await this.#hashObject(name, (stdin) => { stdin.end(target); });
    return this.#commitEntry(name, '120000', oid, file, message, branch);
  }

  async #hashObject(name: string, feed: (stdin: NodeJS.WritableStream) => void): Promise<string> {
    const child = spawn('/usr/bin/git', ['hash-object', '-w', '--stdin'], { cwd: this.bare(name), env: ENV, stdio: ['pipe', 'pipe', 'ignore'] });
    const out: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    const done = new Promise<number | null>((resolve, reject) => { child.on('error', reject); child.on('close', resolve); });
    feed(child.stdin);
    if (await done !== 0) throw new Error('git hash-object failed');
    return Buffer.concat(out).toString('utf8').trim();
  }

  async #commitEntry(name: string, mode: string, oid: string, file: string, message: string, branch: string): Promise<string> {
    const bare = this.bare(name);
    const index = path.join(await mkdtemp(path.join(tmpdir(), 'fleetcache-gitindex-')), 'index');
    const run = async (...args: string[]): Promise<string> => (await exec('/usr/bin/git', ['-c', 'user.name=seed', '-c', 'user.email=seed@example.test', ...args], { cwd: bare, env: { ...ENV, GIT_INDEX_FILE: index } })).stdout.trim();
    try {
      await run('read-tree', branch);
      await run('update-index', '--add', '--cacheinfo', `${mode},${oid},${file}`);
      const tree = await run('write-tree');
      const commit = await run('commit-tree', tree, '-p', branch, '-m', message);
      await run('update-ref', `refs/heads/${branch}`, commit);
      return commit;
    } finally {
      await rm(path.dirname(index), { recursive: true, force: true });
    }
  }

  /** `git show <ref>:<file>` in the bare repository. */
  async show(name: string, ref: string, file: string): Promise<string> {
    return git(this.bare(name), 'show', `${ref}:${file}`);
  }

  async close(): Promise<void> {
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => { resolve(); }));
    await rm(this.root, { recursive: true, force: true });
  }

  async #serve(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const method = req.method ?? 'GET';
    const url = req.url ?? '/';
    const authorization = req.headers.authorization;
    const record = (status: number): void => { this.requests.push({ method, url, authorization, status }); };
    try {
      const auth = this.#options.auth;
      if (auth !== undefined && authorization !== `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`) {
        record(401);
        res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' }).end();
        return;
      }
      await this.#options.beforeRequest?.({ method, url });
      const parsed = new URL(url, 'http://git.invalid');
      const child = spawn(HTTP_BACKEND, [], {
        env: {
          ...ENV,
          GIT_PROJECT_ROOT: this.root,
          GIT_HTTP_EXPORT_ALL: '1',
          REMOTE_USER: 'tester',
          REMOTE_ADDR: '127.0.0.1',
          REQUEST_METHOD: method,
          PATH_INFO: decodeURIComponent(parsed.pathname),
          QUERY_STRING: parsed.search.slice(1),
          CONTENT_TYPE: req.headers['content-type'] ?? '',
          ...(req.headers['content-encoding'] === undefined ? {} : { HTTP_CONTENT_ENCODING: req.headers['content-encoding'] }),
          ...(req.headers['git-protocol'] === undefined ? {} : { GIT_PROTOCOL: String(req.headers['git-protocol']) }),
        },
        stdio: ['pipe', 'pipe', 'ignore'],
      });
      req.pipe(child.stdin);
      const chunks: Buffer[] = [];
      child.stdout.on('data', (c: Buffer) => chunks.push(c));
      await new Promise<void>((resolve, reject) => { child.on('error', reject); child.on('close', () => { resolve(); }); });
      const out = Buffer.concat(chunks);
      const split = out.indexOf('\r\n\r\n') >= 0 ? out.indexOf('\r\n\r\n') : out.indexOf('\n\n');
      const gap = out.indexOf('\r\n\r\n') >= 0 ? 4 : 2;
      const headerText = out.subarray(0, split).toString('latin1');
      const headers: Record<string, string> = {};
      let status = 200;
      for (const line of headerText.split(/\r?\n/)) {
        const colon = line.indexOf(':');
        if (colon < 0) continue;
        const key = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (key.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else headers[key] = value;
      }
      record(status);
      res.writeHead(status, headers).end(out.subarray(split + gap));
    } catch (err) {
      record(500);
      res.writeHead(500).end(String(err));
    }
  }
}
