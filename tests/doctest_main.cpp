// The one doctest main shared by every test executable; compiled once.
//
// A program that runs no test case fails. The test suite compiles test files in batches, one
// program per batch, and ctest runs each file's cases by their file name (`--source-file=...`,
// cmake/tests.cmake): a name that matches nothing, after a file moved, would otherwise pass with
// no test run.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned cases_selected = 0;
bool run_ended = false;

// Reads the run's totals; reports nothing.
struct selection_listener final : doctest::IReporter {
  explicit selection_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    cases_selected = stats.numTestCasesPassingFilters;
    run_ended = true;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("selection", 1, selection_listener);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || !run_ended) return result;  // --help, --list-test-cases, ...
  if (cases_selected == 0) {
    std::fprintf(stderr, "%s: no test case matched the filters (--source-file, --test-case, ...): nothing was tested\n",
                 argc > 0 ? argv[0] : "test");
    return result == 0 ? 1 : result;
  }
  return result;
}
