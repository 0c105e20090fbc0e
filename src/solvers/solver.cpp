#include "crema/solver.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "core/closest_name.hpp"
#include "core/cuda_context.hpp"
#include "core/rng.hpp"
#include "crema/error.hpp"
#include "net/memory_plan.hpp"
#include "net/output_means.hpp"
#include "net/proto_io.hpp"
#include "net/upgrade.hpp"
#include "solvers/distributed.hpp"
#include "solvers/progress_line.hpp"
#include "solvers/training_log.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

std::map<std::string, SolverRegistry::Creator>& Table() {
  static auto* table = new std::map<std::string, SolverRegistry::Creator>();
  return *table;
}

std::string Where(const std::shared_ptr<const ProtoSource>& source, const SolverParameter& param,
                  const std::string& field) {
  std::string where = source ? source->Locate(param, field) : "";
  return where.empty() ? "solver: " : where + ": ";
}

// A relative path in the solver is resolved against base_dir (when given), else the cwd.
std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (base_dir.empty() || path.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base_dir) / path).lexically_normal().string();
}

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, ','))
    if (!part.empty()) parts.push_back(part);
  return parts;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

// ---- registry ----

void SolverRegistry::Add(const std::string& type, Creator creator) {
  CREMA_ASSERT(!Table().count(type), "solver type ", type, " registered twice");
  Table()[type] = std::move(creator);
}

bool SolverRegistry::Has(const std::string& type) { return Table().count(type) > 0; }

std::vector<std::string> SolverRegistry::Types() {
  std::vector<std::string> types;
  for (const auto& entry : Table()) types.push_back(entry.first);
  return types;
}

std::unique_ptr<Solver> SolverRegistry::Create(const SolverParameter& param,
                                               const SolverOptions& opts) {
  auto it = Table().find(param.type());
  if (it == Table().end()) {
    const std::string best = ClosestName(param.type(), Types());
    CREMA_THROW_CONFIG(Where(opts.source, param, "type"), "type: unknown solver type \"",
                       param.type(), "\".", best.empty() ? "" : " Did you mean \"" + best + "\"?",
                       " Known types: ", Join(Types()));
  }
  return it->second(param, opts);
}

// ---- construction ----

std::unique_ptr<Solver> Solver::Create(const SolverParameter& param, const SolverOptions& options) {
  SolverParameter upgraded = param;
  UpgradeSolverAsNeeded(options.source ? options.source->path() : "solver", &upgraded);
  return SolverRegistry::Create(upgraded, options);
}

std::vector<std::string> Solver::Types() { return SolverRegistry::Types(); }

Solver::Solver(const SolverParameter& param, const SolverOptions& options)
    : param_(param), options_(options) {
  LOG(INFO) << "Initializing solver from parameters: \n" << param_.DebugString();
  if (param_.average_loss() < 1)
    throw ConfigError(ErrorAt("average_loss") +
                      StrCat("average_loss must be >= 1, got ", param_.average_loss()));
  if (param_.iter_size() < 1)
    throw ConfigError(ErrorAt("iter_size") +
                      StrCat("iter_size must be >= 1, got ", param_.iter_size()));
  if (param_.snapshot() < 0)
    throw ConfigError(ErrorAt("snapshot") +
                      StrCat("snapshot must be >= 0, got ", param_.snapshot()));
  if (param_.snapshot() > 0 && !param_.has_snapshot_prefix())
    throw ConfigError(ErrorAt("snapshot") +
                      "snapshot is set but snapshot_prefix is not; set snapshot_prefix");
  if (param_.snapshot() > 0 && dist::IsRoot()) {  // only rank 0 writes snapshots
    // Create the snapshot folder, and probe it now rather than fail after hours of training.
    const fs::path folder = fs::path(param_.snapshot_prefix()).parent_path();
    std::error_code dir_error;
    if (!folder.empty() && !fs::exists(folder, dir_error)) {
      fs::create_directories(folder, dir_error);
      if (!dir_error) LOG(INFO) << "Created the snapshot folder " << folder.string();
    }
    // A temporary like every interrupted write (".tmp"), should the process die before the remove.
    const std::string probe = SnapshotFilename(".probe.tmp");
    std::ofstream out(probe);
    if (!out.good())
      CREMA_THROW_RUNTIME("cannot write to snapshot_prefix \"", param_.snapshot_prefix(),
                          "\" (tried ", probe, "); make sure the directory exists and is writable");
    out.close();
    std::error_code ec;
    fs::remove(probe, ec);
  }
  SetUpDeterminism();
  if (param_.random_seed() >= 0) SetRandomSeed(param_.random_seed());
  InitTrainNet();
  ApplyEpochSettings();
  InitTestNets();
  CheckMonitors();
  if (options_.progress) progress_ = std::make_unique<ProgressLine>();
  LOG(INFO) << "Solver scaffolding done.";
  iter_ = 0;
  current_step_ = 0;
}

Solver::~Solver() = default;

std::string Solver::ErrorAt(const std::string& field) const {
  return Where(options_.source, param_, field);
}

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
      throw ConfigError(ErrorAt(field) + StrCat(field, ".output: test net #", m.test_net(),
                                                " has no output \"", m.output(),
                                                "\"; its outputs are ", Join(outputs)));
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

void Solver::Say(const std::string& text) {
  if (progress_) progress_->Message(text);
}

void Solver::OpenTrainingLog() {
  start_time_ = Clock::now();
  if (log_ || param_.snapshot_prefix().empty() || !dist::IsRoot()) return;
  const std::string metrics =
      param_.metrics_log() ? param_.snapshot_prefix() + "_metrics.jsonl" : "";
  const std::string events = param_.tensorboard() ? param_.snapshot_prefix() + "_tensorboard" : "";
  if (!metrics.empty() || !events.empty())
    log_ = std::make_unique<TrainingLog>(metrics, events, iter_);
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

void Solver::InitTrainNet() {
  const int num_train_nets = param_.has_net() + param_.has_net_param() + param_.has_train_net() +
                             param_.has_train_net_param();
  if (num_train_nets != 1) {
    std::vector<std::string> given;
    if (param_.has_net()) given.push_back("net");
    if (param_.has_net_param()) given.push_back("net_param");
    if (param_.has_train_net()) given.push_back("train_net");
    if (param_.has_train_net_param()) given.push_back("train_net_param");
    throw ConfigError(ErrorAt(given.size() > 1 ? given[1] : "net") +
                      "the train net must be given by exactly one of net, net_param, train_net, "
                      "train_net_param; " +
                      (given.empty() ? std::string("none is set") : "found " + Join(given)));
  }
  NetParameter net_param;
  std::shared_ptr<const ProtoSource> source;
  if (param_.has_train_net_param()) {
    LOG(INFO) << "Creating training net specified in train_net_param.";
    net_param.CopyFrom(param_.train_net_param());
  } else if (param_.has_train_net()) {
    const std::string path = Resolve(options_.base_dir, param_.train_net());
    LOG(INFO) << "Creating training net from train_net file: " << path;
    source = ReadNetParamsFromTextFile(path, &net_param);
  } else if (param_.has_net_param()) {
    LOG(INFO) << "Creating training net specified in net_param.";
    net_param.CopyFrom(param_.net_param());
  } else {
    const std::string path = Resolve(options_.base_dir, param_.net());
    LOG(INFO) << "Creating training net from net file: " << path;
    source = ReadNetParamsFromTextFile(path, &net_param);
  }
  // Precedence, lowest first: the solver's default (TRAIN), the net's own state, train_state.
  NetState state;
  state.set_phase(TRAIN);
  state.MergeFrom(net_param.state());
  state.MergeFrom(param_.train_state());
  *net_param.mutable_state() = state;
  NetOptions net_options;
  net_options.device = options_.device;
  net_options.override_state = true;
  net_options.state = state;
  net_options.source = source;
  net_options.memory_plan = options_.train_net_memory_plan;
  if (dist::Active()) ShardTrainData(&net_param);
  net_ = std::make_unique<Net>(net_param, net_options);
  net_->set_debug_info(param_.debug_info());
  for (const std::string& weights : param_.weights()) {
    for (const std::string& file : SplitCommas(weights)) {
      // As given (Caffe: the cwd), unless it only exists beside the solver's base_dir.
      std::string path = file;
      std::error_code ec;
      const std::string beside = Resolve(options_.base_dir, file);
      if (!fs::exists(path, ec) && fs::exists(beside, ec)) path = beside;
      LOG(INFO) << "Loading weights " << path << " into the train net";
      net_->CopyTrainedLayersFrom(path);
    }
  }
}

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
    if (layer.type() == "Data")
      shard(layer.mutable_data_param(), "data_param");
    else if (layer.type() == "ImageData")
      shard(layer.mutable_image_data_param(), "image_data_param");
    else if (layer.type() == "HDF5Data")
      shard(layer.mutable_hdf5_data_param(), "hdf5_data_param");
  }
}

void Solver::SyncReplicas() {
  if (!dist::Active()) return;
  std::vector<Blob*> params;
  for (const BlobPtr& blob : net_->params()) params.push_back(blob.get());
  dist::BroadcastData(params);
  const Layer* data = nullptr;
  for (const auto& layer : net_->layers())
    if (layer->BatchSize() > 0 && data == nullptr) data = layer.get();
  const int64_t batch = data ? data->BatchSize() : 0;
  LOG(INFO) << "Data-parallel training, weights broadcast from rank 0: " << dist::WorldSize()
            << " ranks x batch " << batch
            << (param_.iter_size() > 1 ? StrCat(" (x iter_size ", param_.iter_size(), ")") : "")
            << " = global batch " << dist::WorldSize() * batch * param_.iter_size() << "; base_lr "
            << param_.base_lr();
}

Solver::Action Solver::SyncDecisions(Action request) {
  if (!dist::Active()) return request;
  std::vector<double> values = {requested_early_exit_ ? 1.0 : 0.0, callback_state_.lr_scale(),
                                static_cast<double>(static_cast<int>(request))};
  dist::Broadcast(&values);
  requested_early_exit_ = values[0] != 0;
  callback_state_.set_lr_scale(values[1]);
  return static_cast<Action>(static_cast<int>(values[2]));
}

void Solver::InitTestNets() {
  const bool has_net_param = param_.has_net_param();
  const bool has_net_file = param_.has_net();
  const int num_generic_nets = has_net_param + has_net_file;
  const int num_test_net_params = param_.test_net_param_size();
  const int num_test_net_files = param_.test_net_size();
  const int num_test_nets = num_test_net_params + num_test_net_files;
  if (num_generic_nets > 1)
    throw ConfigError(ErrorAt("net_param") + "net and net_param may not both be given");
  if (param_.test_whole_set()) {
    // One test instance per test net (else one of the generic net); test_iter comes later.
    if (param_.test_iter_size() > 0)
      throw ConfigError(ErrorAt("test_whole_set") +
                        "test_whole_set computes test_iter from the test data; leave test_iter "
                        "unset");
    const int instances = num_test_nets > 0 ? num_test_nets : num_generic_nets;
    if (instances == 0)
      throw ConfigError(ErrorAt("test_whole_set") +
                        "test_whole_set is set but the solver has no test net");
    for (int i = 0; i < instances; ++i) param_.add_test_iter(0);
  }
  // With a generic net (net / net_param), every test_iter beyond the explicit test nets adds one
  // more test instance of it; otherwise test_iter must match the test nets one to one.
  if (num_generic_nets ? param_.test_iter_size() < num_test_nets
                       : param_.test_iter_size() != num_test_nets)
    throw ConfigError(ErrorAt("test_iter") +
                      StrCat("test_iter must be given once per test net: ", num_test_nets,
                             " test net(s) but ", param_.test_iter_size(), " test_iter value(s)"));
  const int num_generic_instances = param_.test_iter_size() - num_test_nets;
  const int num_instances = num_test_nets + num_generic_instances;
  if (param_.test_state_size() && param_.test_state_size() != num_instances)
    throw ConfigError(ErrorAt("test_state") +
                      StrCat("test_state must be unspecified or given once per test net (",
                             num_instances, "), got ", param_.test_state_size()));
  if (num_instances && param_.test_interval() <= 0)
    throw ConfigError(
        ErrorAt("test_interval") +
        StrCat("test_interval must be > 0 when there are test nets, got ", param_.test_interval()));
  for (int i = 0; i < param_.test_iter_size(); ++i)
    if (param_.test_iter(i) < 0)
      throw ConfigError(ErrorAt(StrCat("test_iter[", i, "]")) +
                        StrCat("test_iter must be >= 0, got ", param_.test_iter(i)));

  std::vector<std::string> descriptions(num_instances);
  std::vector<NetParameter> net_params(num_instances);
  std::vector<std::shared_ptr<const ProtoSource>> sources(num_instances);
  int id = 0;
  for (int i = 0; i < num_test_net_params; ++i, ++id) {
    descriptions[id] = "test_net_param";
    net_params[id].CopyFrom(param_.test_net_param(i));
  }
  for (int i = 0; i < num_test_net_files; ++i, ++id) {
    const std::string path = Resolve(options_.base_dir, param_.test_net(i));
    descriptions[id] = "test_net file: " + path;
    sources[id] = ReadNetParamsFromTextFile(path, &net_params[id]);
  }
  if (num_generic_instances > 0) {
    NetParameter generic;
    std::shared_ptr<const ProtoSource> source;
    std::string description;
    if (has_net_param) {
      generic.CopyFrom(param_.net_param());
      description = "net_param";
    } else {
      const std::string path = Resolve(options_.base_dir, param_.net());
      source = ReadNetParamsFromTextFile(path, &generic);
      description = "net file: " + path;
    }
    for (int i = 0; i < num_generic_instances; ++i, ++id) {
      descriptions[id] = description;
      net_params[id] = generic;
      sources[id] = source;
    }
  }
  test_nets_.clear();
  for (int i = 0; i < num_instances; ++i) {
    // Precedence, lowest first: TEST, the net's own state, test_state[i].
    NetState state;
    state.set_phase(TEST);
    state.MergeFrom(net_params[i].state());
    if (param_.test_state_size()) state.MergeFrom(param_.test_state(i));
    *net_params[i].mutable_state() = state;
    LOG(INFO) << "Creating test net (#" << i << ") specified by " << descriptions[i];
    NetOptions net_options;
    net_options.device = options_.device;
    net_options.override_state = true;
    net_options.state = state;
    net_options.source = sources[i];
    net_options.memory_plan = options_.test_net_memory_plan;
    auto net = std::make_unique<Net>(net_params[i], net_options);
    net->set_debug_info(param_.debug_info());
    for (const std::string& weights : param_.weights()) {
      for (const std::string& file : SplitCommas(weights)) {
        std::string path = file;
        std::error_code ec;
        const std::string beside = Resolve(options_.base_dir, file);
        if (!fs::exists(path, ec) && fs::exists(beside, ec)) path = beside;
        net->CopyTrainedLayersFrom(path);
      }
    }
    net->ShareTrainedLayersWith(*net_);
    test_nets_.push_back(std::move(net));
  }
  // The test nets run between iterations, when no train-net activation is live: their planned
  // buffers can be the train net's (SolverOptions::share_test_memory).
  if (options_.share_test_memory && !test_nets_.empty() &&
      options_.train_net_memory_plan == MemoryPlan::kTraining &&
      options_.test_net_memory_plan == MemoryPlan::kInference) {
    auto shared = std::make_shared<SharedActivationMemory>();
    size_t separate = net_->planned_bytes();
    net_->ShareActivationMemory(shared);
    for (auto& net : test_nets_) {
      separate += net->planned_bytes();
      net->ShareActivationMemory(shared);
    }
    LOG(INFO) << "Test net" << (test_nets_.size() == 1 ? "" : "s")
              << " share activation memory with the train net: planned buffers " << separate
              << " -> " << shared->bytes() << " bytes (" << separate - shared->bytes() << " saved)";
  }
  if (param_.test_whole_set()) ApplyTestWholeSet();
}

// ---- determinism, epochs, data positions ----

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

void Solver::SetUpDeterminism() {
  if (!param_.deterministic()) return;
  if (param_.random_seed() < 0) {
    std::random_device device;
    param_.set_random_seed(static_cast<int64_t>(device() & 0x7fffffff));
    LOG(WARNING) << "deterministic: random_seed is unset; using random_seed: "
                 << param_.random_seed() << " (set it to repeat this run)";
  }
  // cuDNN: deterministic algorithms only; CPU: reductions in a fixed order (cpu::Dot, Asum).
  gpu::SetDeterministic(true);
  LOG(INFO) << "Deterministic mode, random_seed " << param_.random_seed();
}

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
          layer->type() == std::string("Data")) {
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

// ---- the training loop ----

Solver::Action Solver::GetRequestedAction() const {
  return action_function_ ? action_function_() : Action::kNone;
}

void Solver::Step(int iters) {
  const int start_iter = iter_;
  const int stop_iter = iter_ + iters;
  const int average_loss = param_.average_loss();
  losses_.clear();
  smoothed_loss_ = 0;
  auto timer = Clock::now();
  int iterations_last = iter_;
  OpenTrainingLog();
  if (dist::Active() && !reducer_)
    reducer_ = std::make_unique<dist::GradientReducer>(*net_, options_.allreduce_bucket_bytes,
                                                       options_.overlap_allreduce);
  auto rate_timer = Clock::now();
  int rate_iter = iter_;
  double iters_per_second = 0;

  while (iter_ < stop_iter) {
    net_->ClearParamDiffs();
    if (param_.test_interval() && iter_ % param_.test_interval() == 0 &&
        (iter_ > 0 || param_.test_initialization())) {
      TestAll();
      SyncDecisions(Action::kNone);      // rank 0 tests; its callbacks decide for every rank
      if (requested_early_exit_) break;  // stop requested while testing
    }
    const bool display = param_.display() && iter_ % param_.display() == 0;
    net_->set_debug_info(display && param_.debug_info());
    // Accumulate gradients over iter_size forward/backward passes; the loss is their mean.
    double loss = 0;
    for (int i = 0; i < param_.iter_size(); ++i) {
      if (reducer_ && reducer_->overlap() && i + 1 == param_.iter_size()) {
        // The last pass layer by layer: each bucket is reduced once its layers are done.
        loss += net_->Forward();
        for (int layer = net_->num_layers() - 1; layer >= 0; --layer) {
          net_->BackwardFromTo(layer, layer);
          reducer_->LayerDone(layer);
        }
      } else {
        loss += net_->ForwardBackward();
      }
    }
    loss /= param_.iter_size();
    if (reducer_) {  // the gradient and loss of the global batch
      reducer_->Finish();
      loss = dist::Mean(loss);
    }
    if (param_.stop_on_nonfinite_loss() && !std::isfinite(loss))
      CREMA_THROW_RUNTIME("the training loss is ", loss, " at iteration ", iter_,
                          "; stopped before the update (the weights are those of iteration ", iter_,
                          "). Lower base_lr, clip gradients (clip_gradients) or check the "
                          "data; stop_on_nonfinite_loss: false trains on");
    UpdateSmoothedLoss(loss, start_iter, average_loss);
    Scores outputs;
    if (display) {
      const double lapse = SecondsSince(timer);
      const double per_s = (iter_ - iterations_last) / (lapse > 0 ? lapse : 1);
      LOG(INFO) << "Iteration " << iter_ << " (" << per_s << " iter/s, " << lapse << "s/"
                << param_.display() << " iters), loss = " << smoothed_loss_;
      Say(StrCat("Iteration ", iter_, ", loss = ", smoothed_loss_));
      timer = Clock::now();
      iterations_last = iter_;
      const BlobVec& result = net_->output_blobs();
      int score_index = 0;
      for (size_t j = 0; j < result.size(); ++j) {
        const int blob_index = net_->output_blob_indices()[j];
        const std::string& output_name = net_->blob_names()[blob_index];
        const double loss_weight = net_->blob_loss_weights()[blob_index];
        for (int64_t k = 0; k < result[j]->count(); ++k) {
          const double value = result[j]->data_at(k);
          std::ostringstream loss_msg;
          if (loss_weight)
            loss_msg << " (* " << loss_weight << " = " << loss_weight * value << " loss)";
          LOG(INFO) << "    Train net output #" << score_index++ << ": " << output_name << " = "
                    << value << loss_msg.str();
        }
      }
    }
    const double rate = GetLearningRate();
    if (log_) {
      const BlobVec& result = net_->output_blobs();
      for (size_t j = 0; j < result.size(); ++j) {
        const std::string& name = net_->blob_names()[net_->output_blob_indices()[j]];
        for (int64_t k = 0; k < result[j]->count(); ++k)
          outputs.emplace_back(result[j]->count() == 1 ? name : StrCat(name, "[", k, "]"),
                               result[j]->data_at(k));
      }
      log_->Iteration(iter_, SecondsSince(start_time_), rate, loss, smoothed_loss_, outputs);
    }
    ApplyUpdate();
    // iter_ counts the updates applied so far.
    ++iter_;
    if (progress_) {
      const double lapse = SecondsSince(rate_timer);
      if (lapse >= 1.0) {
        iters_per_second = (iter_ - rate_iter) / lapse;
        rate_timer = Clock::now();
        rate_iter = iter_;
      }
      progress_->Update(iter_, param_.max_iter(), smoothed_loss_, rate, iters_per_second);
    }
    for (const auto& callback : iteration_callbacks_) callback(*this);

    const Action request = SyncDecisions(dist::IsRoot() ? GetRequestedAction() : Action::kNone);
    if ((param_.snapshot() && iter_ % param_.snapshot() == 0) || request == Action::kSnapshot)
      Snapshot();
    if (request == Action::kStop) requested_early_exit_ = true;
    if (requested_early_exit_) break;
  }
  if (log_) log_->Flush();
  if (progress_) {
    progress_->Update(iter_, param_.max_iter(), smoothed_loss_, GetLearningRate(), iters_per_second,
                      /*force=*/true);
    progress_->Finish();
  }
}

void Solver::Solve(const std::string& resume_file) {
  LOG(INFO) << "Solving " << net_->name();
  LOG(INFO) << "Learning Rate Policy: " << param_.lr_policy();
  requested_early_exit_ = false;
  if (!resume_file.empty()) {
    LOG(INFO) << "Restoring previous solver status from " << resume_file;
    Restore(resume_file);
  }
  SyncReplicas();
  const int start_iter = iter_;
  Step(param_.max_iter() - iter_);
  // The final snapshot, unless the loop just wrote one (or snapshot_after_train is false).
  if (param_.snapshot_after_train() && (!param_.snapshot() || iter_ % param_.snapshot() != 0))
    Snapshot();
  if (requested_early_exit_) {
    LOG(INFO) << "Optimization stopped early.";
    return;
  }
  // One more forward pass of the train net (the weights were updated max_iter times already) to
  // display the final loss, then the final test, as Caffe does.
  if (param_.display() && iter_ % param_.display() == 0) {
    const double loss = net_->Forward();
    UpdateSmoothedLoss(loss, start_iter, param_.average_loss());
    LOG(INFO) << "Iteration " << iter_ << ", loss = " << smoothed_loss_;
  }
  if (param_.test_interval() && iter_ % param_.test_interval() == 0) TestAll();
  LOG(INFO) << "Optimization Done.";
}

void Solver::UpdateSmoothedLoss(double loss, int start_iter, int average_loss) {
  if (static_cast<int>(losses_.size()) < average_loss) {
    losses_.push_back(loss);
    const int size = static_cast<int>(losses_.size());
    smoothed_loss_ = (smoothed_loss_ * (size - 1) + loss) / size;
  } else {
    const int index = (iter_ - start_iter) % average_loss;
    smoothed_loss_ += (loss - losses_[index]) / average_loss;
    losses_[index] = loss;
  }
}

// ---- testing ----

std::vector<std::vector<std::pair<std::string, double>>> Solver::TestAll() {
  std::vector<std::vector<std::pair<std::string, double>>> all(test_nets_.size());
  if (!dist::IsRoot()) return all;  // rank 0 tests for every rank
  for (size_t id = 0; id < test_nets_.size() && !requested_early_exit_; ++id)
    TestNet(static_cast<int>(id), &all[id]);
  last_test_scores_ = all;
  last_test_iter_ = iter_;
  if (requested_early_exit_) return all;
  for (size_t id = 0; id < all.size(); ++id) {
    if (log_) log_->Test(iter_, SecondsSince(start_time_), static_cast<int>(id), all[id]);
    std::string line = StrCat("Test net #", id, " at iteration ", iter_, ":");
    for (const auto& score : all[id]) line += StrCat(" ", score.first, " = ", score.second);
    Say(line);
  }
  AfterTest();
  return all;
}

void Solver::TestNet(int test_net_id, std::vector<std::pair<std::string, double>>* scores) {
  LOG(INFO) << "Iteration " << iter_ << ", Testing net (#" << test_net_id << ")";
  Net& test_net = *test_nets_[test_net_id];
  test_net.ShareTrainedLayersWith(*net_);
  // test_whole_set: every pass reads the set from its start.
  if (test_net_id < static_cast<int>(test_start_states_.size()))
    for (auto& [layer, start] : test_start_states_[test_net_id]) layer->RestoreDataState(start);
  const int test_iter = param_.test_iter(test_net_id);
  OutputMeans means;
  double loss = 0;
  for (int i = 0; i < test_iter; ++i) {
    for (Action request = GetRequestedAction(); request != Action::kNone;
         request = GetRequestedAction()) {
      if (request == Action::kSnapshot) Snapshot();
      if (request == Action::kStop) requested_early_exit_ = true;
    }
    if (requested_early_exit_) break;
    const double iter_loss = test_net.Forward();
    if (param_.test_compute_loss()) loss += iter_loss;
    means.Add(test_net);
  }
  if (requested_early_exit_) {
    LOG(INFO) << "Test interrupted.";
    return;
  }
  if (param_.test_compute_loss()) {
    loss /= test_iter;
    LOG(INFO) << "Test loss: " << loss;
  }
  scores->clear();
  int score_index = 0;
  for (const OutputMeans::Mean& mean : means.Means()) {
    const int blob_index = test_net.output_blob_indices()[mean.output];
    const double loss_weight = test_net.blob_loss_weights()[blob_index];
    scores->emplace_back(mean.name, mean.value);
    std::ostringstream loss_msg;
    if (loss_weight)
      loss_msg << " (* " << loss_weight << " = " << loss_weight * mean.value << " loss)";
    LOG(INFO) << "    Test net output #" << score_index++ << ": " << mean.name << " = "
              << mean.value << loss_msg.str();
  }
  // Outputs that changed size between batches have no element-wise mean (and no score).
  for (const OutputMeans::Varying& output : means.VaryingOutputs())
    LOG(INFO) << "    Test net output " << output.name
              << ": not averaged, its size varies between batches (" << output.min_count << " to "
              << output.max_count << " values per batch)";
}

// ---- learning rate ----

double Solver::GetLearningRate() const {
  const double scheduled = ScheduledLearningRate();
  const double scale = callback_state_.lr_scale();
  if (scale == 1) return scheduled;
  // Reduced on a plateau: never below reduce_lr_on_plateau.min_lr (nor above the schedule).
  return std::max(scheduled * scale,
                  std::min(scheduled, double{param_.reduce_lr_on_plateau().min_lr()}));
}

double Solver::ScheduledLearningRate() const {
  const std::string& policy = param_.lr_policy();
  const double base_lr = param_.base_lr();
  const double gamma = param_.gamma();
  const double power = param_.power();
  auto require_gamma = [&] {
    if (param_.gamma() < 0)
      throw ConfigError(ErrorAt("gamma") + StrCat("gamma must be >= 0 for lr_policy \"", policy,
                                                  "\", got ", param_.gamma()));
  };
  auto require_stepsize = [&] {
    if (param_.stepsize() <= 0)
      throw ConfigError(ErrorAt("stepsize") + StrCat("stepsize must be > 0 for lr_policy \"",
                                                     policy, "\", got ", param_.stepsize()));
  };
  if (policy == "fixed") return base_lr;
  if (policy == "step") {
    require_stepsize();
    require_gamma();
    return base_lr * std::pow(gamma, iter_ / param_.stepsize());
  }
  if (policy == "exp") {
    require_gamma();
    return base_lr * std::pow(gamma, iter_);
  }
  if (policy == "inv") {
    require_gamma();
    return base_lr * std::pow(1.0 + gamma * iter_, -power);
  }
  if (policy == "multistep") {
    require_gamma();
    // Caffe advances current_step at most once per iteration, when iter reaches the next
    // stepvalue; the solver commits that advance after the update (SGDSolver).
    int step = current_step_;
    if (step < param_.stepvalue_size() && iter_ >= param_.stepvalue(step)) ++step;
    return base_lr * std::pow(gamma, step);
  }
  if (policy == "poly") {
    if (param_.max_iter() <= 0)
      throw ConfigError(
          ErrorAt("max_iter") +
          StrCat("max_iter must be > 0 for lr_policy \"poly\", got ", param_.max_iter()));
    return base_lr * std::pow(1.0 - static_cast<double>(iter_) / param_.max_iter(), power);
  }
  if (policy == "sigmoid") {
    require_gamma();
    require_stepsize();
    return base_lr *
           (1.0 / (1.0 + std::exp(-gamma * (static_cast<double>(iter_) - param_.stepsize()))));
  }
  throw ConfigError(ErrorAt("lr_policy") +
                    (policy.empty()
                         ? std::string("lr_policy is not set")
                         : "lr_policy: unknown learning rate policy \"" + policy + "\"") +
                    "; expected one of fixed, step, exp, inv, multistep, poly, sigmoid");
}

// ---- snapshots ----

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

}  // namespace crema
