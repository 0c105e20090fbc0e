// crema train: trains (or fine-tunes, or resumes) a net from a solver prototxt, as Caffe's
// `caffe train`.
#include <glog/logging.h>

#include <csignal>
#include <cstdio>
#include <string>
#include <vector>

#include "crema/solver.hpp"
#include "flags.hpp"
#include "net/proto_io.hpp"
#include "verb.hpp"

DEFINE_string(sigint_effect, "stop",
              "What to do on SIGINT (Ctrl-C): stop (write the final snapshot and exit), "
              "snapshot (write a snapshot and go on) or none.");
DEFINE_string(sighup_effect, "snapshot",
              "What to do on SIGHUP: snapshot (write a snapshot and go on), stop or none.");

namespace crema::cli {
namespace {

volatile std::sig_atomic_t got_sigint = 0;
volatile std::sig_atomic_t got_sighup = 0;

void HandleSignal(int signal) {
  if (signal == SIGINT) got_sigint = 1;
  if (signal == SIGHUP) got_sighup = 1;
}

Solver::Action EffectFromFlag(const char* flag, const std::string& value) {
  if (value == "stop") return Solver::Action::kStop;
  if (value == "snapshot") return Solver::Action::kSnapshot;
  if (value == "none") return Solver::Action::kNone;
  CREMA_THROW_CONFIG("--", flag, " must be stop, snapshot or none, got \"", value, "\"");
}

// Installs the SIGINT/SIGHUP handlers for the lifetime of the object, then restores the
// previous ones (Caffe's SignalHandler).
class SignalHandler {
 public:
  SignalHandler(Solver::Action sigint_effect, Solver::Action sighup_effect)
      : sigint_effect_(sigint_effect), sighup_effect_(sighup_effect) {
    got_sigint = got_sighup = 0;
    struct sigaction action = {};
    action.sa_handler = &HandleSignal;
    action.sa_flags = SA_RESTART;
    sigfillset(&action.sa_mask);  // block the other signals while one is handled
    if (sigaction(SIGINT, &action, &old_sigint_) != 0 ||
        sigaction(SIGHUP, &action, &old_sighup_) != 0)
      CREMA_THROW_RUNTIME("cannot install the SIGINT/SIGHUP handlers");
  }
  ~SignalHandler() {
    sigaction(SIGINT, &old_sigint_, nullptr);
    sigaction(SIGHUP, &old_sighup_, nullptr);
  }
  SignalHandler(const SignalHandler&) = delete;
  SignalHandler& operator=(const SignalHandler&) = delete;

  // Polled by the solver between iterations; each signal is acted upon once.
  Solver::Action GetAction() {
    if (got_sigint) {
      got_sigint = 0;
      LOG(INFO) << "Caught SIGINT";
      return Record(sigint_effect_);
    }
    if (got_sighup) {
      got_sighup = 0;
      LOG(INFO) << "Caught SIGHUP";
      return Record(sighup_effect_);
    }
    return Solver::Action::kNone;
  }
  bool stop_requested() const { return stop_requested_; }

 private:
  Solver::Action Record(Solver::Action action) {
    if (action == Solver::Action::kStop) stop_requested_ = true;
    return action;
  }
  Solver::Action sigint_effect_, sighup_effect_;
  bool stop_requested_ = false;
  struct sigaction old_sigint_ = {}, old_sighup_ = {};
};

Device TrainDevice(const SolverParameter& param) {
  if (!FLAGS_gpu.empty()) return DeviceFromFlags();
  // Without --gpu, an explicit `solver_mode: GPU` (with device_id) chooses the device, as in
  // Caffe; the proto's implicit default (GPU) does not.
  if (param.has_solver_mode() && param.solver_mode() == SolverParameter::GPU) {
    if (CudaDeviceCount() == 0) {
      LOG(WARNING) << FLAGS_solver << ": solver_mode: GPU but no CUDA device is visible"
                   << " (or crema was built without CUDA); training on the CPU";
      return Device::Cpu();
    }
    SetCudaDevice(param.device_id());
    ApplyGpuMathFlags();
    return Device::Cuda(param.device_id());
  }
  return Device::Cpu();
}

int RunTrain(const std::vector<std::string>& args) {
  RequireFlag("solver", FLAGS_solver);
  if (!FLAGS_snapshot.empty() && !FLAGS_weights.empty())
    CREMA_THROW_CONFIG("give --snapshot to resume training or --weights to fine-tune, not both");
  const Solver::Action sigint_effect = EffectFromFlag("sigint_effect", FLAGS_sigint_effect);
  const Solver::Action sighup_effect = EffectFromFlag("sighup_effect", FLAGS_sighup_effect);

  SolverParameter param;
  std::shared_ptr<ProtoSource> source = ReadSolverParamsFromTextFile(FLAGS_solver, &param);
  param.mutable_train_state()->set_level(FLAGS_level);
  for (const std::string& stage : StagesFromFlag()) param.mutable_train_state()->add_stage(stage);

  // Weights to start from: --weights, else the solver's `weights` fields; none when resuming.
  // They are copied here (into the train net and every test net, as Caffe's CopyLayers).
  std::vector<std::string> weights;
  if (FLAGS_weights.empty() && FLAGS_snapshot.empty()) {
    for (const std::string& w : param.weights())
      for (const std::string& file : SplitList(w)) weights.push_back(file);
  } else {
    weights = SplitList(FLAGS_weights);
  }
  param.clear_weights();

  SolverOptions options;
  options.device = TrainDevice(param);
  options.source = source;
  LOG(INFO) << "Using " << options.device.ToString();
  std::unique_ptr<Solver> solver = Solver::Create(param, options);

  for (const std::string& file : weights) {
    LOG(INFO) << "Fine-tuning from " << file;
    solver->net()->CopyTrainedLayersFrom(file);
    for (const auto& test_net : solver->test_nets()) test_net->CopyTrainedLayersFrom(file);
  }

  SignalHandler signals(sigint_effect, sighup_effect);
  solver->set_action_function([&signals] { return signals.GetAction(); });

  if (!FLAGS_snapshot.empty()) {
    LOG(INFO) << "Resuming from " << FLAGS_snapshot;
    solver->Restore(FLAGS_snapshot);
  }
  LOG(INFO) << "Starting Optimization";
  solver->Solve();
  LOG(INFO) << "Optimization Done.";

  if (!signals.stop_requested() && !solver->test_nets().empty()) {
    // Solve() tests after the last iteration when test_interval divides it; otherwise test now.
    if (solver->last_test_iter() != solver->iter()) solver->TestAll();
    const auto& scores = solver->last_test_scores();
    for (size_t i = 0; i < scores.size(); ++i)
      for (const auto& score : scores[i])
        std::printf("Test net #%zu: %s = %g\n", i, score.first.c_str(), score.second);
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(train, "train", "train or fine-tune a net from a solver prototxt",
                    "crema train --solver SOLVER.prototxt [--weights A.caffemodel[,B] | "
                    "--snapshot S.solverstate] [--gpu ID] [--stage S] [--level L] "
                    "[--sigint_effect stop|snapshot|none] [--sighup_effect stop|snapshot|none]\n\n"
                    "Builds the solver's train and test nets, optionally copies weights into all "
                    "of them (layers matched by name) or resumes from a .solverstate, and runs "
                    "the solver to max_iter, snapshotting as the solver says. Ctrl-C stops after "
                    "the current iteration and still writes the final snapshot. At the end the "
                    "final test scores (after max_iter) are printed on stdout.",
                    {"solver", "weights", "snapshot", "gpu", "math", "cudnn_workspace_mb", "deterministic", "stage", "level", "sigint_effect",
                     "sighup_effect"},
                    &crema::cli::RunTrain);
