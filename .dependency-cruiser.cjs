// The layers of src/ and the no-circle rule, checked by `npm run lint` (dependency-cruiser).
// Layers import downward only: core <- cli <- stages <- runner <- admin, where the runner and
// admin talk to stages only as processes (never by import) and admin never imports the runner.
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import circle anywhere, type-only imports included: a shared type lives where both sides import it.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-is-the-bottom',
      severity: 'error',
      comment: 'src/core imports only src/core (and Node.js and libraries).',
      from: { path: '^src/core/' },
      to: { path: '^src/(cli|stages|runner|admin)/' },
    },
    {
      name: 'core-has-no-command-line',
      severity: 'error',
      comment: 'Command-line parsing (commander) belongs to src/cli and above, not to the pure core.',
      from: { path: '^src/core/' },
      to: { path: 'node_modules/commander/' },
    },
    {
      name: 'cli-over-core-only',
      severity: 'error',
      from: { path: '^src/cli/' },
      to: { path: '^src/(stages|runner|admin)/' },
    },
    {
      name: 'stages-over-cli-and-core',
      severity: 'error',
      comment: 'A stage imports core and cli only, never the runner, admin or another stage.',
      from: { path: '^src/stages/' },
      to: { path: '^src/(runner|admin)/' },
    },
    {
      name: 'no-stage-imports-another',
      severity: 'error',
      comment:
        'A stage stands alone but for its own modules, named after it (analyze-dump-worker.ts, -batch.ts, -parse.ts, limit-domains-rank.ts, upload-domains-route.ts).',
      from: { path: '^src/stages/([^/.]+?)(-worker|-rank|-batch|-parse|-route)?[.]ts$' },
      to: { path: '^src/stages/', pathNot: ['^src/stages/$1(-worker|-rank|-batch|-parse|-route)?[.]ts$', '^src/stages/analyze-dump[.]ts$'] },
    },
    {
      name: 'runner-runs-stages-as-processes',
      severity: 'error',
      comment: 'The runner runs the stages as child processes; what both need lives in core.',
      from: { path: '^src/runner/' },
      to: { path: '^src/(stages|admin)/' },
    },
    {
      name: 'admin-not-over-runner',
      severity: 'error',
      comment: 'partner-db and owner use the store in core, not the cron runner or a stage.',
      from: { path: '^src/admin/' },
      to: { path: '^src/(runner|stages)/' },
    },
    // Inside the runner (docs/design.md "Source layout"): state <- options <- checks,
    // commit <- run <- invocation; views over checks, never a run, the commit or the
    // process runner, so a status can neither publish nor load child_process code.
    ...[
      ['state', 'state/|say[.]ts$'],
      ['options', '(options|state)/|say[.]ts$'],
      ['checks', '(checks|options|state)/|say[.]ts$'],
      ['commit', '(commit|options|state)/|say[.]ts$'],
      ['run', '(run|commit|checks|options|state)/|say[.]ts$'],
      ['invocation', '(invocation|run|commit|checks|options|state)/|say[.]ts$'],
      ['views', '(views|checks|options|state)/|say[.]ts$'],
    ].map(([folder, allowed]) => ({
      name: `runner-${folder}-imports-downward`,
      severity: 'error',
      comment: 'Inside the runner: state <- options <- checks, commit <- run <- invocation; views over checks (docs/design.md).',
      from: { path: `^src/runner/${folder}/` },
      to: { path: '^src/runner/', pathNot: `^src/runner/(${allowed})` },
    })),
    {
      name: 'runner-say-is-a-leaf',
      severity: 'error',
      comment: 'say.ts (PROG and the messages) imports nothing of the runner.',
      from: { path: '^src/runner/say[.]ts$' },
      to: { path: '^src/runner/' },
    },
    {
      name: 'runner-entry-on-top',
      severity: 'error',
      comment: 'main.ts is the entry: nothing in src imports it.',
      from: { path: '^src/', pathNot: '^src/runner/main[.]ts$' },
      to: { path: '^src/runner/main[.]ts$' },
    },
    {
      name: 'runner-no-loose-files',
      severity: 'error',
      comment: 'Only main.ts and say.ts sit in src/runner itself; the rest is in a folder by concern.',
      from: { path: '^src/runner/[^/]+[.]ts$', pathNot: '^src/runner/(main|say)[.]ts$' },
      to: {},
    },
    {
      name: 'src-not-over-scripts-or-tests',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(scripts|test|bench)/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
  ],
  options: {
    parser: 'swc',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'], mainFields: ['module', 'main', 'types'] },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|bench/out)/' },
    reporterOptions: { text: { highlightFocused: true } },
  },
};
