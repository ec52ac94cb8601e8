#!/usr/bin/env bash
# The proof of no change: scripts/compare-runner.ts run with the tree at BASE (a
# commit) and this one, each built, on HOURS generated hours of LINES lines.
# Usage: scripts/compare-runner.sh BASE [HOURS] [LINES] [--only REGEX]   (default 8 hours of 50000)
set -euo pipefail
cd "$(dirname "$0")/.."
base=${1:?usage: scripts/compare-runner.sh BASE [HOURS] [LINES]}
hours=${2:-8}
lines=${3:-50000}
w=$(mktemp -d "${TMPDIR:-/tmp}/compare-runner.XXXXXX")
trap 'git worktree remove --force "$w/base" 2>/dev/null || true; rm -rf "$w"' EXIT
git worktree add --quiet --detach "$w/base" "$base"
# The same runtime dependencies and addon for both (the lockfile is not what changes).
ln -s "$PWD/node_modules" "$w/base/node_modules"
[[ -d build ]] && ln -s "$PWD/build" "$w/base/build"
# tsc leaves the files of a moved module behind: a stale one would let an old import pass.
rm -rf dist "$w/base/dist"
npx tsc -p .
npx tsc -p "$w/base"
echo "compare-runner: base $(git rev-parse --short "$base"), new $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
node dist/scripts/compare-runner.js --base "$w/base" --new "$PWD" --work "$w" --hours "$hours" --lines "$lines" "${@:4}"
