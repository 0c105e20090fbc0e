// The callbacks on test scores (SolverParameter early_stopping, keep_best,
// reduce_lr_on_plateau): their checks at construction and what each does after a test.
#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "crema/solver.hpp"
#include "solvers/solver_internal.hpp"
#include "solvers/training_log.hpp"

namespace crema {
namespace {

struct Monitor {
  const char* field;
  const TestMonitor& param;
  TestMonitorState* state;
};

std::vector<Monitor> Monitors(const SolverParameter& param, CallbackState* state) {
  std::vector<Monitor> monitors;
  if (param.has_early_stopping())
    monitors.push_back({"early_stopping", param.early_stopping(), state->mutable_early_stopping()});
  if (param.has_keep_best())
    monitors.push_back({"keep_best", param.keep_best(), state->mutable_keep_best()});
  if (param.has_reduce_lr_on_plateau())
    monitors.push_back({"reduce_lr_on_plateau", param.reduce_lr_on_plateau(),
                        state->mutable_reduce_lr_on_plateau()});
  return monitors;
}

// The watched score in `scores` (the named output, else the first).
const std::pair<std::string, double>* FindScore(const TestMonitor& monitor, const Scores& scores) {
  for (const auto& score : scores)
    if (!monitor.has_output() || score.first == monitor.output()) return &score;
  return nullptr;
}

bool Maximize(const TestMonitor& monitor, const std::string& name) {
  if (monitor.mode() == TestMonitor::AUTO) return name.find("loss") == std::string::npos;
  return monitor.mode() == TestMonitor::MAX;
}

}  // namespace

void Solver::CheckMonitors() const {
  CallbackState scratch;
  for (const Monitor& monitor : Monitors(param_, &scratch)) {
    const std::string field = monitor.field;
    const TestMonitor& m = monitor.param;
    if (m.test_net() < 0 || m.test_net() >= static_cast<int>(test_nets_.size()))
      throw ConfigError(ErrorAt(field) + StrCat(field, ".test_net: there is no test net #",
                                                m.test_net(), " (the solver has ",
                                                test_nets_.size(), " test net(s))"));
    const Net& net = *test_nets_[m.test_net()];
    std::vector<std::string> outputs;
    for (int index : net.output_blob_indices()) outputs.push_back(net.blob_names()[index]);
    if (outputs.empty())
      throw ConfigError(ErrorAt(field) +
                        StrCat(field, ": test net #", m.test_net(), " has no outputs to watch"));
    if (m.has_output() && std::find(outputs.begin(), outputs.end(), m.output()) == outputs.end())
      throw ConfigError(ErrorAt(field) +
                        StrCat(field, ".output: test net #", m.test_net(), " has no output \"",
                               m.output(), "\"; its outputs are ", solver_detail::Join(outputs)));
    if (m.patience() < 1)
      throw ConfigError(ErrorAt(field) +
                        StrCat(field, ".patience must be >= 1, got ", m.patience()));
    if (field == "reduce_lr_on_plateau" && !(m.factor() > 0 && m.factor() < 1))
      throw ConfigError(ErrorAt(field) +
                        StrCat(field, ".factor must be in (0, 1), got ", m.factor()));
  }
  if (param_.snapshot_keep() < 0)
    throw ConfigError(ErrorAt("snapshot_keep") +
                      StrCat("snapshot_keep must be >= 0, got ", param_.snapshot_keep()));
}

void Solver::AfterTest() {
  if (last_test_scores_.empty()) return;
  for (const Monitor& monitor : Monitors(param_, &callback_state_)) {
    const TestMonitor& m = monitor.param;
    const std::pair<std::string, double>* score = FindScore(m, last_test_scores_[m.test_net()]);
    if (!score) continue;  // the test was interrupted
    const bool maximize = Maximize(m, score->first);
    TestMonitorState& state = *monitor.state;
    const double value = score->second;
    const bool improved = std::isfinite(value) &&
                          (!state.has_best() || (maximize ? value > state.best() + m.min_delta()
                                                          : value < state.best() - m.min_delta()));
    const std::string field = monitor.field;
    if (improved) {
      state.set_best(value);
      state.set_bad_tests(0);
      if (field == "keep_best") {
        LOG(INFO) << "keep_best: " << score->first << " = " << value << " is the best so far";
        snapshot_best_ = true;
        Snapshot();
        snapshot_best_ = false;
      }
    } else {
      state.set_bad_tests(state.bad_tests() + 1);
    }
    if (field == "early_stopping" && state.bad_tests() >= m.patience()) {
      const std::string text =
          StrCat("early_stopping: ", score->first, " has not improved on ", state.best(), " for ",
                 state.bad_tests(), " tests; stopping at iteration ", iter_);
      LOG(INFO) << text;
      Say(text);
      requested_early_exit_ = true;
    }
    if (field == "reduce_lr_on_plateau") {
      if (state.cooldown_left() > 0) {
        state.set_cooldown_left(state.cooldown_left() - 1);
        state.set_bad_tests(0);
      } else if (state.bad_tests() >= m.patience()) {
        callback_state_.set_lr_scale(callback_state_.lr_scale() * m.factor());
        state.set_bad_tests(0);
        state.set_cooldown_left(m.cooldown());
        const std::string text =
            StrCat("reduce_lr_on_plateau: ", score->first, " has not improved on ", state.best(),
                   " for ", m.patience(), " tests; learning rate now ", GetLearningRate());
        LOG(INFO) << text;
        Say(text);
      }
    }
  }
}

}  // namespace crema
