// Builds the dashboard (ui/, served by `cutover server` at /ui) into dist/ui/: one JavaScript
// bundle (preact and the pages, minified), one stylesheet and index.html naming both by their
// content's hash, so a browser may keep them forever and a new build is never half-loaded. Nothing
// is fetched from elsewhere at run time (no CDN, no web font): the page works offline.
//
// rolldown is a devDependency (a build-time tool only; an installed package ships dist/ui). Without
// it the step says so and the server answers /ui with a page saying the dashboard was not built.
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { upToDate } from './up-to-date.mjs';

const root = (name) => fileURLToPath(new URL(`../${name}`, import.meta.url));
const source = root('ui');
const outDir = root('dist/ui');
const index = path.join(outDir, 'index.html');
// The UI imports pure modules of core/ (the plan's waves); their edits count too.
const inputs = [source, root('core'), root('package-lock.json'), root('scripts/build-ui.mjs')];
if (upToDate(index, inputs)) process.exit(0);

let rolldown;
try {
  ({ rolldown } = await import('rolldown'));
} catch {
  console.warn(
    'build-ui: rolldown is not installed; the server will answer /ui saying the dashboard is not built',
  );
  process.exit(0);
}

const bundle = await rolldown({
  input: path.join(source, 'main.tsx'),
  platform: 'browser',
  // Sources import each other as `.js` (NodeNext); the files are `.ts`/`.tsx`.
  resolve: { extensionAlias: { '.js': ['.ts', '.tsx', '.js'] } },
  tsconfig: path.join(source, 'tsconfig.json'),
  plugins: [
    {
      // A pure module of core/ may load a package lazily (createRequire, only when a function that
      // needs it runs) or hash (node:crypto): none of those functions runs in the page, so Node's
      // modules are stand-ins that say so if one ever did.
      name: 'no-node-modules',
      resolveId(id) {
        return id.startsWith('node:') ? `\0node-stub:${id}` : null;
      },
      load(id) {
        if (!id.startsWith('\0node-stub:')) return null;
        const name = id.slice('\0node-stub:'.length);
        const fail = `() => { throw new Error(${JSON.stringify(`${name} is not available in the dashboard`)}); }`;
        return `export const createRequire = ${fail}; export const createHash = ${fail};`;
      },
    },
  ],
});
const partial = `${outDir}.${process.pid}.tmp`;
rmSync(partial, { recursive: true, force: true });
const { output } = await bundle.write({
  dir: path.join(partial, 'assets'),
  format: 'esm',
  minify: true,
  entryFileNames: '[name]-[hash].js',
  chunkFileNames: '[name]-[hash].js',
});
await bundle.close();
const script = output.find((o) => o.type === 'chunk' && o.isEntry)?.fileName;
if (!script) throw new Error('build-ui: rolldown wrote no entry chunk');

const css = readFileSync(path.join(source, 'style.css'));
const style = `style-${createHash('sha256').update(css).digest('hex').slice(0, 10)}.css`;
writeFileSync(path.join(partial, 'assets', style), css);
const html = readFileSync(path.join(source, 'index.html'), 'utf8')
  .replace('%SCRIPT%', `/ui/assets/${script}`)
  .replace('%STYLE%', `/ui/assets/${style}`);
writeFileSync(path.join(partial, 'index.html'), html);
// Moved in whole: the server reads dist/ui when it starts, never a half-written one.
rmSync(outDir, { recursive: true, force: true });
mkdirSync(path.dirname(outDir), { recursive: true });
renameSync(partial, outDir);
