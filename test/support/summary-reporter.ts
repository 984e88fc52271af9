import type { Reporter, TestModule } from 'vitest/node';

/** How many of the slowest test files the run ends by naming. */
const slowestCount = 25;

/**
 * Ends the run with its 25 slowest test files (wall time of each file: collecting, its tests and
 * hooks; with its vitest project), so that a file that became slow is seen in every CI log, then
 * one plain closing line, `tests: N passed, N failed, N skipped`, after vitest's own report, so
 * that a CI log reader that knows no vitest still reads the outcome.
 */
export default class SummaryReporter implements Reporter {
  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    let passed = 0;
    let failed = 0;
    let skipped = 0;
    for (const module of testModules) {
      for (const test of module.children.allTests()) {
        const state = test.result().state;
        if (state === 'passed') passed++;
        else if (state === 'failed') failed++;
        else skipped++;
      }
      // A file that failed with none of its tests failing (it did not load, or a file-level hook
      // failed: test/support/process-state-setup.ts fails a file that left its process changed).
      const testFailed = [...module.children.allTests()].some((test) => test.result().state === 'failed');
      if (module.state() === 'failed' && !testFailed) failed++;
    }
    process.stdout.write(slowestFiles(testModules));
    process.stdout.write(
      `\ntests: ${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}\n`,
    );
  }
}

/** The slowest files as lines `  12.3 s  integration  test/e2e/crash.test.ts`; '' for no file. */
export function slowestFiles(testModules: ReadonlyArray<TestModule>, count = slowestCount): string {
  const timed = testModules
    .map((module) => {
      const diagnostic = module.diagnostic();
      return {
        file: module.relativeModuleId,
        project: module.project.name,
        ms: diagnostic.collectDuration + diagnostic.duration,
      };
    })
    .sort((a, b) => b.ms - a.ms)
    .slice(0, count);
  if (timed.length === 0) return '';
  const projectWidth = Math.max(...timed.map((t) => t.project.length));
  const lines = timed.map(
    (t) => `${(t.ms / 1000).toFixed(1).padStart(7)} s  ${t.project.padEnd(projectWidth)}  ${t.file}`,
  );
  return `\nthe ${timed.length} slowest test files:\n${lines.join('\n')}\n`;
}
