#pragma once
// Solver: builds the train net and test nets from a SolverParameter, runs the training loop
// (forward/backward, iter_size accumulation, update, display, test, snapshot) with Caffe's
// semantics. Update rules are subclasses registered by their `type` string ("SGD", ...).
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crema/device.hpp"
#include "crema/net.hpp"
#include "crema/proto.hpp"

namespace crema {

class ProtoSource;

struct SolverOptions {
  Device device;
  // Where the SolverParameter came from (error locations); may be null.
  std::shared_ptr<const ProtoSource> source;
  // Directory that relative net paths in the solver are resolved against ("" = cwd, as Caffe).
  std::string base_dir;
  // Draw a live progress line on stdout (the CLI sets this when stdout is a terminal).
  bool progress = false;
  // Activation memory plans (NetOptions::memory_plan) of the train net and of the test nets
  // (whose outputs only are read, unless a caller reads test_nets() blobs).
  MemoryPlan train_net_memory_plan = MemoryPlan::kOff;
  MemoryPlan test_net_memory_plan = MemoryPlan::kInference;
  // With a training plan for the train net and an inference plan for the test nets, the test
  // nets' planned buffers are the train net's (they run between iterations).
  bool share_test_memory = true;
  // Data-parallel training (solvers/distributed.hpp): gradients averaged in buckets of about
  // this many bytes, overlapped with backward when `overlap_allreduce`.
  size_t allreduce_bucket_bytes = size_t{25} << 20;
  bool overlap_allreduce = true;
  // On a GPU, capture the training iteration into a CUDA graph and replay it where that is legal
  // (src/net/iteration_graph.hpp); crema --cuda-graph.
  bool cuda_graph = true;
  // Plain SGD's step on the CPU inside the Backward of the layers that can apply it where they
  // write the gradient (Layer::SgdStep: InnerProduct at small batches); the same bits as after
  // the Backward. False: always after (for comparisons).
  bool fuse_update = true;
};

class IterationGraph;
class LossScaler;
class ProgressLine;
class TrainingLog;
namespace dist {
class GradientReducer;
}

class Solver {
 public:
  // What the training loop should do when polled between iterations (signals, callbacks).
  enum class Action { kNone, kStop, kSnapshot };
  using ActionFunction = std::function<Action()>;
  // Called after every iteration's update, with the solver.
  using IterationCallback = std::function<void(const Solver&)>;

  Solver(const SolverParameter& param, const SolverOptions& options);
  virtual ~Solver();
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;

  // Creates the solver named by param.type() (legacy solver_type upgraded first).
  static std::unique_ptr<Solver> Create(const SolverParameter& param,
                                        const SolverOptions& options = {});
  static std::vector<std::string> Types();

  // Runs until max_iter (resuming from `resume_file` when given): the final snapshot, display
  // and test follow Caffe.
  void Solve(const std::string& resume_file = "");
  // Runs `iters` iterations.
  void Step(int iters);
  // Restores the iteration, learning-rate state, history and weights from a .solverstate
  // (binary or HDF5).
  void Restore(const std::string& state_file);
  // Writes <prefix>_iter_N.caffemodel (or .caffemodel.h5) and .solverstate(.h5); returns the
  // model file name.
  std::string Snapshot();
  // Runs all test nets once (test_iter batches each), logging and returning each net's scores.
  std::vector<std::vector<std::pair<std::string, double>>> TestAll();
  // The scores of the latest TestAll (empty before the first test) and its iteration (-1).
  const std::vector<std::vector<std::pair<std::string, double>>>& last_test_scores() const {
    return last_test_scores_;
  }
  int last_test_iter() const { return last_test_iter_; }

  const SolverParameter& param() const { return param_; }
  Net* net() const { return net_.get(); }
  const std::vector<std::unique_ptr<Net>>& test_nets() const { return test_nets_; }
  int iter() const { return iter_; }
  double smoothed_loss() const { return smoothed_loss_; }
  virtual const char* type() const = 0;
  // Learning rate for the current iteration under the lr_policy.
  double GetLearningRate() const;

  // CUDA graphs of the training iteration (on a GPU; SolverOptions::cuda_graph): whether the
  // last iteration replayed one, and why not ("" when it did or is about to).
  bool graph_replayed() const;
  std::string graph_reason() const;
  // FP16 training (amp: FP16, --amp fp16): the loss scaler's current scale; 1 otherwise.
  double loss_scale() const;
  // Turns the graphs on or off from the next iteration (a new graph is captured when on).
  void set_cuda_graph(bool on);

  void set_action_function(ActionFunction f) { action_function_ = std::move(f); }
  void add_iteration_callback(IterationCallback f) { iteration_callbacks_.push_back(std::move(f)); }

 protected:
  // Turns the accumulated diffs into updates and applies them (lr, momentum, decay, clipping).
  virtual void ApplyUpdate() = 0;
  // The same update in two parts, for CUDA graphs (src/net/iteration_graph.hpp): the host's work
  // (the learning rate and its log line, the rate into device memory), then the device's, which
  // a graph may capture and replay when UpdateCapturable() says so. ApplyUpdate does both.
  // With `guard_nonfinite`, UpdateParams leaves the weights and history as they are when the
  // net's loss is not finite (stop_on_nonfinite_loss, read on the device).
  virtual bool UpdateCapturable() const { return false; }
  // Before the Backward of an iteration's only pass (iter_size 1, no all-reduce or loss scaling,
  // a loss that stop_on_nonfinite_loss lets through): hands the update of the params whose
  // layers can apply it to those layers (Net::SetFusedSgdSteps, SolverOptions::fuse_update);
  // UpdateParams then skips the params they updated.
  virtual void FuseUpdateIntoBackward() {}
  virtual void PrepareUpdate() {}
  virtual void UpdateParams(bool guard_nonfinite) {}
  virtual void SnapshotSolverState(const std::string& model_filename) = 0;
  virtual void RestoreSolverStateFromBinaryProto(const std::string& state_file) = 0;
  virtual void RestoreSolverStateFromHDF5(const std::string& state_file) = 0;

  // <prefix>_iter_<iter><extension>, or <prefix>_best<extension> while keep_best snapshots.
  std::string SnapshotFilename(const std::string& extension) const;
  void TestNet(int test_net_id, std::vector<std::pair<std::string, double>>* scores);
  void UpdateSmoothedLoss(double loss, int start_iter, int average_loss);
  // Error prefix naming the solver file and field.
  std::string ErrorAt(const std::string& field) const;
  // The read positions of the data layers of every net, as of the last batch each consumed
  // (SolverState.data_state), and back; a state without them (Caffe's, older crema's) leaves the
  // data layers where they are, with a notice.
  void SaveDataStates(SolverState* state) const;
  void RestoreDataStates(const SolverState& state, const std::string& state_file);
  // The CPU engines every net's layers chose (SolverState.cpu_engine), and back: decided before
  // the first iteration (Net::PrepareCpuEngines), kept so that a resumed run runs the same ones.
  void SaveCpuEngines(SolverState* state) const;
  void RestoreCpuEngines(const SolverState& state);
  // The FP16 loss scaler's state (SolverState.amp_loss_scale, amp_clean_iterations), and back.
  void SaveAmpState(SolverState* state) const;
  void RestoreAmpState(const SolverState& state);

  SolverParameter param_;
  SolverOptions options_;
  std::unique_ptr<Net> net_;
  std::vector<std::unique_ptr<Net>> test_nets_;
  int iter_ = 0;
  int current_step_ = 0;
  std::vector<double> losses_;
  double smoothed_loss_ = 0;
  bool requested_early_exit_ = false;
  ActionFunction action_function_;
  std::vector<std::vector<std::pair<std::string, double>>> last_test_scores_;
  int last_test_iter_ = -1;
  std::vector<IterationCallback> iteration_callbacks_;
  // The state of early_stopping, keep_best and reduce_lr_on_plateau (saved with snapshots).
  CallbackState callback_state_;
  // Whether any of those callbacks is configured (only then is their state saved).
  bool HasCallbacks() const {
    return param_.has_early_stopping() || param_.has_keep_best() ||
           param_.has_reduce_lr_on_plateau();
  }

 private:
  void InitTrainNet();
  void InitTestNets();
  // deterministic: the seed and the process-wide deterministic setting.
  void SetUpDeterminism();
  // max_epoch and test_interval_epochs -> max_iter and test_interval.
  void ApplyEpochSettings();
  // test_whole_set: test_iter from each test net's data layer; remembers where they start.
  void ApplyTestWholeSet();
  void CheckMonitors() const;
  // eval_type and ap_version, against the test nets' outputs (DetectionEvaluate for "detection").
  void CheckTestEvaluation() const;
  Action GetRequestedAction() const;
  // Multi-process training (solvers/distributed.hpp): sets shard_id = rank and num_shards = world
  // in the train net's Data layers that set neither; broadcasts rank 0's weights and logs the
  // global batch; broadcasts rank 0's early stop, learning-rate scale and `request` (returned).
  void ShardTrainData(NetParameter* net_param);
  void SyncReplicas();
  Action SyncDecisions(Action request);
  // The lr_policy's rate, before reduce_lr_on_plateau.
  double ScheduledLearningRate() const;
  // Runs the callbacks on the latest test scores.
  void AfterTest();
  // Deletes this run's snapshots beyond the newest snapshot_keep.
  void PruneSnapshots(const std::string& model_file, const std::string& state_file);
  void OpenTrainingLog();
  void Say(const std::string& text);

  std::unique_ptr<TrainingLog> log_;
  std::unique_ptr<ProgressLine> progress_;
  std::chrono::steady_clock::time_point start_time_ = std::chrono::steady_clock::now();
  std::vector<std::pair<std::string, std::string>> kept_snapshots_;
  bool snapshot_best_ = false;
  // test_whole_set: each test net's data layers at their start, restored before each pass.
  std::vector<std::vector<std::pair<Layer*, DataLayerState>>> test_start_states_;
  // The train net's Data layers that ShardTrainData sharded by rank.
  std::set<std::string> auto_sharded_;
  // Averages the gradients over the ranks (multi-process runs only).
  std::unique_ptr<dist::GradientReducer> reducer_;
  // Whether the nets' CPU engines were decided (at the first Step).
  bool cpu_engines_prepared_ = false;
  // The train net's iteration as a CUDA graph (GPU nets).
  std::unique_ptr<IterationGraph> graph_;
  // The nets' mixed precision: the solver's amp field, else the process default (--amp).
  Amp SolverAmp() const;
  // FP16 training's loss scaler (null otherwise).
  std::unique_ptr<LossScaler> scaler_;
  // One forward/backward pass (and, when captured, the update): the iteration's loss.
  double ForwardBackwardPass(bool last_pass, bool* updated);
};

class SolverRegistry {
 public:
  using Creator =
      std::function<std::unique_ptr<Solver>(const SolverParameter&, const SolverOptions&)>;
  static void Add(const std::string& type, Creator creator);
  static bool Has(const std::string& type);
  static std::unique_ptr<Solver> Create(const SolverParameter& param, const SolverOptions& opts);
  static std::vector<std::string> Types();
};

struct SolverRegisterer {
  SolverRegisterer(const char* type, SolverRegistry::Creator creator) {
    SolverRegistry::Add(type, std::move(creator));
  }
};

}  // namespace crema

#define CREMA_REGISTER_SOLVER(type, Class)                                   \
  static ::crema::SolverRegisterer crema_solver_registerer_##type(           \
      #type,                                                                 \
      [](const ::crema::SolverParameter& p, const ::crema::SolverOptions& o) \
          -> std::unique_ptr<::crema::Solver> { return std::make_unique<Class>(p, o); })
