#include "solvers/sgd_solver.hpp"

#include <glog/logging.h>
#include <google/protobuf/text_format.h>

#include <cmath>
#include <filesystem>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "io/hdf5.hpp"
#include "math/math.hpp"
#include "math/sgd_step.hpp"

#ifdef CREMA_WITH_CUDA
#include "math/math_gpu.hpp"
#include "solvers/sgd_solver_gpu.hpp"
#endif

namespace crema {
namespace {

namespace fs = std::filesystem;

// crema's own parts of an HDF5 solver state: a message in text form as a string dataset.
void WriteHdf5Text(hid_t loc, const std::string& name, const google::protobuf::Message& message) {
  std::string text;
  google::protobuf::TextFormat::PrintToString(message, &text);
  WriteHdf5String(loc, name, text);
}

// Reads what WriteHdf5Text wrote, when the dataset is there (`message` stays cleared if not).
void ReadHdf5Text(hid_t loc, const std::string& name, const std::string& state_file,
                  google::protobuf::Message* message) {
  message->Clear();
  if (Hdf5HasDataset(loc, name) &&
      !google::protobuf::TextFormat::ParseFromString(ReadHdf5String(loc, name), message))
    CREMA_THROW_CONFIG(state_file, ": ", name, " is not a valid ", message->GetTypeName(), " text");
}

// A state blob shaped and typed like a param. Its data is allocated, zeroed, where the update
// first touches it (a solver that never uses it never holds it), and its diff never is.
BlobPtr StateBlobLike(const Blob& param) {
  return std::make_shared<Blob>(param.shape(), param.dtype());
}

template <typename T>
void SgdUpdate(int64_t n, T local_rate, T momentum, T* diff, T* history) {
  cpu::Axpby(n, local_rate, static_cast<const T*>(diff), momentum, history);
  cpu::Copy(n, static_cast<const T*>(history), diff);
}

}  // namespace

SGDSolver::SGDSolver(const SolverParameter& param, const SolverOptions& options)
    : Solver(param, options) {
  // Fail on a bad schedule or regularization now, not after the first test and iteration.
  GetLearningRate();
  if (param_.weight_decay() != 0 && param_.regularization_type() != "L2" &&
      param_.regularization_type() != "L1")
    throw ConfigError(ErrorAt("regularization_type") +
                      "regularization_type: unknown regularization \"" +
                      param_.regularization_type() + "\"; expected L2 or L1");
  AppendHistoryBlobs();
  for (Blob* blob : net_->learnable_params()) {
    update_.push_back(StateBlobLike(*blob));
    temp_.push_back(StateBlobLike(*blob));
  }
}

void SGDSolver::AppendHistoryBlobs() {
  for (Blob* blob : net_->learnable_params()) history_.push_back(StateBlobLike(*blob));
}

double SGDSolver::UpdateLearningRate() {
  const double rate = GetLearningRate();
  const std::string& policy = param_.lr_policy();
  if (policy == "step") {
    current_step_ = iter_ / param_.stepsize();
  } else if (policy == "multistep" && current_step_ < param_.stepvalue_size() &&
             iter_ >= param_.stepvalue(current_step_)) {
    ++current_step_;
    LOG(INFO) << "MultiStep Status: Iteration " << iter_ << ", step = " << current_step_;
  }
  return rate;
}

void SGDSolver::ApplyUpdate() {
  PrepareUpdate();
  UpdateParams(false);
}

bool SGDSolver::FusedGpuStep() const {
  // Plain SGD: the other rules derive from this class, with types of their own, and compute their
  // own update values.
  return OnGpu() && std::string(type()) == "SGD";
}

bool SGDSolver::UpdateCapturable() const {
  return FusedGpuStep() && param_.clip_gradients() < 0 && param_.iter_size() == 1;
}

void SGDSolver::PrepareUpdate() {
  rate_ = UpdateLearningRate();
  if (param_.display() && iter_ % param_.display() == 0)
    LOG(INFO) << "Iteration " << iter_ << ", lr = " << rate_;
#ifdef CREMA_WITH_CUDA
  if (FusedGpuStep()) {
    if (device_scalars_.count() != 2) device_scalars_.Reshape(std::vector<int>{2});
    gpu::Set<double>(1, rate_, device_scalars_.mutable_gpu_data<double>());
    // A CUDA graph may update the history behind the heads' back: a restored (host) history goes
    // to the device first, and the device copy counts as the newer one (for snapshots).
    for (const BlobPtr& history : history_) {
      history->data()->PushToDevice();
      history->data()->DeviceWritten();
    }
  }
#endif
}

void SGDSolver::UpdateParams(bool guard_nonfinite) {
  ClipGradients();
  const int num_params = static_cast<int>(net_->learnable_params().size());
#ifdef CREMA_WITH_CUDA
  if (FusedGpuStep()) {
    double* scalars = device_scalars_.mutable_gpu_data<double>();
    const double* loss = nullptr;
    if (guard_nonfinite) {
      net_->DeviceWeightedLoss(scalars + 1);
      loss = scalars + 1;
    }
    for (int param_id = 0; param_id < num_params; ++param_id) {
      Normalize(param_id);
      Regularize(param_id);
      Blob* blob = net_->learnable_params()[param_id];
      if (blob->count() == 0) continue;
      // history = momentum * history + rate * lr_mult * diff; diff = history; w -= diff: what
      // ComputeUpdateValue and Blob::Update do, in one kernel.
      CREMA_DISPATCH_FLOAT(
          blob->dtype(), T,
          gpu::SgdStep<T>(blob->count(), scalars, net_->params_lr()[param_id],
                          static_cast<T>(param_.momentum()), loss, blob->mutable_gpu_diff<T>(),
                          history_[param_id]->mutable_gpu_data<T>(), blob->mutable_gpu_data<T>()));
    }
    return;
  }
#endif
  (void)guard_nonfinite;
  // Plain SGD with L2 (or no) weight decay: regularization, update value and update in one pass,
  // except for the params whose layers applied it in the Backward.
  const bool fused_l2 = SgdL2StepOnCpu();
  std::vector<char> taken;
  if (fused_steps_pending_) taken = net_->FusedSgdStepsTaken();
  fused_steps_pending_ = false;
  for (int param_id = 0; param_id < num_params; ++param_id) {
    Normalize(param_id);
    Blob* blob = net_->learnable_params()[param_id];
    if (fused_l2) {
      if (blob->count() == 0 || (!taken.empty() && taken[param_id])) continue;
      double local_rate = 0, decay = 0;
      SgdL2Coefficients(param_id, rate_, &local_rate, &decay);
      CREMA_DISPATCH_FLOAT(
          blob->dtype(), T,
          cpu::SgdL2Step<T>(blob->count(), static_cast<T>(local_rate),
                            static_cast<T>(param_.momentum()), static_cast<T>(decay),
                            blob->mutable_cpu_data<T>(), blob->mutable_cpu_diff<T>(),
                            history_[param_id]->mutable_cpu_data<T>()));
      continue;
    }
    Regularize(param_id);
    ComputeUpdateValue(param_id, rate_);
  }
  if (fused_l2)
    net_->ParamsUpdated();
  else
    net_->Update();
}

bool SGDSolver::SgdL2StepOnCpu() const {
  return !OnGpu() && std::string(type()) == "SGD" &&
         (param_.weight_decay() == 0 || param_.regularization_type() == "L2");
}

void SGDSolver::SgdL2Coefficients(int param_id, double rate, double* local_rate,
                                  double* decay) const {
  *decay = static_cast<double>(param_.weight_decay()) * net_->params_weight_decay()[param_id];
  *local_rate = rate * net_->params_lr()[param_id];
}

void SGDSolver::FuseUpdateIntoBackward() {
  if (!options_.fuse_update || !SgdL2StepOnCpu() || param_.clip_gradients() >= 0) return;
  // The rate PrepareUpdate will set for this iteration (it moves the schedule on after).
  const double rate = GetLearningRate();
  const std::vector<Blob*>& params = net_->learnable_params();
  std::vector<Layer::SgdStep> steps(params.size());
  for (size_t id = 0; id < params.size(); ++id) {
    if (params[id]->dtype() != DataType::kFloat32 || params[id]->count() == 0) continue;
    double local_rate = 0, decay = 0;
    SgdL2Coefficients(static_cast<int>(id), rate, &local_rate, &decay);
    steps[id] = {static_cast<float>(local_rate), static_cast<float>(param_.momentum()),
                 static_cast<float>(decay), history_[id].get()};
  }
  net_->SetFusedSgdSteps(steps);
  fused_steps_pending_ = true;
}

void SGDSolver::ClipGradients() {
  const double clip_gradients = param_.clip_gradients();
  if (clip_gradients < 0) return;
  double sumsq_diff = 0;
  for (Blob* blob : net_->learnable_params()) sumsq_diff += blob->sumsq_diff();
  const double l2norm_diff = std::sqrt(sumsq_diff);
  if (l2norm_diff > clip_gradients) {
    const double scale_factor = clip_gradients / l2norm_diff;
    LOG(INFO) << "Gradient clipping: scaling down gradients (L2 norm " << l2norm_diff << " > "
              << clip_gradients << ") by scale factor " << scale_factor;
    for (Blob* blob : net_->learnable_params()) blob->scale_diff(scale_factor);
  }
}

void SGDSolver::Normalize(int param_id) {
  if (param_.iter_size() == 1) return;
  // The diffs hold the sum over iter_size passes; make them the mean.
  Blob* blob = net_->learnable_params()[param_id];
  const double normalization = 1.0 / param_.iter_size();
  if (blob->count() == 0) return;
  blob->scale_diff(normalization);
}

void SGDSolver::Regularize(int param_id) {
  Blob* blob = net_->learnable_params()[param_id];
  const double local_decay =
      static_cast<double>(param_.weight_decay()) * net_->params_weight_decay()[param_id];
  if (local_decay == 0 || blob->count() == 0) return;
  const int64_t n = blob->count();
#ifdef CREMA_WITH_CUDA
  if (OnGpu()) {
    if (param_.regularization_type() == "L2") {
      CREMA_DISPATCH_FLOAT(blob->dtype(), T,
                           gpu::Axpy(n, static_cast<T>(local_decay), blob->gpu_data<T>(),
                                     blob->mutable_gpu_diff<T>()));
      return;
    }
    if (param_.regularization_type() == "L1") {
      Blob* sign = temp_[param_id].get();
      CREMA_DISPATCH_FLOAT(blob->dtype(), T, {
        gpu::Sign(n, blob->gpu_data<T>(), sign->mutable_gpu_data<T>());
        gpu::Axpy(n, static_cast<T>(local_decay), static_cast<const T*>(sign->gpu_data<T>()),
                  blob->mutable_gpu_diff<T>());
      });
      return;
    }
  }
#endif
  if (param_.regularization_type() == "L2") {
    CREMA_DISPATCH_FLOAT(blob->dtype(), T,
                         cpu::Axpy(n, static_cast<T>(local_decay), blob->cpu_data<T>(),
                                   blob->mutable_cpu_diff<T>()));
  } else if (param_.regularization_type() == "L1") {
    Blob* sign = temp_[param_id].get();
    CREMA_DISPATCH_FLOAT(blob->dtype(), T, {
      cpu::Sign(n, blob->cpu_data<T>(), sign->mutable_cpu_data<T>());
      cpu::Axpy(n, static_cast<T>(local_decay), static_cast<const T*>(sign->cpu_data<T>()),
                blob->mutable_cpu_diff<T>());
    });
  } else {
    throw ConfigError(ErrorAt("regularization_type") +
                      "regularization_type: unknown regularization \"" +
                      param_.regularization_type() + "\"; expected L2 or L1");
  }
}

void SGDSolver::ComputeUpdateValue(int param_id, double rate) {
  // On a GPU, UpdateParams runs plain SGD as one fused step (gpu::SgdStep).
  CREMA_ASSERT(!OnGpu(), "SGDSolver::ComputeUpdateValue on a GPU net");
  Blob* blob = net_->learnable_params()[param_id];
  if (blob->count() == 0) return;
  const double local_rate = rate * net_->params_lr()[param_id];
  const double momentum = param_.momentum();
  Blob* history = history_[param_id].get();
  CREMA_DISPATCH_FLOAT(
      blob->dtype(), T,
      SgdUpdate<T>(blob->count(), static_cast<T>(local_rate), static_cast<T>(momentum),
                   blob->mutable_cpu_diff<T>(), history->mutable_cpu_data<T>()));
}

// ---- solver state ----

void SGDSolver::SnapshotSolverState(const std::string& model_filename) {
  if (param_.snapshot_format() == SolverParameter::HDF5) {
    const std::string filename = SnapshotFilename(".solverstate.h5");
    LOG(INFO) << "Snapshotting solver state to HDF5 file " << filename;
    // Written beside and renamed, so a crash never leaves a truncated state behind.
    const std::string temp = filename + ".tmp";
    {
      Hdf5File file(temp, Hdf5File::Mode::kCreate);
      WriteHdf5Int(file.id(), "iter", iter_);
      WriteHdf5String(file.id(), "learned_net", model_filename);
      WriteHdf5Int(file.id(), "current_step", current_step_);
      if (HasCallbacks()) WriteHdf5Text(file.id(), "callback_state", callback_state_);
      // The data layers' positions and the CPU engines: SolverStates holding only data_state
      // and only cpu_engine.
      SolverState data;
      SaveDataStates(&data);
      if (data.data_state_size() > 0) WriteHdf5Text(file.id(), "data_state", data);
      SolverState engines;
      SaveCpuEngines(&engines);
      if (engines.cpu_engine_size() > 0) WriteHdf5Text(file.id(), "cpu_engine", engines);
      SolverState amp;
      SaveAmpState(&amp);
      if (amp.has_amp_loss_scale()) WriteHdf5Text(file.id(), "amp_state", amp);
      Hdf5Handle history(file.CreateGroup("history"));
      for (size_t i = 0; i < history_.size(); ++i)
        WriteBlobToHDF5(history.get(), std::to_string(i), *history_[i], false);
      history = Hdf5Handle();
      file.Close();
    }
    CommitFileAtomically(temp, filename);
    return;
  }
  SolverState state;
  state.set_iter(iter_);
  state.set_learned_net(model_filename);
  state.set_current_step(current_step_);
  if (HasCallbacks()) *state.mutable_callback_state() = callback_state_;
  SaveDataStates(&state);
  SaveCpuEngines(&state);
  SaveAmpState(&state);
  for (const BlobPtr& blob : history_) blob->ToProto(state.add_history());
  const std::string filename = SnapshotFilename(".solverstate");
  LOG(INFO) << "Snapshotting solver state to binary proto file " << filename;
  WriteBinaryProto(state, filename);
}

void SGDSolver::RestoreLearnedNet(const std::string& learned_net, const std::string& state_file) {
  std::string path = learned_net;
  std::error_code ec;
  if (!fs::exists(path, ec) && fs::path(path).is_relative()) {
    const fs::path beside = fs::path(state_file).parent_path() / fs::path(path).filename();
    if (fs::exists(beside, ec)) {
      LOG(INFO) << "learned_net " << learned_net << " not found; using " << beside.string()
                << " beside the solver state";
      path = beside.string();
    }
  }
  try {
    net_->CopyTrainedLayersFrom(path);
  } catch (const ConfigError& e) {
    CREMA_THROW_CONFIG(state_file, ": learned_net: ", e.what());
  } catch (const RuntimeError& e) {
    CREMA_THROW_RUNTIME(state_file, ": learned_net: ", e.what());
  }
}

void SGDSolver::RestoreSolverStateFromBinaryProto(const std::string& state_file) {
  SolverState state;
  ReadBinaryProto(state_file, &state);
  iter_ = state.iter();
  if (state.has_learned_net()) RestoreLearnedNet(state.learned_net(), state_file);
  current_step_ = state.current_step();
  callback_state_ = state.callback_state();
  if (state.history_size() != static_cast<int>(history_.size()))
    CREMA_THROW_CONFIG(state_file, ": the solver state has ", state.history_size(),
                       " history blobs but this ", type(), " solver on this net needs ",
                       history_.size());
  for (size_t i = 0; i < history_.size(); ++i) {
    try {
      history_[i]->FromProto(state.history(static_cast<int>(i)), /*reshape=*/false);
    } catch (const ConfigError& e) {
      CREMA_THROW_CONFIG(state_file, ": history blob ", i, ": ", e.what());
    }
  }
  RestoreDataStates(state, state_file);
  RestoreCpuEngines(state);
  RestoreAmpState(state);
}

void SGDSolver::RestoreSolverStateFromHDF5(const std::string& state_file) {
  Hdf5File file(state_file, Hdf5File::Mode::kRead);
  iter_ = ReadHdf5Int(file.id(), "iter");
  if (Hdf5HasDataset(file.id(), "learned_net"))
    RestoreLearnedNet(ReadHdf5String(file.id(), "learned_net"), state_file);
  current_step_ = ReadHdf5Int(file.id(), "current_step");
  ReadHdf5Text(file.id(), "callback_state", state_file, &callback_state_);
  Hdf5Handle history(file.OpenGroup("history"));
  const size_t num_saved = Hdf5ChildNames(history.get()).size();
  if (num_saved != history_.size())
    CREMA_THROW_CONFIG(state_file, ": the solver state has ", num_saved, " history blobs but this ",
                       type(), " solver on this net needs ", history_.size());
  for (size_t i = 0; i < history_.size(); ++i)
    ReadBlobFromHDF5(history.get(), std::to_string(i), history_[i].get(), /*reshape=*/false);
  SolverState data;
  ReadHdf5Text(file.id(), "data_state", state_file, &data);
  RestoreDataStates(data, state_file);
  SolverState engines;
  ReadHdf5Text(file.id(), "cpu_engine", state_file, &engines);
  RestoreCpuEngines(engines);
  SolverState amp;
  ReadHdf5Text(file.id(), "amp_state", state_file, &amp);
  RestoreAmpState(amp);
}

CREMA_REGISTER_SOLVER(SGD, SGDSolver);

}  // namespace crema
