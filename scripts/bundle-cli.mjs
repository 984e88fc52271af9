// Bundles the compiled CLI (dist/, after tsc) into dist/bundle/: the entry bin/cutover.js loads,
// one chunk, `load-and-plan`, of what `topology plan` and `topology validate` load (below), and one
// chunk per group of the other modules a command loads lazily, as the source's dynamic imports say.
// Every process cutover starts (a migrate, a runner, the router, the server) then resolves, reads
// and compiles a few dozen files instead of ~60-300 (measured: ~0.2 CPU-s less over a migration's
// processes). Packages stay external: they load from node_modules as before.
//
// rolldown is a devDependency (a build-time tool only; an installed package ships the bundle).
// Without it the step says so and bin/cutover.js runs dist/ unbundled.
import { mkdirSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { upToDate } from './up-to-date.mjs';

const dist = fileURLToPath(new URL('../dist', import.meta.url));
const outDir = path.join(dist, 'bundle');
const entry = path.join(outDir, 'cutover.js');

if (
  upToDate(
    entry,
    [
      dist,
      fileURLToPath(new URL('../package-lock.json', import.meta.url)),
      fileURLToPath(import.meta.url), // this script: a change of its chunking rebuilds
    ],
    // Not the Temporal workflows' bundle (loaded by path at run time, never part of this one) nor the UI's.
    (file) =>
      !/\.(js|cjs|json)$/.test(file) ||
      file.startsWith(outDir) ||
      file.startsWith(path.join(dist, 'ui')) ||
      file === path.join(dist, 'engine', 'temporal', 'workflow-bundle.js'),
  )
) {
  process.exit(0);
}

/** Entry modules of the `load-and-plan` chunk (below), as dist/ names them; their imports join them. */
const loadAndPlan = new Set([
  'cli/commands/topology-plan.js',
  'cli/commands/topology-validate.js',
  'cli/service.js',
  'engine/api.js',
  'engine/services/migration-service.js',
  'engine/services/local-service.js',
  'views/render-plan-json.js',
  'views/render-plan-text.js',
  'views/render-plan-markdown.js',
]);

let rolldown;
try {
  ({ rolldown } = await import('rolldown'));
} catch {
  rmSync(outDir, { recursive: true, force: true });
  console.warn('bundle-cli: rolldown is not installed; bin/cutover.js runs dist/ unbundled');
  process.exit(0);
}

const bundle = await rolldown({
  input: path.join(dist, 'cli', 'wire-process.js'),
  platform: 'node',
  // The `load-and-plan` chunk (below) holds modules that commands also import dynamically: expected,
  // the import then loads that chunk.
  checks: { ineffectiveDynamicImport: false },
  // Packages and Node's modules are loaded at run time, from where they are installed.
  external: (id) => !id.startsWith('.') && !path.isAbsolute(id),
  plugins: [
    {
      // A module that finds files beside itself (the log pump, the workflow bundle, package.json,
      // createRequire's resolution) keeps doing so from its own place in dist/, not the chunk's.
      name: 'keep-module-urls',
      transform(code, id) {
        if (!id.startsWith(dist) || !code.includes('import.meta.url')) return null;
        const fromBundle = path.relative(outDir, id).split(path.sep).join('/');
        return {
          code: code.replaceAll(
            'import.meta.url',
            `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`,
          ),
          map: null,
        };
      },
    },
  ],
});
// Written beside, then moved in file by file, the entry last: a CLI starting during a build never
// loads half a bundle, and a process started before it (a runner, the router) still finds the
// chunks it loads later (a chunk's name is its content's hash). Chunks no build has written for an
// hour are removed.
const partial = `${outDir}.${process.pid}.tmp`;
await bundle.write({
  dir: partial,
  format: 'esm',
  entryFileNames: 'cutover.js',
  chunkFileNames: '[name]-[hash].js',
  codeSplitting: {
    // What `topology plan` and `topology validate` load (the commands run most; the plan's time is
    // a goal), with everything these modules import, in one chunk, `load-and-plan`: left to the
    // automatic splitting it was ~60 small chunks, and Node's loader pays per file (resolve, read,
    // compile, link): a plan of two 10-component files took ~20 ms of CPU less, `topology status`
    // ~13 ms less. Every command now loads it (the entry imports the errors from it): `proxy
    // --help` and `internal --help`, which used less of it, take ~10 ms more.
    groups: [{ name: 'load-and-plan', test: (id) => loadAndPlan.has(path.relative(dist, id)) }],
  },
});
await bundle.close();
mkdirSync(outDir, { recursive: true });
const written = new Set(readdirSync(partial));
for (const name of [...written].filter((n) => n !== 'cutover.js'))
  renameSync(path.join(partial, name), path.join(outDir, name));
renameSync(path.join(partial, 'cutover.js'), entry);
rmSync(partial, { recursive: true, force: true });
const staleBeforeMs = Date.now() - 60 * 60 * 1000;
for (const name of readdirSync(outDir)) {
  const file = path.join(outDir, name);
  if (!written.has(name) && statSync(file).mtimeMs < staleBeforeMs) rmSync(file, { force: true });
}
