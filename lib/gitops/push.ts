// What `git push --porcelain` to one ref came to. Its output names each ref on a line
// `<flag>\t<from>:<to>\t<summary>`: flag ` ` (fast-forward), `+` (forced), `*` (new ref), `=` (the
// remote already had it), `!` (refused, with `[rejected] (<why>)` from our side or
// `[remote rejected] (<why>)` from the server's). The text is read for the decision only, never
// quoted: the server wrote it.

/**
 * `pushed`: the ref moved to our commit. `present`: the ref already was our commit (another writer
 * pushed the very same commit: same parent, tree, message, author and second). `lost`: the ref
 * moved under us, in any of the forms a race takes. `failed`: anything else.
 */
export type PushOutcome = 'pushed' | 'present' | 'lost' | 'failed';

/**
 * The reasons, from either side, that mean "the branch is no longer where this push thought":
 * our git's `fetch first`, `non-fast-forward`, `stale info`; the server's when a concurrent push
 * moved the ref between its advertisement and our update (git's receive-pack says `failed to
 * update ref`, `cannot lock ref … is at X but expected Y` or `incorrect old value provided`; others
 * `failed to lock`).
 */
const RACE_REASONS = ['fetch first', 'non-fast-forward', 'stale info', 'failed to update ref', 'cannot lock ref', 'incorrect old value', 'failed to lock'];

function raced(text: string): boolean {
  const lower = text.toLowerCase();
  return RACE_REASONS.some((r) => lower.includes(r));
}

/**
 * Reads `git push --porcelain` pushing to `ref` (`refs/heads/<branch>`): the line for that ref
 * decides; without one, an exit 0 is `pushed`, and otherwise (git gave up before the exchange) a
 * race is recognised in stderr's words and anything else is `failed`. Linear: `includes` and `split`, no regular expression.
 */
export function pushOutcome(exitCode: number, stdout: string, stderr: string, ref: string): PushOutcome {
  for (const line of stdout.split('\n')) {
    const fields = line.replace(/\r$/, '').split('\t');
    if (fields.length < 3) continue;
    const [flag, refs = '', summary = ''] = fields;
    if (!refs.endsWith(`:${ref}`)) continue;
    if (flag === '=') return 'present';
    if (flag === '!') {
      if (summary.startsWith('[rejected]')) return 'lost';
      if (summary.startsWith('[remote rejected]')) return raced(summary) ? 'lost' : 'failed';
      return 'failed';
    }
    return exitCode === 0 ? 'pushed' : 'failed';
  }
  if (exitCode === 0) return 'pushed';
  return raced(stderr) ? 'lost' : 'failed';
}
