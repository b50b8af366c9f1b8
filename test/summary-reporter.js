// Prints one plain closing line, "tests: N passed, N failed, N skipped", that CI tooling reads.
class SummaryReporter {
  onRunComplete(_contexts, results) {
    const skipped = results.numPendingTests + results.numTodoTests;
    process.stdout.write(`\ntests: ${results.numPassedTests} passed, ${results.numFailedTests + results.numRuntimeErrorTestSuites} failed, ${skipped} skipped\n`);
  }
}
module.exports = SummaryReporter;
