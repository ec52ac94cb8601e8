#!/usr/bin/env bash
# The runner's two rules that dependency-cruiser cannot see (npm run lint runs this):
# a path under the state directory is named only in src/runner/state/, and a message
# to the operator goes through say.ts (main.ts, the subcommands' usage and errors and
# the terminal's progress line write stderr themselves).
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
if grep -rnE "path\.join\((o\.|plan\.)?state," src/runner --include=*.ts | grep -v '^src/runner/state/'; then
  echo "lint-runner: a STATE path built outside src/runner/state/ (use state/layout.ts)" >&2
  status=1
fi
if grep -rn 'process\.stderr\.write(' src/runner --include=*.ts | grep -vE '^src/runner/(say|main|views/subcommand|run/progress)\.ts:'; then
  echo "lint-runner: a message written to stderr outside say.ts (use say.warn or say.tell)" >&2
  status=1
fi
exit $status
