#!/usr/bin/env node
// The compiled CLI (npm ci builds it). Kept as a tiny file so the bin exists in a fresh clone.
import '../dist/cli/main.js';
