#!/usr/bin/env node
// The compiled CLI (npm ci builds it). Kept as a tiny file so the bin exists in a fresh clone;
// dist/cli/wire-process.js hands the process's streams, environment and directory to the CLI.
import '../dist/cli/wire-process.js';
