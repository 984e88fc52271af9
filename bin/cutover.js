#!/usr/bin/env node
// The compiled CLI (npm ci builds it). Kept as a tiny file so the bin exists in a fresh clone;
// dist/cli/wire-process.js hands the process's streams, environment and directory to the CLI.
// The build bundles it into dist/bundle/ (scripts/bundle-cli.mjs: a process starts reading a few
// dozen files, not hundreds); without the bundle, dist/ runs as tsc wrote it.
import { existsSync } from 'node:fs';

const bundled = new URL('../dist/bundle/cutover.js', import.meta.url);
await import(existsSync(bundled) ? bundled.href : '../dist/cli/wire-process.js');
