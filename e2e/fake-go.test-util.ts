// A fake `go` for the tests of e2e/build-binaries.sh: it logs every call to $FAKE_GO_LOG, answers
// `go env GOMODCACHE` with $FAKE_GO_MODCACHE, fails any subcommand it does not know, and answers the
// rest with the `case` arms each test gives (bash, with `$name` the directory it runs in).

/** The fake go script, with `arms` (the other `case "$1 $2"` arms, each ending `;;`) inside its case. */
export function fakeGoScript(arms: string): string {
  return `#!/usr/bin/env bash
set -euo pipefail
echo "$*" >>"$FAKE_GO_LOG"
name="$(basename "$PWD")"
case "$1 \${2:-}" in
  "env GOMODCACHE") echo "$FAKE_GO_MODCACHE" ;;
${arms}  *) echo "fake go: unexpected: go $*" >&2; exit 2 ;;
esac
`;
}
