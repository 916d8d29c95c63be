// Writes `.jest-results.json` in the package's directory after each run, so
// that CI can print one `N passed, N failed` line for the whole repository.
const fs = require('node:fs');
const path = require('node:path');

class SummaryReporter {
  constructor(globalConfig) {
    this.rootDir = globalConfig.rootDir;
  }

  onRunComplete(_contexts, results) {
    const summary = {
      passed: results.numPassedTests,
      failed: results.numFailedTests,
      pending: results.numPendingTests + results.numTodoTests,
      suitesFailed: results.numFailedTestSuites,
      suitesBroken: results.numRuntimeErrorTestSuites,
      interrupted: Boolean(results.wasInterrupted),
      finishedAt: new Date().toISOString(),
      // Where the package's time went, so CI can show its slowest files.
      files: results.testResults.map((r) => ({
        file: path.relative(this.rootDir, r.testFilePath),
        ms: Math.round(r.perfStats.end - r.perfStats.start),
      })),
    };
    fs.writeFileSync(path.join(this.rootDir, '.jest-results.json'), JSON.stringify(summary, null, 2) + '\n');
  }
}

module.exports = SummaryReporter;
