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

#include "core/cuda_context.hpp"
#include "core/rng.hpp"
#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "io/boxes.hpp"
#include "net/iteration_graph.hpp"
#include "net/memory_plan.hpp"
#include "net/output_means.hpp"
#include "net/weights_match.hpp"
#include "solvers/detection_eval.hpp"
#include "solvers/distributed.hpp"
#include "solvers/loss_scaler.hpp"
#include "solvers/lr_policy.hpp"
#include "solvers/progress_line.hpp"
#include "solvers/solver_internal.hpp"
#include "solvers/solver_warnings.hpp"
#include "solvers/training_log.hpp"

namespace crema {

std::string solver_detail::Where(const std::shared_ptr<const ProtoSource>& source,
                                 const SolverParameter& param, const std::string& field) {
  std::string where = source ? source->Locate(param, field) : "";
  return where.empty() ? "solver: " : where + ": ";
}

std::string solver_detail::Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

namespace {

namespace fs = std::filesystem;
using solver_detail::Join;

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

using Clock = std::chrono::steady_clock;
double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

// ---- construction ----

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
  if (param_.amp_scale_window() < 1)
    throw ConfigError(ErrorAt("amp_scale_window") +
                      StrCat("amp_scale_window must be >= 1, got ", param_.amp_scale_window()));
  if (!(param_.amp_loss_scale() > 0) || !std::isfinite(param_.amp_loss_scale()))
    throw ConfigError(ErrorAt("amp_loss_scale") +
                      StrCat("amp_loss_scale must be > 0, got ", param_.amp_loss_scale()));
  SetUpDeterminism();
  if (param_.random_seed() >= 0) SetRandomSeed(param_.random_seed());
  InitTrainNet();
  if (net_->amp() == Amp::kFloat16)
    scaler_ = std::make_unique<LossScaler>(param_.amp_loss_scale(), param_.amp_scale_window());
  ApplyEpochSettings();
  for (const auto& [field, message] : SolverWarnings(param_))
    LOG(WARNING) << ErrorAt(field) << message;
  InitTestNets();
  CheckTestEvaluation();
  CheckMonitors();
  if (options_.progress) progress_ = std::make_unique<ProgressLine>();
  LOG(INFO) << "Solver scaffolding done.";
  iter_ = 0;
  current_step_ = 0;
}

Solver::~Solver() = default;

bool Solver::graph_replayed() const { return graph_ && graph_->replayed(); }

double Solver::loss_scale() const { return scaler_ ? scaler_->scale() : 1; }

std::string Solver::graph_reason() const {
  return graph_ ? graph_->reason() : "the train net runs on the CPU";
}

void Solver::set_cuda_graph(bool on) {
  options_.cuda_graph = on;
  graph_.reset();  // Step makes a new one
}

std::string Solver::ErrorAt(const std::string& field) const {
  return solver_detail::Where(options_.source, param_, field);
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
  net_options.amp = SolverAmp();
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
      const std::string unmatched =
          UnmatchedWeightsMessage(*net_, net_->CopyTrainedLayersFrom(path, false), path);
      if (!unmatched.empty()) LOG(WARNING) << ErrorAt("weights") << unmatched;
    }
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
    net_options.amp = SolverAmp();
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

Amp Solver::SolverAmp() const {
  if (!param_.has_amp()) return AmpDefault();
  switch (param_.amp()) {
    case SolverParameter::FP16:
      return Amp::kFloat16;
    case SolverParameter::BF16:
      return Amp::kBFloat16;
    case SolverParameter::AMP_OFF:
      break;
  }
  return Amp::kOff;
}

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
  if (!cpu_engines_prepared_) {
    // Decided (or restored from a .solverstate) before the first iteration, never by racing
    // the engines on real iterations, so a resumed run computes what the interrupted one did.
    net_->PrepareCpuEngines();
    for (const auto& test_net : test_nets_) test_net->PrepareCpuEngines();
    cpu_engines_prepared_ = true;
  }

  if (!graph_ && net_->device().is_cuda())
    graph_ = std::make_unique<IterationGraph>(net_.get(), options_.cuda_graph);
  // One pass per iteration, without all-reduce: the iteration is the graph's to capture.
  // (The loss scaler decides on the update after Backward, on the host.)
  const bool use_graph = graph_ && param_.iter_size() == 1 && !reducer_ && !scaler_;

  while (iter_ < stop_iter) {
    if (!use_graph) net_->ClearParamDiffs(/*lazily=*/true);
    if (param_.test_interval() && iter_ % param_.test_interval() == 0 &&
        (iter_ > 0 || param_.test_initialization())) {
      TestAll();
      SyncDecisions(Action::kNone);      // rank 0 tests; its callbacks decide for every rank
      if (requested_early_exit_) break;  // stop requested while testing
    }
    const bool display = param_.display() && iter_ % param_.display() == 0;
    net_->set_debug_info(display && param_.debug_info());
    // This iteration's rate, for the logs (before PrepareUpdate moves the schedule on).
    const double rate = GetLearningRate();
    if (scaler_ && net_->loss_scale() != scaler_->scale()) net_->set_loss_scale(scaler_->scale());
    // Accumulate gradients over iter_size forward/backward passes; the loss is their mean.
    double loss = 0;
    bool updated = false;
    if (use_graph) {
      // Forward, backward and (where the solver allows) the update, as one CUDA graph.
      updated = UpdateCapturable();
      if (updated) PrepareUpdate();
      const int start = net_->num_input_layers();
      const bool guard = updated && param_.stop_on_nonfinite_loss();
      loss = graph_->Run([&] {
        net_->ClearParamDiffs(/*lazily=*/true);
        net_->ForwardFrom(start);
        net_->BackwardTo(start);
        if (updated) UpdateParams(guard);
      });
    }
    for (int i = 0; i < param_.iter_size() && !use_graph; ++i) {
      if (reducer_ && reducer_->overlap() && i + 1 == param_.iter_size()) {
        // The last pass layer by layer: each bucket is reduced once its layers are done.
        loss += net_->Forward();
        for (int layer = net_->num_layers() - 1; layer >= 0; --layer) {
          net_->BackwardFromTo(layer, layer);
          reducer_->LayerDone(layer);
        }
      } else if (param_.iter_size() == 1 && !reducer_ && !scaler_) {
        // The update may run inside the Backward, once the loss is one that training goes on
        // with (the weights of a stopped run are those before the iteration).
        const double pass_loss = net_->Forward();
        if (std::isfinite(pass_loss) || !param_.stop_on_nonfinite_loss()) FuseUpdateIntoBackward();
        net_->Backward();
        loss += pass_loss;
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
    // FP16: an overflowed iteration skips its update (and still counts, as in PyTorch).
    if (!updated && (!scaler_ || scaler_->Unscale(net_.get(), iter_))) ApplyUpdate();
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

void Solver::CheckTestEvaluation() const {
  const std::string& eval_type = param_.eval_type();
  if (eval_type != "classification" && eval_type != "detection")
    throw ConfigError(
        ErrorAt("eval_type") +
        StrCat("eval_type must be \"classification\" or \"detection\", got \"", eval_type, "\""));
  for (size_t id = 0; id < test_nets_.size(); ++id) {
    const bool has_detection = !DetectionEvalOutputs(*test_nets_[id]).empty();
    if (eval_type == "classification" && has_detection)
      LOG(WARNING) << ErrorAt("eval_type") << "test net #" << id
                   << " has a DetectionEvaluate output but eval_type is \"classification\": its "
                      "rows are averaged as they are; set eval_type: \"detection\" for mean "
                      "average precision";
    if (eval_type == "detection" && !has_detection)
      throw ConfigError(ErrorAt("eval_type") +
                        StrCat("eval_type is \"detection\" but test net #", id,
                               " has no output made by a DetectionEvaluate layer (its rows are "
                               "what the detection test scores)"));
  }
  if (eval_type == "detection")
    boxes::CheckApVersion(param_.ap_version(), ErrorAt("ap_version") + "ap_version");
}

void Solver::TestNet(int test_net_id, std::vector<std::pair<std::string, double>>* scores) {
  LOG(INFO) << "Iteration " << iter_ << ", Testing net (#" << test_net_id << ")";
  Net& test_net = *test_nets_[test_net_id];
  test_net.ShareTrainedLayersWith(*net_);
  // test_whole_set: every pass reads the set from its start.
  if (test_net_id < static_cast<int>(test_start_states_.size()))
    for (auto& [layer, start] : test_start_states_[test_net_id]) layer->RestoreDataState(start);
  const int test_iter = param_.test_iter(test_net_id);
  // eval_type "detection": DetectionEvaluate's rows are gathered into mean average precision
  // instead of averaged (Caffe-SSD's TestDetection).
  const std::vector<int> detection_outputs =
      param_.eval_type() == "detection" ? DetectionEvalOutputs(test_net) : std::vector<int>();
  std::vector<DetectionEvalAccumulator> detections(detection_outputs.size());
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
    for (size_t k = 0; k < detection_outputs.size(); ++k)
      detections[k].Add(*test_net.output_blobs()[detection_outputs[k]]);
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
  const std::vector<OutputMeans::Mean> output_means = means.Means();
  for (int output = 0; output < static_cast<int>(test_net.output_blobs().size()); ++output) {
    const auto detection = std::find(detection_outputs.begin(), detection_outputs.end(), output);
    if (detection != detection_outputs.end()) {
      const std::string& name = test_net.blob_names()[test_net.output_blob_indices()[output]];
      const DetectionEvalAccumulator::Result result =
          detections[detection - detection_outputs.begin()].Compute(param_.ap_version());
      scores->emplace_back(name, result.map);
      LOG(INFO) << "    Test net output #" << score_index++ << ": " << name << " = " << result.map;
      if (param_.show_per_class_result())
        for (const DetectionEvalAccumulator::ClassAp& c : result.classes)
          LOG(INFO) << "class" << c.label << ": " << c.ap;
      continue;
    }
    for (const OutputMeans::Mean& mean : output_means) {
      if (mean.output != output) continue;
      const int blob_index = test_net.output_blob_indices()[mean.output];
      const double loss_weight = test_net.blob_loss_weights()[blob_index];
      scores->emplace_back(mean.name, mean.value);
      std::ostringstream loss_msg;
      if (loss_weight)
        loss_msg << " (* " << loss_weight << " = " << loss_weight * mean.value << " loss)";
      LOG(INFO) << "    Test net output #" << score_index++ << ": " << mean.name << " = "
                << mean.value << loss_msg.str();
    }
  }
  // Outputs that changed size between batches have no element-wise mean (and no score).
  for (const OutputMeans::Varying& output : means.VaryingOutputs()) {
    if (std::find(detection_outputs.begin(), detection_outputs.end(), output.output) !=
        detection_outputs.end())
      continue;
    LOG(INFO) << "    Test net output " << output.name
              << ": not averaged, its size varies between batches (" << output.min_count << " to "
              << output.max_count << " values per batch)";
  }
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
  return LearningRateAt(param_, iter_, current_step_,
                        [this](const std::string& field) { return ErrorAt(field); });
}

}  // namespace crema
