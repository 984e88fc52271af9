// Bundles cutover's Temporal workflow code once, at build time (workers load the bundle instead of
// running webpack at every start). Run after tsc: it bundles dist/engine/temporal/workflows.js.
// The source map stays inline (the SDK requires it, and maps workflow stack traces with it) but
// without the sources' text, which the SDK reads only with showStackTraceSources (cutover does not
// set it): 2.4 -> 1.3 MB, which every worker start decodes, parses, compiles and runs in its main
// thread, copies to its workflow thread and parses there again.
import { renameSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { upToDate } from './up-to-date.mjs';

const workflowsPath = fileURLToPath(new URL('../dist/engine/temporal/workflows.js', import.meta.url));
const out = fileURLToPath(new URL('../dist/engine/temporal/workflow-bundle.js', import.meta.url));
const root = (name) => fileURLToPath(new URL(`../${name}`, import.meta.url));
// The bundle holds compiled code of dist/ (the workflows and what they import) and the SDK's.
if (
  upToDate(
    out,
    [
      root('dist'),
      root('node_modules/@temporalio/workflow/package.json'),
      root('package-lock.json'),
      fileURLToPath(import.meta.url),
    ],
    // Not the CLI's bundle nor the UI's, which later build steps write from the same dist/: counted,
    // each build made the other stale, and every build ran webpack again (2.7 CPU-s, ~10 s on 2 cores).
    (file) =>
      !file.endsWith('.js') ||
      file.startsWith(out) ||
      file.startsWith(root('dist/bundle')) ||
      file.startsWith(root('dist/ui')),
  )
) {
  process.exit(0);
}
const { bundleWorkflowCode } = await import('@temporalio/worker');
const { code } = await bundleWorkflowCode({
  workflowsPath,
  webpackConfigHook: (config) => ({ ...config, devtool: 'inline-nosources-source-map' }),
  logger: { trace() {}, debug() {}, info() {}, warn: console.warn, error: console.error, log() {} },
});
// Written beside and renamed: a worker starting during a build never loads half a bundle.
const partial = `${out}.${process.pid}.tmp`;
writeFileSync(partial, code);
renameSync(partial, out);
