// Where the solver's data layers are in their sources: sharding by rank, epochs turned into
// iterations (max_epoch, test_interval_epochs, test_whole_set), and the read positions saved in
// and restored from a .solverstate (data_state).
#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "crema/solver.hpp"
#include "solvers/distributed.hpp"

namespace crema {

void Solver::ShardTrainData(NetParameter* net_param) {
  const int rank = dist::Rank(), world = dist::WorldSize();
  for (LayerParameter& layer : *net_param->mutable_layer()) {
    // The source's records i with i % world == rank, for each layer type that shards.
    auto shard = [&](auto* param, const char* field) {
      if (param->has_shard_id() || param->has_num_shards()) {
        LOG(INFO) << layer.type() << " layer \"" << layer.name()
                  << "\" keeps the sharding of its prototxt (" << field << ".shard_id "
                  << param->shard_id() << " of num_shards " << param->num_shards() << ") on rank "
                  << rank;
        return;
      }
      param->set_shard_id(static_cast<uint32_t>(rank));
      param->set_num_shards(static_cast<uint32_t>(world));
      auto_sharded_.insert(layer.name());
      LOG(INFO) << layer.type() << " layer \"" << layer.name()
                << "\" is sharded by rank: rank r of " << world << " reads the records i with i % "
                << world << " == r";
    };
    if (layer.type() == "Data" || layer.type() == "AnnotatedData")
      shard(layer.mutable_data_param(), "data_param");
    else if (layer.type() == "ImageData")
      shard(layer.mutable_image_data_param(), "image_data_param");
    else if (layer.type() == "HDF5Data")
      shard(layer.mutable_hdf5_data_param(), "hdf5_data_param");
  }
}

namespace {

// The first layer of `net` that knows its data set's size, or null.
const Layer* SizedDataLayer(const Net& net) {
  for (const auto& layer : net.layers())
    if (layer->NumRecords() >= 0 && layer->BatchSize() > 0) return layer.get();
  return nullptr;
}

// ceil(x), but a value within float rounding of an integer is that integer (0.1 epoch of 80
// records is 8 records, not 8.0000001).
int64_t CeilTolerant(double x) {
  const double nearest = std::round(x);
  if (std::fabs(x - nearest) <= 1e-6 * std::max(1.0, std::fabs(x)))
    return static_cast<int64_t>(nearest);
  return static_cast<int64_t>(std::ceil(x));
}

// Iterations for `epochs` passes over the data of `layer` with iter_size batches an iteration.
int64_t EpochIterations(double epochs, const Layer& layer, int iter_size) {
  return CeilTolerant(epochs * static_cast<double>(layer.NumRecords()) /
                      (static_cast<double>(layer.BatchSize()) * iter_size));
}

}  // namespace

void Solver::ApplyEpochSettings() {
  if (!param_.has_max_epoch() && !param_.has_test_interval_epochs()) return;
  const Layer* data = SizedDataLayer(*net_);
  const char* field = param_.has_max_epoch() ? "max_epoch" : "test_interval_epochs";
  if (data == nullptr)
    throw ConfigError(ErrorAt(field) +
                      StrCat(field,
                             " needs a data layer that knows its size (Data, ImageData, "
                             "HDF5Data) in the train net \"",
                             net_->name(), "\", which has none"));
  const std::string per_epoch =
      StrCat(data->NumRecords(), " records of layer \"", data->name(), "\" in batches of ",
             data->BatchSize(),
             param_.iter_size() > 1 ? StrCat(" x iter_size ", param_.iter_size()) : std::string());
  // `setting` (epochs) replaces `replaced` (iterations): the iterations, at least `at_least`.
  const auto to_iterations = [&](const char* setting, double epochs, bool has_replaced,
                                 const char* replaced, int replaced_value, int64_t at_least) {
    if (has_replaced)
      LOG(WARNING) << ErrorAt(setting) << setting << " replaces " << replaced << " ("
                   << replaced_value << ")";
    if (!(epochs > 0))
      throw ConfigError(ErrorAt(setting) + StrCat(setting, " must be > 0, got ", epochs));
    const int64_t iters = std::max(at_least, EpochIterations(epochs, *data, param_.iter_size()));
    if (iters > INT32_MAX)
      throw ConfigError(ErrorAt(setting) + StrCat(setting, " ", epochs, " is ", iters,
                                                  " iterations, more than ", replaced,
                                                  " can hold"));
    LOG(INFO) << setting << " " << epochs << " of " << per_epoch << ": " << replaced << " "
              << iters;
    return static_cast<int>(iters);
  };
  if (param_.has_max_epoch())
    param_.set_max_iter(to_iterations("max_epoch", param_.max_epoch(), param_.has_max_iter(),
                                      "max_iter", param_.max_iter(), 0));
  if (param_.has_test_interval_epochs())
    param_.set_test_interval(to_iterations("test_interval_epochs", param_.test_interval_epochs(),
                                           param_.has_test_interval(), "test_interval",
                                           param_.test_interval(), 1));
}

void Solver::ApplyTestWholeSet() {
  test_start_states_.assign(test_nets_.size(), {});
  for (size_t i = 0; i < test_nets_.size(); ++i) {
    const Net& net = *test_nets_[i];
    const Layer* data = SizedDataLayer(net);
    if (data == nullptr)
      throw ConfigError(ErrorAt("test_whole_set") +
                        StrCat("test_whole_set needs a data layer that knows its size (Data, "
                               "ImageData, HDF5Data) in test net #",
                               i, " \"", net.name(), "\", which has none"));
    const int64_t records = data->NumRecords(), batch = data->BatchSize();
    const int64_t iters = (records + batch - 1) / batch;
    if (iters > INT32_MAX)
      throw ConfigError(ErrorAt("test_whole_set") +
                        StrCat("test net #", i, ": ", records, " records are too many batches"));
    param_.set_test_iter(static_cast<int>(i), static_cast<int>(iters));
    LOG(INFO) << "test_whole_set: test net #" << i << " reads the " << records
              << " records of layer \"" << data->name() << "\" in " << iters << " batches of "
              << batch
              << (records % batch ? StrCat(" (the last one wraps to the first ",
                                           batch - records % batch, " records)")
                                  : std::string());
    for (const auto& layer : net.layers()) {
      DataLayerState state;
      if (layer->SaveDataState(&state)) test_start_states_[i].emplace_back(layer.get(), state);
    }
  }
}

void Solver::SaveDataStates(SolverState* state) const {
  for (size_t k = 0; k <= test_nets_.size(); ++k) {
    const Net& net = k == 0 ? *net_ : *test_nets_[k - 1];
    for (const auto& layer : net.layers()) {
      DataLayerState data;
      if (!layer->SaveDataState(&data)) continue;
      data.set_net(static_cast<int>(k));
      *state->add_data_state() = std::move(data);
    }
  }
}

void Solver::RestoreDataStates(const SolverState& state, const std::string& state_file) {
  bool notified = false;
  for (size_t k = 0; k <= test_nets_.size(); ++k) {
    const Net& net = k == 0 ? *net_ : *test_nets_[k - 1];
    for (const auto& layer : net.layers()) {
      DataLayerState current;
      if (!layer->SaveDataState(&current)) continue;
      const DataLayerState* saved = nullptr;
      for (const DataLayerState& data : state.data_state())
        if (data.net() == static_cast<int>(k) && data.layer() == layer->name()) saved = &data;
      if (saved == nullptr) {
        if (!notified)
          LOG(WARNING) << state_file
                       << (state.data_state_size() == 0
                               ? " holds no data layer positions (written by Caffe or an older "
                                 "crema): the data layers read from their first record"
                               : StrCat(" holds no position for data layer \"", layer->name(),
                                        "\": it reads from its first record"));
        notified = state.data_state_size() == 0;
        continue;
      }
      if (saved->type() != layer->type())
        CREMA_THROW_CONFIG(state_file, ": data_state of layer \"", layer->name(), "\" is for a ",
                           saved->type(), " layer, but the net's layer is ", layer->type());
      if (k == 0 && auto_sharded_.count(layer->name()) && dist::Rank() > 0 &&
          (layer->type() == std::string("Data") || layer->type() == std::string("AnnotatedData"))) {
        // The state is rank 0's (shard 0); every shard has read as many records of its own.
        DataLayerState mine = *saved;
        const int64_t world = dist::WorldSize(), shard_records = layer->NumRecords();
        const int64_t index = saved->position() / world;
        mine.set_position((shard_records > 0 ? index % shard_records : 0) * world + dist::Rank());
        if (saved->pass_size() >= 0) mine.set_pass_size(shard_records);
        layer->RestoreDataState(mine);
        continue;
      }
      if (k == 0 && auto_sharded_.count(layer->name()) && dist::Rank() > 0) {
        // ImageData, HDF5Data: positions within the shard; with shards of one size (and the
        // same seed on every rank) rank 0's state is this rank's too.
        try {
          layer->RestoreDataState(*saved);
        } catch (const RuntimeError&) {
          LOG(WARNING) << "rank " << dist::Rank() << ": layer \"" << layer->name()
                       << "\" does not resume exactly: its shard differs in size from rank 0's";
        }
        continue;
      }
      layer->RestoreDataState(*saved);
    }
  }
}

}  // namespace crema
