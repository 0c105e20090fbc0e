// The CPU engine race (math/dnnl_engine.hpp CpuEngineChoice) on stand-in kernels that take known
// times: the order it runs them in, the kernel it keeps, the decisions it gives out and takes
// back, and the fixed policies.
#include "math/dnnl_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace crema {
namespace {

// Four stand-in kernels that sleep for their given milliseconds and record their runs.
struct Kernels {
  int crema_ms, dnnl_ms, winograd_ms;
  std::vector<std::string> runs;
  int blocked_ms = 0;
  void Run(CpuEngineChoice* choice, CpuEngine policy, bool with_winograd,
           bool with_blocked = false) {
    const auto sleep = [this](const char* name, int ms) {
      return [this, name, ms] {
        runs.push_back(name);
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      };
    };
    choice->Run(policy, "conv", "forward", {2, 16, 8, 8}, sleep("crema", crema_ms),
                sleep("oneDNN", dnnl_ms),
                with_winograd ? sleep("oneDNN-Winograd", winograd_ms) : std::function<void()>(),
                with_blocked ? sleep("crema-blocked", blocked_ms) : std::function<void()>());
  }
};

const std::vector<int> kShape = {2, 16, 8, 8};

TEST(CpuEngineChoice, ThreeKernelsRunInTurnAndTheFastestIsKept) {
  CpuEngineChoice choice;
  Kernels kernels{40, 25, 2, {}};
  EXPECT_FALSE(choice.NextRunsDnnl(CpuEngine::kAuto, "forward", kShape));
  // A clear winner: one warm-up and one timed pass each, then decided.
  for (int pass = 0; pass < 6; ++pass) {
    EXPECT_FALSE(choice.Decided("forward", kShape)) << pass;
    kernels.Run(&choice, CpuEngine::kAuto, true);
    EXPECT_STREQ(choice.last(), kernels.runs.back().c_str());
  }
  const std::vector<std::string> order = {"crema", "oneDNN", "oneDNN-Winograd",
                                          "crema", "oneDNN", "oneDNN-Winograd"};
  EXPECT_EQ(kernels.runs, order);
  ASSERT_TRUE(choice.Decided("forward", kShape));
  EXPECT_FALSE(choice.Racing("forward", kShape));
  EXPECT_TRUE(choice.NextRunsDnnl(CpuEngine::kAuto, "forward", kShape));
  kernels.Run(&choice, CpuEngine::kAuto, true);
  EXPECT_EQ(kernels.runs.back(), "oneDNN-Winograd");
  const std::vector<CpuEngineChoice::Decision> decisions = choice.Decisions();
  ASSERT_EQ(decisions.size(), 1u);
  EXPECT_EQ(decisions[0].direction, "forward");
  EXPECT_EQ(decisions[0].shape, kShape);
  EXPECT_EQ(decisions[0].kernel, CpuKernel::kDnnlWinograd);

  // Taken back by another layer's choice (a resumed run): no race, Winograd from the first pass;
  // where that layer has no Winograd kernel (another CPU), oneDNN's direct one.
  CpuEngineChoice restored;
  restored.Restore(decisions[0]);
  Kernels again{40, 25, 2, {}};
  again.Run(&restored, CpuEngine::kAuto, true);
  again.Run(&restored, CpuEngine::kAuto, false);
  EXPECT_EQ(again.runs, (std::vector<std::string>{"oneDNN-Winograd", "oneDNN"}));
}

TEST(CpuEngineChoice, WithoutCremasKernelOneDnnsRace) {
  // crema's kernel the fastest, but out of the race (a layer in a channel-blocked chain).
  CpuEngineChoice choice;
  choice.set_crema_races(false);
  EXPECT_TRUE(choice.NextRunsDnnl(CpuEngine::kAuto, "forward", kShape));
  Kernels kernels{1, 25, 2, {}};
  for (int pass = 0; pass < 4; ++pass) kernels.Run(&choice, CpuEngine::kAuto, true);
  EXPECT_EQ(kernels.runs,
            (std::vector<std::string>{"oneDNN", "oneDNN-Winograd", "oneDNN", "oneDNN-Winograd"}));
  ASSERT_TRUE(choice.Decided("forward", kShape));
  kernels.Run(&choice, CpuEngine::kAuto, true);
  EXPECT_EQ(kernels.runs.back(), "oneDNN-Winograd");
  // No Winograd: oneDNN's kernel from the first pass, decided without a race.
  CpuEngineChoice direct;
  direct.set_crema_races(false);
  Kernels two{1, 25, 2, {}};
  two.Run(&direct, CpuEngine::kAuto, false);
  EXPECT_TRUE(direct.Decided("forward", kShape));
  two.Run(&direct, CpuEngine::kAuto, false);
  EXPECT_EQ(two.runs, (std::vector<std::string>{"oneDNN", "oneDNN"}));
  // The fixed policies do not change.
  two.Run(&direct, CpuEngine::kCaffe, false);
  EXPECT_EQ(two.runs.back(), "crema");
}

TEST(CpuEngineChoice, TwoKernelsWithoutWinograd) {
  CpuEngineChoice choice;
  Kernels kernels{2, 40, 1, {}};
  for (int pass = 0; pass < 4; ++pass) kernels.Run(&choice, CpuEngine::kAuto, false);
  EXPECT_EQ(kernels.runs, (std::vector<std::string>{"crema", "oneDNN", "crema", "oneDNN"}));
  ASSERT_TRUE(choice.Decided("forward", kShape));
  EXPECT_FALSE(choice.NextRunsDnnl(CpuEngine::kAuto, "forward", kShape));
  ASSERT_EQ(choice.Decisions().size(), 1u);
  EXPECT_EQ(choice.Decisions()[0].kernel, CpuKernel::kCrema);
  // Another direction or shape races on its own.
  EXPECT_FALSE(choice.Decided("backward", kShape));
  EXPECT_FALSE(choice.Decided("forward", {1, 16, 8, 8}));
}

TEST(CpuEngineChoice, CloseKernelsRunTheWholeRace) {
  CpuEngineChoice choice;
  Kernels kernels{10, 10, 10, {}};
  int passes = 0;
  while (!choice.Decided("forward", kShape)) {
    ASSERT_LT(passes, CpuEngineChoice::kMaxRacePasses) << "the race did not end";
    kernels.Run(&choice, CpuEngine::kAuto, true);
    ++passes;
  }
  EXPECT_EQ(passes, 9);  // three passes of each kernel
}

TEST(CpuEngineChoice, FixedPoliciesNeverRace) {
  CpuEngineChoice choice;
  Kernels kernels{1, 1, 1, {}};
  kernels.Run(&choice, CpuEngine::kCaffe, true);
  kernels.Run(&choice, CpuEngine::kDnnl, true);
  EXPECT_EQ(kernels.runs, (std::vector<std::string>{"crema", "oneDNN"}));
  EXPECT_TRUE(choice.Decisions().empty());
  EXPECT_TRUE(choice.NextRunsDnnl(CpuEngine::kDnnl, "forward", kShape));
  EXPECT_FALSE(choice.NextRunsDnnl(CpuEngine::kCaffe, "forward", kShape));
}

TEST(CpuEngineChoice, FourKernelsWithCremasBlockedOne) {
  CpuEngineChoice choice;
  Kernels kernels{40, 30, 25, {}, 2};
  for (int pass = 0; pass < 8; ++pass) kernels.Run(&choice, CpuEngine::kAuto, true, true);
  const std::vector<std::string> order = {"crema", "oneDNN", "oneDNN-Winograd", "crema-blocked"};
  std::vector<std::string> twice = order;
  twice.insert(twice.end(), order.begin(), order.end());
  EXPECT_EQ(kernels.runs, twice);
  ASSERT_TRUE(choice.Decided("forward", kShape));
  // crema's blocked kernel reads the channel-blocked layout, as oneDNN's do.
  EXPECT_TRUE(choice.NextRunsDnnl(CpuEngine::kAuto, "forward", kShape));
  ASSERT_EQ(choice.Decisions().size(), 1u);
  EXPECT_EQ(choice.Decisions()[0].kernel, CpuKernel::kCremaBlocked);
  // Taken back where the layer offers no blocked kernel (another CPU): oneDNN's direct one.
  CpuEngineChoice other;
  other.Restore(choice.Decisions()[0]);
  Kernels again{1, 1, 1, {}, 1};
  again.Run(&other, CpuEngine::kAuto, true, true);
  again.Run(&other, CpuEngine::kAuto, true, false);
  EXPECT_EQ(again.runs, (std::vector<std::string>{"crema-blocked", "oneDNN"}));
  // Without crema's plain kernel (a channel-blocked input): the three blocked ones race, and a
  // close race runs out its three passes each.
  CpuEngineChoice blocked_input;
  blocked_input.set_crema_races(false);
  Kernels close{10, 10, 10, {}, 10};
  int passes = 0;
  while (!blocked_input.Decided("forward", kShape)) {
    ASSERT_LT(passes, CpuEngineChoice::kMaxRacePasses) << "the race did not end";
    close.Run(&blocked_input, CpuEngine::kAuto, true, true);
    ++passes;
  }
  EXPECT_EQ(passes, 9);
  EXPECT_EQ(std::count(close.runs.begin(), close.runs.end(), "crema"), 0);
  EXPECT_EQ(std::count(close.runs.begin(), close.runs.end(), "crema-blocked"), 3);
}

TEST(CpuEngineChoice, KernelNames) {
  EXPECT_STREQ(CpuKernelName(CpuKernel::kCrema), "crema");
  EXPECT_STREQ(CpuKernelName(CpuKernel::kDnnl), "oneDNN");
  EXPECT_STREQ(CpuKernelName(CpuKernel::kDnnlWinograd), "oneDNN-Winograd");
  EXPECT_STREQ(CpuKernelName(CpuKernel::kCremaBlocked), "crema-blocked");
}

}  // namespace
}  // namespace crema
