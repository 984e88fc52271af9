// Compiles the sources into dist/ (run by `npm run build`), unless dist/ is newer than every source.
//
// Each file is transpiled on its own (TypeScript's transpileModule: types erased, nothing checked),
// not by a tsc program: `npm run typecheck` (part of `npm test`) checks the types of the sources
// and the tests together, and tsconfig.json's `isolatedModules` makes it refuse what a file-by-file
// transpile cannot compile alone. A tsc build type-checked the sources a second time: 16.8
// CPU-seconds and about 10 s of every `npm ci` on 2 cores, against about 2 CPU-seconds here.
// Only the files whose source is newer than their output are written again.
import { mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { upToDate } from './up-to-date.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = path.join(root, 'dist');
const stamp = path.join(dist, '.build-stamp');
const sources = ['core', 'platform', 'router', 'engine', 'views', 'cli', 'server', 'watch'];
const configs = ['tsconfig.json', 'package-lock.json', 'scripts/build-ts.mjs'];
const inputs = [...sources, 'schemas', ...configs].map((name) => path.join(root, name));
if (upToDate(stamp, inputs)) process.exit(0);

const ts = createRequire(import.meta.url)('typescript');
const { options: compilerOptions } = ts.convertCompilerOptionsFromJson(
  {
    target: 'ES2023',
    // The package is ESM ("type": "module"): every .ts file is an ES module, as NodeNext emits it.
    module: 'ESNext',
    sourceMap: true,
    esModuleInterop: true,
    isolatedModules: true,
  },
  root,
);
// A change of the options (or of this script) rewrites every file.
const configChanged = !upToDate(
  stamp,
  configs.map((name) => path.join(root, name)),
);

let written = 0;
const failures = [];
for (const dir of sources) {
  for (const entry of readdirSync(path.join(root, dir), { recursive: true, encoding: 'utf8' })) {
    if (!entry.endsWith('.ts') || entry.endsWith('.d.ts') || entry.endsWith('.test.ts')) continue;
    const source = path.join(root, dir, entry);
    const out = path.join(dist, dir, entry.replace(/\.ts$/, '.js'));
    if (!configChanged && isNewer(out, source)) continue;
    const relative = path.relative(root, source);
    const result = ts.transpileModule(readFileSync(source, 'utf8'), {
      compilerOptions,
      fileName: relative,
      reportDiagnostics: true,
    });
    for (const d of result.diagnostics ?? [])
      failures.push(`${relative}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    mkdirSync(path.dirname(out), { recursive: true });
    // The map names its source relative to the output, as tsc writes it.
    const map = JSON.parse(result.sourceMapText);
    map.file = path.basename(out);
    map.sources = [path.relative(path.dirname(out), source)];
    writeFileSync(
      out,
      result.outputText.replace(
        /\/\/# sourceMappingURL=.*$/m,
        `//# sourceMappingURL=${path.basename(out)}.map`,
      ),
    );
    writeFileSync(`${out}.map`, JSON.stringify(map));
    written++;
  }
}
// The JSON schemas the sources import (`with { type: 'json' }`), beside them as tsc put them.
for (const entry of readdirSync(path.join(root, 'schemas'))) {
  if (!entry.endsWith('.json')) continue;
  mkdirSync(path.join(dist, 'schemas'), { recursive: true });
  writeFileSync(path.join(dist, 'schemas', entry), readFileSync(path.join(root, 'schemas', entry)));
}
if (failures.length > 0) {
  console.error(`build: ${failures.length} file(s) could not be transpiled:\n${failures.join('\n')}`);
  process.exit(1);
}
writeFileSync(stamp, `${written} files transpiled\n`);

function isNewer(output, input) {
  const made = statSync(output, { throwIfNoEntry: false });
  return made !== undefined && made.mtimeMs > statSync(input).mtimeMs;
}
