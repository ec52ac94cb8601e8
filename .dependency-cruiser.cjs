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
      comment: 'analyze-dump-worker.ts is analyze-dump\'s own worker thread; otherwise a stage stands alone.',
      from: { path: '^src/stages/([^/.]+)' },
      to: { path: '^src/stages/', pathNot: ['^src/stages/$1(-worker)?[.]ts$', '^src/stages/analyze-dump[.]ts$'] },
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
