import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Every test lives under test/, mirroring the rooms (ARCHITECTURE.md); test/test-layout.test.ts
    // fails on a test file beside the code, which this pattern would not run.
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    setupFiles: ['./test/support/fast-check-setup.ts'],
    // One Temporal dev server per run, for the Temporal-mode tests.
    globalSetup: ['./test/support/temporal-global-setup.ts'],
    // A plain closing line ("N passed, N failed") that any CI log reader understands.
    reporters: ['default', './test/support/summary-reporter.ts'],
  },
});
