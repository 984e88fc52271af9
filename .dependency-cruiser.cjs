/**
 * The rooms of the house and the imports allowed between them: the source of truth for the layout
 * that ARCHITECTURE.md draws. `npm run lint` (and so `npm test`) fails on any import these rules
 * forbid. Type-only imports count too: a room that names another room's types depends on it.
 *
 *   core/      pure model and decisions              → core/ only (and pure libraries)
 *   platform/  OS helpers                            → Node only (and core/errors.ts, the shared error vocabulary)
 *   router/    the `cutover proxy` program           → core/, platform/
 *   engine/    runners, state, sources, drivers, API → core/, platform/ (router/: only its route driver)
 *   views/     renderers shared by the front ends    → core/
 *   cli/ server/ watch/   front ends                 → engine/api.ts and the MigrationService, views/, core/; nothing imports cli/
 *   ui/        the dashboard (runs in a browser)     → views/, core/ (pure modules, bundled); nothing imports ui/
 */
const frontEnds = '^(cli|server|watch)/';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'No import circles between files: a circle is two modules that are really one.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-imports-core-only',
      comment: 'core/ is the pure model: it imports nothing from the other rooms.',
      severity: 'error',
      from: { path: '^core/' },
      to: { path: '^(platform|router|engine|views|cli|server|watch)/' },
    },
    {
      name: 'core-has-no-effects',
      comment:
        'core/ does no I/O: of Node it may load modules lazily (node:module) and hash (node:crypto), nothing else.',
      severity: 'error',
      from: { path: '^core/' },
      to: { dependencyTypes: ['core'], pathNot: '^(node:)?(module|crypto)$' },
    },
    {
      name: 'core-uses-pure-libraries',
      comment: 'core/ may use the YAML parsers and the schema validator, which do no I/O; no other package.',
      severity: 'error',
      from: { path: '^core/' },
      to: {
        dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'],
        // Unanchored: node_modules may be a link to an install elsewhere.
        pathNot: 'node_modules/(ajv|yaml|js-yaml|@types/js-yaml)/',
      },
    },
    {
      name: 'platform-is-node-only',
      comment: 'platform/ wraps the OS: it imports Node and, for its errors, core/errors.ts; no other room.',
      severity: 'error',
      from: { path: '^platform/' },
      to: { path: '^(core|router|engine|views|cli|server|watch)/', pathNot: '^core/errors\\.ts$' },
    },
    {
      name: 'platform-uses-no-packages',
      severity: 'error',
      from: { path: '^platform/' },
      to: { dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'] },
    },
    {
      name: 'router-imports-core-and-platform',
      comment: 'The router is a program of its own: it knows the core and the platform, not the engine.',
      severity: 'error',
      from: { path: '^router/' },
      to: { path: '^(engine|views|cli|server|watch)/' },
    },
    {
      name: 'engine-reaches-router-through-its-driver',
      comment: "Only the router's route driver talks to the router (its table and its control client).",
      severity: 'error',
      from: { path: '^engine/', pathNot: '^engine/drivers/router-driver\\.ts$' },
      to: { path: '^router/' },
    },
    {
      name: 'engine-imports-no-front-end',
      severity: 'error',
      from: { path: '^engine/' },
      to: { path: '^(views|cli|server|watch)/' },
    },
    {
      name: 'views-render-core-types',
      comment: 'Views take data and print it; they never compute or reach the engine.',
      severity: 'error',
      from: { path: '^views/' },
      to: { path: '^(platform|router|engine|cli|server|watch)/' },
    },
    {
      name: 'front-ends-use-the-engine-api',
      comment:
        'cli/, server/ and watch/ call the engine and render with views/; they do not reach into platform/ or router/ (the `cutover proxy` command starts the router program).',
      severity: 'error',
      from: { path: frontEnds, pathNot: '^cli/commands/proxy\\.ts$' },
      to: { path: '^(platform|router)/' },
    },
    {
      name: 'front-ends-call-the-engine-api-only',
      comment:
        "Of the engine, front ends import its API (engine/api.ts), the MigrationService (engine/services/migration-service.ts and its types) and the state directory's location; never runners, drivers, Temporal or a service's implementation, so none can branch on the mode. The entries of the engine's own processes are the exceptions: `internal run-migration` (a detached runner) and `worker` (a Temporal worker).",
      severity: 'error',
      from: { path: frontEnds, pathNot: '^cli/commands/(internal|worker)\\.ts$' },
      to: {
        path: '^engine/',
        pathNot: '^engine/(api|services/migration-service|services/service-types|store/state-dir)\\.ts$',
      },
    },
    {
      name: 'nothing-imports-cli',
      severity: 'error',
      from: { pathNot: '^cli/' },
      to: { path: '^cli/' },
    },
    {
      name: 'front-ends-are-separate',
      comment: 'The server and the watcher do not import each other (the CLI starts both).',
      severity: 'error',
      from: { path: '^(server|watch)/' },
      to: { path: frontEnds, pathNot: '^$1/' },
    },
    {
      name: 'ui-runs-in-the-browser',
      comment:
        'The dashboard is bundled for a browser: it reads the server through its HTTP API and may use the pure renderers and core; never the engine, the platform or a front end.',
      severity: 'error',
      from: { path: '^ui/' },
      to: { path: '^(platform|router|engine|cli|server|watch)/' },
    },
    {
      name: 'nothing-imports-ui',
      severity: 'error',
      from: { pathNot: '^ui/' },
      to: { path: '^ui/' },
    },
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    // By type, not path: node_modules may be a link to an install elsewhere.
    doNotFollow: {
      dependencyTypes: [
        'npm',
        'npm-dev',
        'npm-optional',
        'npm-peer',
        'npm-bundled',
        'npm-no-pkg',
        'npm-unknown',
      ],
    },
    exclude: { path: '\\.test\\.ts$' },
  },
};
