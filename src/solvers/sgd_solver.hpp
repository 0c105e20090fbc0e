#pragma once
// Stochastic gradient descent with momentum (Caffe's "SGD"). Per iteration, with rate from
// lr_policy and, per learnable param i (lr_mult_i, decay_mult_i):
//   diff_i /= iter_size                                   (Normalize)
//   diff_i += weight_decay * decay_mult_i * w_i            (Regularize, L2; L1 uses sign(w_i))
//   history_i = momentum * history_i + rate * lr_mult_i * diff_i;  diff_i = history_i
//   w_i -= diff_i                                          (net->Update())
// after optional clipping of the global L2 norm of all diffs to clip_gradients. The solver state
// is history (one blob per learnable param), iter and current_step.
//
// Other update rules (Nesterov, AdaGrad, RMSProp, AdaDelta, Adam) derive from this class and
// override ComputeUpdateValue; they may append more blobs to history_ in their constructor
// (snapshots save and restore all of history_).
#include <string>
#include <vector>

#include "crema/blob.hpp"
#include "crema/solver.hpp"

namespace crema {

class SGDSolver : public Solver {
 public:
  SGDSolver(const SolverParameter& param, const SolverOptions& options);
  const char* type() const override { return "SGD"; }
  const std::vector<BlobPtr>& history() const { return history_; }

 protected:
  void ApplyUpdate() override;
  // Plain SGD on a GPU without clipping: Regularize and one fused kernel per param (history,
  // diff and weight), reading the rate from device memory, so a CUDA graph may capture it.
  bool UpdateCapturable() const override;
  void FuseUpdateIntoBackward() override;
  void PrepareUpdate() override;
  void UpdateParams(bool guard_nonfinite) override;
  // The rate for this iteration, committing the schedule's position (current_step_) as Caffe's
  // GetLearningRate does for "step" and "multistep".
  double UpdateLearningRate();
  // Scales all diffs so that their joint L2 norm is at most clip_gradients (when >= 0).
  virtual void ClipGradients();
  virtual void Normalize(int param_id);
  virtual void Regularize(int param_id);
  virtual void ComputeUpdateValue(int param_id, double rate);

  void SnapshotSolverState(const std::string& model_filename) override;
  void RestoreSolverStateFromBinaryProto(const std::string& state_file) override;
  void RestoreSolverStateFromHDF5(const std::string& state_file) override;
  // Loads the SolverState's learned_net into the train net: as written (relative to the cwd, as
  // Caffe), else beside the state file when it was moved with its model.
  void RestoreLearnedNet(const std::string& learned_net, const std::string& state_file);
  // Whether the update runs on the GPU (the train net's device).
  bool OnGpu() const { return net_->device().is_cuda(); }
  // Appends one zeroed blob per learnable param to history_ (AdaDelta's and Adam's second set).
  void AppendHistoryBlobs();
  // rate * lr_mult of a param, rounded to its type first as Caffe's Dtype arithmetic does.
  template <typename T>
  T LocalRate(int param_id, double rate) const {
    return static_cast<T>(rate) * static_cast<T>(net_->params_lr()[param_id]);
  }
  // A param's diff, or a state blob's data, where the update runs (host, or device for a GPU net).
  template <typename T>
  T* UpdateDiff(int param_id) const {
    Blob* param = net_->learnable_params()[param_id];
    return OnGpu() ? param->mutable_gpu_diff<T>() : param->mutable_cpu_diff<T>();
  }
  template <typename T>
  T* UpdateData(const BlobPtr& blob) const {
    return OnGpu() ? blob->mutable_gpu_data<T>() : blob->mutable_cpu_data<T>();
  }

  // One blob per learnable param, shaped and typed like it (derived solvers may add more).
  std::vector<BlobPtr> history_;
  // Scratch blobs shaped like the params (L1 signs; derived solvers' intermediate values),
  // allocated only by the solvers that use them.
  std::vector<BlobPtr> update_;
  std::vector<BlobPtr> temp_;

 private:
  // Whether UpdateParams runs plain SGD's fused GPU step.
  bool FusedGpuStep() const;
  // Whether UpdateParams runs plain SGD (L2 or no decay) on the CPU as cpu::SgdL2Step, one pass
  // per param; and that step's local rate and decay for a param.
  bool SgdL2StepOnCpu() const;
  void SgdL2Coefficients(int param_id, double rate, double* local_rate, double* decay) const;
  // Set by FuseUpdateIntoBackward for the next UpdateParams, which asks the net what was taken.
  bool fused_steps_pending_ = false;
  // The rate PrepareUpdate set for UpdateParams.
  double rate_ = 0;
  // Device: [0] the rate, [1] the net's loss (FusedGpuStep's non-finite guard).
  Blob device_scalars_{DataType::kFloat64};
};

}  // namespace crema
