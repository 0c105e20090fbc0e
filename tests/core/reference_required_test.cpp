// The switch .ci/run sets: with CREMA_REQUIRE_REFERENCE=1 a test that needs missing reference
// data fails instead of skipping. This runs its own executable on a disabled probe test with the
// reference folder pointed somewhere empty, once with the switch and once without.
#include <gtest/gtest.h>

#include <string>

#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace crema {
namespace {

testing::CommandResult RunProbe(const std::string& env) {
  return testing::RunCommand(env + " CREMA_REFERENCE_DIR=" + testing::TempDir() + "/nothing " +
                             CREMA_BINARY_DIR +
                             "/tests/reference_required_test --gtest_also_run_disabled_tests "
                             "--gtest_filter='ReferenceRequired.DISABLED_Probe*'");
}

// Run only by the tests below, in a child process.
TEST(ReferenceRequired, DISABLED_ProbeMacro) {
  CREMA_REQUIRE_REFERENCE(path, "bvlc/no_such_file");
  ADD_FAILURE() << "found " << path;
}

void NeedsReference() {
  if (testing::ReferencePath("bvlc/no_such_file").empty()) {
    CREMA_MISSING_REFERENCE("bvlc/no_such_file");
  }
  ADD_FAILURE() << "found the reference";
}

TEST(ReferenceRequired, DISABLED_ProbeHelper) { NeedsReference(); }

TEST(ReferenceRequired, MissingReferenceSkipsByDefault) {
  const testing::CommandResult run = RunProbe("CREMA_REQUIRE_REFERENCE=");
  EXPECT_EQ(run.rc, 0) << run.output;
  EXPECT_NE(run.output.find("[  SKIPPED ] 2 tests"), std::string::npos) << run.output;
  EXPECT_EQ(RunProbe("CREMA_REQUIRE_REFERENCE=0").rc, 0);
}

TEST(ReferenceRequired, MissingReferenceFailsWhenRequired) {
  const testing::CommandResult run = RunProbe("CREMA_REQUIRE_REFERENCE=1");
  EXPECT_NE(run.rc, 0) << run.output;
  EXPECT_NE(run.output.find("[  FAILED  ] 2 tests"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("reference data not found: bvlc/no_such_file"), std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace crema
