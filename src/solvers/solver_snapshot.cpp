// Snapshots: the file names, writing the weights and the solver state (atomically), restoring,
// and pruning to the newest snapshot_keep.
#include <glog/logging.h>

#include <filesystem>

#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "math/dnnl_engine.hpp"
#include "solvers/distributed.hpp"
#include "solvers/loss_scaler.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

}  // namespace

void Solver::PruneSnapshots(const std::string& model_file, const std::string& state_file) {
  if (param_.snapshot_keep() <= 0) return;
  kept_snapshots_.emplace_back(model_file, state_file);
  while (static_cast<int>(kept_snapshots_.size()) > param_.snapshot_keep()) {
    std::error_code ec;
    fs::remove(kept_snapshots_.front().first, ec);
    fs::remove(kept_snapshots_.front().second, ec);
    LOG(INFO) << "snapshot_keep: removed " << kept_snapshots_.front().first;
    kept_snapshots_.erase(kept_snapshots_.begin());
  }
}

std::string Solver::SnapshotFilename(const std::string& extension) const {
  if (snapshot_best_) return param_.snapshot_prefix() + "_best" + extension;
  return param_.snapshot_prefix() + "_iter_" + std::to_string(iter_) + extension;
}

std::string Solver::Snapshot() {
  const bool hdf5 = param_.snapshot_format() == SolverParameter::HDF5;
  const std::string model_filename = SnapshotFilename(hdf5 ? ".caffemodel.h5" : ".caffemodel");
  const std::string state_filename = SnapshotFilename(hdf5 ? ".solverstate.h5" : ".solverstate");
  if (!dist::IsRoot()) return model_filename;  // only rank 0 writes snapshots
  if (snapshot_best_) {
    // The _best pair is overwritten in place: the old state goes first, so a crash between the
    // two writes leaves a model without a state, never a state that names the newer model.
    std::error_code ec;
    fs::remove(state_filename, ec);
  }
  if (hdf5) {
    LOG(INFO) << "Snapshotting to HDF5 file " << model_filename;
    // Written beside and renamed, so a crash never leaves a truncated snapshot behind.
    const std::string temp = model_filename + ".tmp";
    net_->ToHDF5(temp, param_.snapshot_diff());
    CommitFileAtomically(temp, model_filename);
  } else {
    LOG(INFO) << "Snapshotting to binary proto file " << model_filename;
    NetParameter net_param;
    net_->ToProto(&net_param, param_.snapshot_diff());
    WriteBinaryProto(net_param, model_filename);
  }
  SnapshotSolverState(model_filename);
  if (!snapshot_best_) PruneSnapshots(model_filename, state_filename);
  return model_filename;
}

void Solver::Restore(const std::string& state_file) {
  const bool hdf5 =
      state_file.size() >= 3 && state_file.compare(state_file.size() - 3, 3, ".h5") == 0;
  if (hdf5)
    RestoreSolverStateFromHDF5(state_file);
  else
    RestoreSolverStateFromBinaryProto(state_file);
}

void Solver::SaveCpuEngines(SolverState* state) const {
  for (size_t k = 0; k <= test_nets_.size(); ++k) {
    const Net& net = k == 0 ? *net_ : *test_nets_[k - 1];
    for (const auto& layer : net.layers()) {
      const CpuEngineChoice* choice = layer->cpu_engine_choice();
      if (choice == nullptr) continue;
      for (const CpuEngineChoice::Decision& decision : choice->Decisions()) {
        CpuEngineState* saved = state->add_cpu_engine();
        saved->set_net(static_cast<int>(k));
        saved->set_layer(layer->name());
        saved->set_direction(decision.direction);
        for (int d : decision.shape) saved->add_shape(d);
        saved->set_dnnl(decision.kernel == CpuKernel::kDnnl ||
                        decision.kernel == CpuKernel::kDnnlWinograd);
        if (decision.kernel == CpuKernel::kDnnlWinograd) saved->set_winograd(true);
        if (decision.kernel == CpuKernel::kCremaBlocked) saved->set_blocked(true);
      }
    }
  }
}

void Solver::RestoreCpuEngines(const SolverState& state) {
  for (const CpuEngineState& saved : state.cpu_engine()) {
    if (saved.net() < 0 || saved.net() > static_cast<int>(test_nets_.size())) continue;
    const Net& net = saved.net() == 0 ? *net_ : *test_nets_[saved.net() - 1];
    Layer* layer = net.layer_by_name(saved.layer());
    CpuEngineChoice* choice = layer != nullptr ? layer->cpu_engine_choice() : nullptr;
    // A layer that is gone or no longer races (another net) decides afresh.
    if (choice == nullptr) continue;
    const CpuKernel kernel = saved.blocked()    ? CpuKernel::kCremaBlocked
                             : !saved.dnnl()    ? CpuKernel::kCrema
                             : saved.winograd() ? CpuKernel::kDnnlWinograd
                                                : CpuKernel::kDnnl;
    choice->Restore({saved.direction(), {saved.shape().begin(), saved.shape().end()}, kernel});
  }
}

void Solver::SaveAmpState(SolverState* state) const {
  if (scaler_) scaler_->Save(state);
}

void Solver::RestoreAmpState(const SolverState& state) {
  if (scaler_) scaler_->Restore(state);
}

}  // namespace crema
