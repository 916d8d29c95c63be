// Writes `.jest-results.json` in the package's directory after each run, so
// that CI can print one `N passed, N failed` line for the whole repository.
// A second run of a package's tests in the same CI (the runtime's on runc)
// sets PADDOCK_JEST_RESULTS_TAG and writes `.jest-results.<tag>.json`, so
// that it does not overwrite the first run's results.
const fs = require('node:fs');
const path = require('node:path');

/** The first few lines of a failure message, without colour codes. */
function firstLines(text) {
  return String(text ?? '')
    .replace(/\u001b\[[0-9;]*m/g, '')
    .split('\n')
    .slice(0, 6)
    .join('\n');
}

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
      // Which tests failed and how, so that the end of a CI log names them
      // (the output that scrolled past may not be kept).
      failures: results.testResults.flatMap((r) => {
        const file = path.relative(this.rootDir, r.testFilePath);
        if (r.testExecError) return [{ file, test: '(the file did not run)', message: firstLines(r.testExecError.message) }];
        return r.testResults
          .filter((t) => t.status === 'failed')
          .map((t) => ({ file, test: t.fullName, message: firstLines(t.failureMessages.join('\n')) }));
      }),
    };
    const tag = process.env.PADDOCK_JEST_RESULTS_TAG;
    if (tag !== undefined && !/^[a-z0-9-]+$/.test(tag)) throw new Error(`PADDOCK_JEST_RESULTS_TAG '${tag}' is not lowercase letters, digits and dashes`);
    const file = tag ? `.jest-results.${tag}.json` : '.jest-results.json';
    fs.writeFileSync(path.join(this.rootDir, file), JSON.stringify(summary, null, 2) + '\n');
  }
}

module.exports = SummaryReporter;
