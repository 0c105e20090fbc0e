// crema train: trains (or fine-tunes, or resumes) a net from a solver prototxt, as Caffe's
// `caffe train`.
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "finetune.hpp"
#include "flags.hpp"
#include "io/prefetch_pool.hpp"
#include "local_group.hpp"
#include "overrides.hpp"
#include "solvers/distributed.hpp"
#include "verb.hpp"

DEFINE_string(sigint_effect, "stop",
              "What to do on SIGINT (Ctrl-C): stop (write the final snapshot and exit), "
              "snapshot (write a snapshot and go on) or none.");
DEFINE_string(sighup_effect, "snapshot",
              "What to do on SIGHUP: snapshot (write a snapshot and go on), stop or none.");
DECLARE_bool(skip_mismatched);
DECLARE_string(freeze);
DEFINE_bool(resume, false,
            "Resume from the newest <snapshot_prefix>_iter_N.solverstate(.h5) (highest N), as "
            "--snapshot auto; with none yet, say so and start from iteration 0.");

DEFINE_bool(scale_lr_by_world, false,
            "With N processes (mpirun -np N, WORLD_SIZE=N): multiply base_lr by N (the linear "
            "scaling rule for a global "
            "batch N times the per-process one); no effect in a single process.");
DEFINE_double(allreduce_bucket_mb, 25,
              "Multi-process runs: gradients are averaged in buckets of about this many MB.");
DEFINE_int32(nproc, 1,
             "Train with N processes on this machine (data-parallel, batch_size per process), "
             "as --gpu 0,1 does with one process per GPU; see docs/distributed.md.");
DEFINE_bool(overlap_allreduce, true,
            "Multi-process runs: average each bucket of gradients while backward goes on "
            "(same results as after backward).");

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

// The snapshot state file of `prefix` with the highest iteration number, or "" when there is
// none; on a tie the one in `format` wins.
std::string NewestSolverState(const std::string& prefix, SolverParameter::SnapshotFormat format) {
  namespace fs = std::filesystem;
  const fs::path folder = fs::path(prefix).parent_path();
  const std::string stem = fs::path(prefix).filename().string() + "_iter_";
  std::error_code ec;
  fs::directory_iterator it(folder.empty() ? fs::path(".") : folder, ec);
  if (ec) return "";
  std::string best;
  long best_iter = -1;
  bool best_in_format = false;
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(stem, 0) != 0) continue;
    size_t end = stem.size();
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    const std::string suffix = name.substr(end);
    if (end == stem.size() || end - stem.size() > 9 ||
        (suffix != ".solverstate" && suffix != ".solverstate.h5"))
      continue;
    const long iter = std::stol(name.substr(stem.size(), end - stem.size()));
    const bool in_format = (suffix == ".solverstate.h5") == (format == SolverParameter::HDF5);
    if (iter > best_iter || (iter == best_iter && in_format && !best_in_format)) {
      best_iter = iter;
      best_in_format = in_format;
      best = (folder / name).string();
    }
  }
  return best;
}

// Writes the solver as it runs (after --set, nets inlined when --set changed them) beside the
// snapshots, so a run can be repeated exactly.
void WriteEffectiveSolver(const SolverParameter& param) {
  if (!param.has_snapshot_prefix()) return;
  const std::string path = param.snapshot_prefix() + "_solver.prototxt";
  try {
    const std::filesystem::path folder = std::filesystem::path(path).parent_path();
    std::error_code ec;
    if (!folder.empty()) std::filesystem::create_directories(folder, ec);
    WriteTextProto(param, path);
    LOG(INFO) << "Wrote the effective solver to " << path;
  } catch (const RuntimeError& e) {
    LOG(WARNING) << "could not write the effective solver: " << e.what();
  }
}

Device TrainDevice(const SolverParameter& param) {
  // A list of GPUs: each rank takes its local rank's (a single process never gets here with a
  // list: RunLocalGroup starts one process per GPU).
  if (!FLAGS_gpu.empty()) return DeviceFromFlags(dist::LocalRank());
  // Without --gpu, an explicit `solver_mode: GPU` (with device_id) chooses the device, as in
  // Caffe; the proto's implicit default (GPU) does not.
  if (param.has_solver_mode() && param.solver_mode() == SolverParameter::GPU) {
    if (CudaDeviceCount() == 0) {
      LOG(WARNING) << FLAGS_solver << ": solver_mode: GPU but no CUDA device is visible"
                   << " (or crema was built without CUDA); training on the CPU";
      return Device::Cpu();
    }
    // Several processes: each takes the GPU of its rank on the node (LOCAL_RANK).
    const int id = dist::Active() ? dist::LocalRank() % CudaDeviceCount() : param.device_id();
    SetCudaDevice(id);
    ApplyGpuMathFlags();
    return Device::Cuda(id);
  }
  return Device::Cpu();
}

int TrainOnThisRank() {
  RequireFlag("solver", FLAGS_solver);
  const bool resume = FLAGS_resume || FLAGS_snapshot == "auto";
  if (FLAGS_resume && !FLAGS_snapshot.empty() && FLAGS_snapshot != "auto")
    CREMA_THROW_CONFIG("give --resume (the newest snapshot) or --snapshot FILE, not both");
  if ((resume || !FLAGS_snapshot.empty()) && !FLAGS_weights.empty())
    CREMA_THROW_CONFIG("give --snapshot to resume training or --weights to fine-tune, not both");
  const Solver::Action sigint_effect = EffectFromFlag("sigint_effect", FLAGS_sigint_effect);
  const Solver::Action sighup_effect = EffectFromFlag("sighup_effect", FLAGS_sighup_effect);

  SolverParameter param;
  std::shared_ptr<ProtoSource> source = ReadSolverParamsFromTextFile(FLAGS_solver, &param);
  param.mutable_train_state()->set_level(FLAGS_level);
  for (const std::string& stage : StagesFromFlag()) param.mutable_train_state()->add_stage(stage);
  const std::vector<Override> overrides = ParseOverrides(RepeatedFlagValues(FLAGS_set), "--set");
  ApplySolverOverrides(overrides, &param);
  // The nets are read relative to the cwd, as the solver does. Once inlined, errors inside an
  // overridden net name its layer but no longer its file and line.
  ApplyNetOverrides(overrides, "", &param);
  if (FLAGS_deterministic) param.set_deterministic(true);
  ApplyAmpFlag(&param);

  std::string snapshot = resume ? "" : FLAGS_snapshot;
  if (resume) {
    if (!param.has_snapshot_prefix())
      CREMA_THROW_CONFIG(FLAGS_solver, ": --resume needs snapshot_prefix in the solver");
    snapshot = NewestSolverState(param.snapshot_prefix(), param.snapshot_format());
    if (snapshot.empty()) {
      LOG(INFO) << "--resume: no snapshot " << param.snapshot_prefix()
                << "_iter_N.solverstate yet; starting from iteration 0";
    } else {
      LOG(INFO) << "--resume: the newest snapshot is " << snapshot;
    }
  }
  if (!snapshot.empty() && !overrides.empty())
    LOG(INFO) << "Resuming with --set: the .solverstate holds only the iteration, the "
                 "learning-rate step, the update history and the data positions; every other "
                 "setting comes from "
              << FLAGS_solver << " and --set";

  // Weights to start from: --weights, else the solver's `weights` fields; none when resuming.
  // They are copied here (into the train net and every test net, as Caffe's CopyLayers).
  std::vector<std::string> weights;
  if (FLAGS_weights.empty() && snapshot.empty()) {
    for (const std::string& w : param.weights())
      for (const std::string& file : SplitList(w)) weights.push_back(file);
  } else {
    weights = SplitList(FLAGS_weights);
  }
  SolverParameter effective = param;
  if (!FLAGS_weights.empty()) {
    effective.clear_weights();
    effective.add_weights(FLAGS_weights);
  }
  param.clear_weights();
  // After `effective`: <prefix>_solver.prototxt keeps the rate of the solver file.
  if (FLAGS_scale_lr_by_world && dist::Active()) {
    LOG(INFO) << "--scale_lr_by_world: base_lr " << param.base_lr() << " x " << dist::WorldSize()
              << " ranks = " << param.base_lr() * dist::WorldSize();
    param.set_base_lr(param.base_lr() * dist::WorldSize());
  }

  SolverOptions options;
  options.device = TrainDevice(param);
  if (FLAGS_allreduce_bucket_mb <= 0)
    CREMA_THROW_CONFIG("--allreduce_bucket_mb must be > 0, got ", FLAGS_allreduce_bucket_mb);
  options.allreduce_bucket_bytes = static_cast<size_t>(FLAGS_allreduce_bucket_mb * (1 << 20));
  options.overlap_allreduce = FLAGS_overlap_allreduce;
  options.cuda_graph = FLAGS_cuda_graph;
  options.source = source;
  options.train_net_memory_plan = MemoryPlanFromFlag(MemoryPlan::kTraining);
  options.test_net_memory_plan = MemoryPlanFromFlag(MemoryPlan::kInference);
  options.progress =
      dist::IsRoot() && LiveProgress() && (FLAGS_progress == "on" || FLAGS_log_dir.empty());
  // The progress line replaces the INFO log on the terminal (warnings and errors still show);
  // the numbers are in <snapshot_prefix>_metrics.jsonl.
  if (options.progress && FLAGS_log_dir.empty()) FLAGS_minloglevel = google::GLOG_WARNING;
  LOG(INFO) << "Using " << options.device.ToString();
  std::unique_ptr<Solver> solver = Solver::Create(param, options);
  if (param.deterministic()) effective.set_random_seed(solver->param().random_seed());  // picked
  if (dist::IsRoot()) WriteEffectiveSolver(effective);

  CopyWeightsWithReport(solver.get(), weights, FLAGS_skip_mismatched);
  FreezeMatchingLayers(solver.get(), FreezePatterns(FLAGS_freeze));

  SignalHandler signals(sigint_effect, sighup_effect);
  solver->set_action_function([&signals] { return signals.GetAction(); });

  if (!snapshot.empty()) {
    LOG(INFO) << "Resuming from " << snapshot;
    solver->Restore(snapshot);
    LOG(INFO) << "Resumed at iteration " << solver->iter();
  }
  LOG(INFO) << "Starting Optimization";
  const PrefetchWait wait_before = TotalPrefetchWait();
  if (FLAGS_check_nan) {
    solver->net()->set_check_finite(true);
    for (const auto& net : solver->test_nets()) net->set_check_finite(true);
  }
  try {
    solver->Solve();
  } catch (const NonFiniteError& e) {
    CREMA_THROW_RUNTIME(e.what(), " at iteration ", solver->iter());
  }
  LOG(INFO) << "Optimization Done.";
  // Time the data layers' Forward (train and test nets) waited for their prefetch threads.
  const PrefetchWait wait = TotalPrefetchWait();
  LOG(INFO) << "Waited for data: " << wait.ms - wait_before.ms << " ms over "
            << wait.batches - wait_before.batches << " batches";

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

// Under an MPI launcher (mpirun -np N) or torchrun-style variables every rank trains a replica
// (solvers/distributed.hpp); only rank 0 logs INFO, tests and writes files; a rank that fails ends
// the whole job.
int RunTrain(const std::vector<std::string>& args) {
  int group_code = 0;
  if (RunLocalGroup(&group_code)) return group_code;
  dist::Init();
  if (dist::Active() && !dist::IsRoot())
    FLAGS_minloglevel = std::max<int>(FLAGS_minloglevel, google::GLOG_WARNING);
  if (dist::Active())
    LOG(INFO) << dist::TransportName() << ": " << dist::WorldSize() << " ranks; this is rank "
              << dist::Rank() << " (local rank " << dist::LocalRank() << ")";
  int code = 0;
  try {
    code = TrainOnThisRank();
  } catch (const std::exception& e) {
    dist::AbortJob(e.what());  // returns only in a single process
    throw;
  }
  dist::Finalize();
  return code;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    train, "train", "train or fine-tune a net from a solver prototxt",
    "crema train --solver SOLVER.prototxt [--weights A.caffemodel[,B] | --snapshot "
    "S.solverstate | --resume] [--set FIELD=VALUE ...] [--gpu ID[,ID...]|all] [--nproc N] "
    "[--stage S] [--level L] "
    "[--skip-mismatched] [--freeze REGEX ...] [--sigint_effect stop|snapshot|none] "
    "[--sighup_effect stop|snapshot|none]\n\n"
    "Builds the solver's train and test nets, optionally copies weights into all of them "
    "(layers matched by name) or resumes from a .solverstate, and runs the solver to max_iter, "
    "snapshotting as the solver says. Ctrl-C stops after the current iteration and still writes "
    "the final snapshot. At the end the final test scores (after max_iter) are printed on "
    "stdout.\n\n"
    "Fine-tuning: --weights A[,B] copies the layers of each file, in order, by name, and "
    "prints for every layer with params whether it was copied (from which file) or keeps its "
    "fillers (no layer of that name). A layer whose blob shapes differ from the file's is an "
    "error (layer, blob index, both shapes, file) unless --skip-mismatched, which leaves it at "
    "its fillers and says so. --freeze REGEX (repeatable, or a comma list) sets lr_mult 0 on "
    "every param blob of the train net's layers whose names fully match (ECMAScript): they are "
    "not updated and their weight gradients are not computed, as `param { lr_mult: 0 }` in the "
    "prototxt; a regex that matches no layer with params is an error.\n\n"
    "--set FIELD=VALUE (repeatable) overrides a solver field without editing files:\n"
    "  --set base_lr=0.01 --set lr_policy=multistep --set stepvalue=1000,2000\n"
    "  --set train_state.level=1 --set test_state[0].stage=val --set solver_mode=CPU\n"
    "  --set net.conv1.convolution_param.num_output=32 --set net.data.data_param.batch_size=32\n"
    "  --set net.fc8.param.lr_mult=0 (every param block of fc8; param[1] for the bias only;\n"
    "  a layer without param blocks gets one, which is its weights': add --set\n"
    "  net.fc8.param[1].lr_mult=0 to freeze the bias too)\n"
    "Dots go into messages; [i] picks element i of a repeated field (i == size appends); a\n"
    "repeated message without [i] means all its elements (one is created if there is none); a\n"
    "repeated scalar takes a comma-separated list, and its first --set replaces the file's list\n"
    "while later ones append. net.LAYER.PATH sets PATH in every layer named LAYER of the\n"
    "solver's nets (all phases); net.FIELD sets a NetParameter field. Nets given by file are\n"
    "then carried inline (net_param, ...); paths inside them still resolve as before. Each\n"
    "override is logged with its old and new value; an unknown field or a bad value is an error\n"
    "(exit 2). The solver as run is written to <snapshot_prefix>_solver.prototxt.\n\n"
    "--resume (or --snapshot auto) continues from the newest <snapshot_prefix>_iter_N"
    ".solverstate(.h5) (highest N); when there is none it says so and starts from iteration 0, "
    "so the same command line starts and restarts a job. A .solverstate holds only the "
    "iteration, the learning-rate step, the update history and where each data layer is in its "
    "source (so a resumed run reads the batches the uninterrupted run would have read; a state "
    "written by Caffe restarts the data from the first record, with a notice): the schedule "
    "(max_iter, base_lr, stepvalue, ...) comes from the solver file plus --set, so --set "
    "max_iter=N extends a finished run.\n\n"
    "--deterministic (or deterministic: true in the solver) seeds everything from random_seed "
    "(one is picked and logged when it is unset), sums CPU reductions in a fixed order so "
    "results do not depend on the thread count, and restricts cuDNN to deterministic "
    "algorithms. Epoch-based solver fields: max_epoch (max_iter from the train data layer's "
    "record count), test_interval_epochs, test_whole_set (test_iter covers each test set "
    "once).\n\n"
    "Beside the snapshots: <snapshot_prefix>_metrics.jsonl (JSON lines: every iteration's lr, "
    "loss and outputs, every test's scores) and TensorBoard events in "
    "<snapshot_prefix>_tensorboard/. On a terminal (--progress auto) a live progress line "
    "replaces the INFO log.\n\n"
    "Multi-process (data-parallel) training: `mpirun -np N crema train --solver S` (built with "
    "MPI), or N processes started with torchrun-style RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR "
    "and MASTER_PORT (a TCP group; NCCL for GPU nets), or `crema train --gpu 0,1` (--gpu all) / "
    "`--nproc N`, which starts one process per GPU (or N) on this machine itself, runs one "
    "replica per rank; gradients are "
    "averaged over the ranks before "
    "every update, rank 0's weights are broadcast at the start, the train net's Data layers read "
    "shard `rank` of N (unless their data_param sets shard_id/num_shards), and only rank 0 logs, "
    "tests and writes snapshots and logs. The global batch is N x batch_size x iter_size; "
    "--scale_lr_by_world multiplies base_lr by N. See "
    "docs/distributed.md.",
    {"memory_plan",
     "solver",
     "weights",
     "snapshot",
     "resume",
     "set",
     "gpu",
     "math",
     "cudnn_workspace_mb",
     "deterministic",
     "check_nan",
     "cuda_graph",
     "amp",
     "scale_lr_by_world",
     "allreduce_bucket_mb",
     "overlap_allreduce",
     "nproc",
     "stage",
     "level",
     "sigint_effect",
     "sighup_effect",
     "progress",
     "skip_mismatched",
     "freeze"},
    &crema::cli::RunTrain);
