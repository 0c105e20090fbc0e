// crema validate: checks net and solver prototxts without running them. Every problem found is
// printed as "error: FILE:LINE:COL: ..." or "warning: ...": unknown fields (all of them, each
// with a suggestion), syntax errors, bottoms no earlier layer produces, shape and parameter
// errors (the net is built on the CPU for each phase; after an error the failing layer and the
// layers fed by it are left out and the build is retried, so later errors show too), data
// layers whose source is missing, and tops nothing consumes.
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/closest_name.hpp"
#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "flags.hpp"
#include "io/input_checks.hpp"
#include "net/upgrade.hpp"
#include "solvers/solver_warnings.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

namespace fs = std::filesystem;

// A stage no NetState has: an include rule naming it leaves a layer out of the build.
constexpr char kSkipStage[] = "__crema_validate_skip__";

// The problems of one file, in the order found; one line each however many nets or phases
// (contexts) show it, tagged with the contexts when not all of them do.
class Report {
 public:
  void Error(const std::string& text) { Add(true, text); }
  void Warning(const std::string& text) { Add(false, text); }
  void set_context(const std::string& context) {
    context_ = context;
    if (std::find(contexts_.begin(), contexts_.end(), context) == contexts_.end())
      contexts_.push_back(context);
  }
  int errors() const {
    return static_cast<int>(
        std::count_if(items_.begin(), items_.end(), [](const Item& item) { return item.error; }));
  }
  int warnings() const { return static_cast<int>(items_.size()) - errors(); }
  void Print() const {
    for (const Item& item : items_) {
      std::string tags;
      if (!item.contexts.empty() && item.contexts.size() < contexts_.size())
        for (const std::string& c : item.contexts) tags += (tags.empty() ? " [" : ", ") + c;
      std::printf("%s: %s%s\n", item.error ? "error" : "warning", item.text.c_str(),
                  tags.empty() ? "" : (tags + "]").c_str());
    }
  }

 private:
  struct Item {
    bool error;
    std::string text;
    std::vector<std::string> contexts;
  };
  void Add(bool error, const std::string& text) {
    for (Item& item : items_) {
      if (item.error != error || item.text != text) continue;
      if (!context_.empty() &&
          std::find(item.contexts.begin(), item.contexts.end(), context_) == item.contexts.end())
        item.contexts.push_back(context_);
      return;
    }
    items_.push_back({error, text, {}});
    if (!context_.empty()) items_.back().contexts.push_back(context_);
  }
  std::vector<Item> items_;
  std::vector<std::string> contexts_;
  std::string context_;
};

// The source a data layer reads, or "" for layers without one.
std::string DataSource(const LayerParameter& layer) {
  if (layer.type() == "Data" || layer.type() == "AnnotatedData") return layer.data_param().source();
  if (layer.type() == "ImageData") return layer.image_data_param().source();
  if (layer.type() == "HDF5Data") return layer.hdf5_data_param().source();
  if (layer.type() == "WindowData") return layer.window_data_param().source();
  return "";
}

std::string SourceField(const LayerParameter& layer) {
  if (layer.type() == "Data" || layer.type() == "AnnotatedData") return "data_param.source";
  if (layer.type() == "ImageData") return "image_data_param.source";
  if (layer.type() == "HDF5Data") return "hdf5_data_param.source";
  return "window_data_param.source";
}

// An Input layer with the tops' shapes of a data layer whose source is missing, when the
// parameters alone give them (ImageData with new_height/new_width or crop_size; AnnotatedData
// with resize_param height/width or crop_size, 3 channels unless force_gray, and a label of one
// box row); else false.
bool InputStandIn(const LayerParameter& layer, LayerParameter* input) {
  const TransformationParameter& transform = layer.transform_param();
  int batch = 0, channels = 0, height = 0, width = 0;
  std::vector<int> label_shape;
  if (layer.type() == "ImageData") {
    const ImageDataParameter& p = layer.image_data_param();
    batch = static_cast<int>(p.batch_size());
    channels = p.is_color() ? 3 : 1;
    height = p.new_height();
    width = p.new_width();
    label_shape = {batch};
  } else if (layer.type() == "AnnotatedData") {
    batch = static_cast<int>(layer.data_param().batch_size());
    channels = transform.force_gray() ? 1 : 3;
    height = static_cast<int>(transform.resize_param().height());
    width = static_cast<int>(transform.resize_param().width());
    label_shape = {1, 1, 1, 8};
  } else {
    return false;
  }
  if (transform.crop_size() > 0) height = width = static_cast<int>(transform.crop_size());
  if (height <= 0 || width <= 0 || layer.top_size() < 1) return false;
  input->set_name(layer.name());
  input->set_type("Input");
  for (const std::string& top : layer.top()) input->add_top(top);
  BlobShape* data = input->mutable_input_param()->add_shape();
  for (int d : {batch, channels, height, width}) data->add_dim(d);
  if (layer.top_size() > 1) {
    BlobShape* label = input->mutable_input_param()->add_shape();
    for (int d : label_shape) label->add_dim(d);
  }
  return true;
}

void Skip(LayerParameter* layer) {
  layer->clear_include();
  layer->clear_exclude();
  layer->add_include()->add_stage(kSkipStage);
}

// The layer named in a Net error ("...: layer \"NAME\" (Type): ..."), or "".
std::string FailingLayer(const std::string& message) {
  const size_t start = message.find("layer \"");
  if (start == std::string::npos) return "";
  const size_t end = message.find("\" (", start + 7);
  return end == std::string::npos ? "" : message.substr(start + 7, end - start - 7);
}

bool IntendedOutput(const LayerParameter& layer, int top_index, bool last_layer) {
  if (last_layer || layer.type() == "Accuracy" || layer.type().find("Loss") != std::string::npos)
    return true;
  return top_index < layer.loss_weight_size() && layer.loss_weight(top_index) != 0;
}

// Checks one net (already upgraded) for `state`: bottoms, data sources, shapes, unused tops.
void CheckNet(const NetParameter& net, const NetState& state,
              const std::shared_ptr<ProtoSource>& source, Report* report) {
  NetParameter param = net;
  *param.mutable_state() = state;
  NetParameter filtered;
  std::vector<int> index;  // filtered layer -> param layer
  try {
    FilterNet(param, &filtered, &index);
  } catch (const Error& e) {
    report->Error((source ? source->path() + ": " : "") + e.what());
    return;
  }
  auto where = [&](int i, const std::string& field) {
    const std::string at =
        source
            ? source->Locate(net, StrCat("layer[", index[i], "]", field.empty() ? "" : ".", field))
            : "";
    const LayerParameter& layer = filtered.layer(i);
    return (at.empty() ? "" : at + ": ") + "layer \"" + layer.name() + "\" (" + layer.type() +
           "): ";
  };

  // Layers that cannot be built (missing bottom, missing data) are skipped, and so is whatever
  // reads their tops; `unknown` holds the blobs whose shapes are then not known.
  std::set<std::string> produced, unknown;
  std::vector<std::string> skipped;
  std::vector<bool> skip(filtered.layer_size(), false);
  auto skip_layer = [&](int i) {
    skip[i] = true;
    for (const std::string& top : filtered.layer(i).top()) unknown.insert(top);
    Skip(param.mutable_layer(index[i]));
  };
  for (int i = 0; i < filtered.layer_size(); ++i) {
    const LayerParameter& layer = filtered.layer(i);
    bool missing = false, depends = false;
    for (int j = 0; j < layer.bottom_size(); ++j) {
      const std::string& bottom = layer.bottom(j);
      if (unknown.count(bottom)) depends = true;
      if (produced.count(bottom)) continue;
      missing = true;
      const std::string suggestion = ClosestName(bottom, produced);
      report->Error(StrCat(where(i, StrCat("bottom[", j, "]")), "bottom \"", bottom,
                           "\" is not produced by any earlier layer",
                           suggestion.empty() ? "" : "; did you mean \"" + suggestion + "\"?"));
    }
    const std::string data_source = DataSource(layer);
    std::error_code ec;
    if (missing || depends) {
      skip_layer(i);
      if (depends && !missing) skipped.push_back(layer.name());
    } else if (!data_source.empty() && !fs::exists(data_source, ec)) {
      LayerParameter input;
      const bool stand_in = InputStandIn(layer, &input);
      report->Warning(StrCat(where(i, SourceField(layer)), "source \"", data_source,
                             "\" does not exist (from this directory); ",
                             stand_in ? "its tops are shape-checked from its parameters"
                                      : "the layers it feeds are not shape-checked"));
      if (stand_in) {
        *param.mutable_layer(index[i]) = input;
      } else {
        skip_layer(i);
      }
    }
    for (const std::string& top : layer.top()) {
      produced.insert(top);
      if (!skip[i]) unknown.erase(top);
    }
  }

  // Builds the net; after an error, leaves the failing layer (and what it feeds) out and retries.
  NetOptions options;
  options.override_state = true;
  options.state = state;
  options.source = source;
  options.verbose = false;
  for (int attempt = 0; attempt <= filtered.layer_size(); ++attempt) {
    std::string message;
    try {
      Net built(param, options);
      break;
    } catch (const Error& e) {
      message = e.what();
    }
    report->Error(message);
    const std::string failing = FailingLayer(message);
    int failed = -1;
    for (int i = 0; i < filtered.layer_size(); ++i)
      if (!skip[i] && filtered.layer(i).name() == failing) failed = i;
    if (failed < 0) {
      report->Warning(StrCat(source ? source->path() + ": " : "",
                             "the net could not be built past this error; later layers are not "
                             "checked"));
      break;
    }
    skip_layer(failed);
    for (int i = failed + 1; i < filtered.layer_size(); ++i) {
      if (skip[i]) continue;
      const auto& bottoms = filtered.layer(i).bottom();
      if (std::none_of(bottoms.begin(), bottoms.end(),
                       [&](const std::string& b) { return unknown.count(b) > 0; }))
        continue;
      skip_layer(i);
      skipped.push_back(filtered.layer(i).name());
    }
  }
  if (!skipped.empty()) {
    std::string names;
    for (const std::string& name : skipped) names += (names.empty() ? "" : ", ") + name;
    report->Warning(StrCat(source ? source->path() + ": " : "",
                           "not shape-checked (they read blobs of the layers above): ", names));
  }

  // Tops no later layer reads become net outputs; warn unless that looks intended.
  for (int i = 0; i < filtered.layer_size(); ++i) {
    const LayerParameter& layer = filtered.layer(i);
    for (int t = 0; t < layer.top_size(); ++t) {
      bool read = false;
      for (int k = i + 1; k < filtered.layer_size() && !read; ++k) {
        const auto& bottoms = filtered.layer(k).bottom();
        read = std::find(bottoms.begin(), bottoms.end(), layer.top(t)) != bottoms.end();
      }
      if (read || IntendedOutput(layer, t, i + 1 == filtered.layer_size())) continue;
      report->Warning(StrCat(where(i, StrCat("top[", t, "]")), "top \"", layer.top(t),
                             "\" is read by no layer (it becomes a net output; a Silence layer "
                             "makes that explicit)"));
    }
  }
}

// A net referred to by a solver: a file (relative to the cwd, else beside the solver) or inline.
struct NetRef {
  NetParameter param;
  std::shared_ptr<ProtoSource> source;
  bool ok = true;
};

NetRef LoadNet(const std::string& path, const std::string& solver_path, Report* report) {
  NetRef ref;
  std::string resolved = path;
  std::error_code ec;
  const fs::path beside = fs::path(solver_path).parent_path() / path;
  if (!fs::exists(resolved, ec) && fs::path(path).is_relative() && fs::exists(beside, ec))
    resolved = beside.lexically_normal().string();
  std::string text;
  try {
    text = ReadWholeFile(resolved);
  } catch (const Error& e) {
    report->Error(StrCat(e.what(), " (a net of ", solver_path, ")"));
    ref.ok = false;
    return ref;
  }
  std::vector<std::string> problems;
  bool syntax_ok = true;
  ref.source = ParseTextProtoCollecting(text, resolved, &ref.param, &problems, &syntax_ok);
  for (const std::string& p : problems) report->Error(p);
  ref.ok = syntax_ok;
  return ref;
}

bool Upgrade(const std::string& path, NetRef* net, Report* report) {
  if (!net->ok) return false;
  try {
    UpgradeNetAsNeeded(path, &net->param);
  } catch (const Error& e) {
    report->Error(e.what());
    net->ok = false;
  }
  return net->ok;
}

void CheckSolver(SolverParameter solver, const std::string& path,
                 const std::shared_ptr<ProtoSource>& source, Report* report) {
  auto at = [&](const std::string& field) { return source->Locate(solver, field) + ": "; };
  try {
    UpgradeSolverAsNeeded(path, &solver);
  } catch (const Error& e) {
    report->Error(e.what());
    return;
  }
  if (!SolverRegistry::Has(solver.type())) {
    std::set<std::string> types;
    for (const std::string& t : Solver::Types()) types.insert(t);
    const std::string suggestion = ClosestName(solver.type(), types);
    report->Error(StrCat(at("type"), "unknown solver type \"", solver.type(), "\"",
                         suggestion.empty() ? "" : "; did you mean \"" + suggestion + "\"?"));
  }
  if (solver.snapshot() > 0 && !solver.has_snapshot_prefix())
    report->Error(at("snapshot") + "snapshot is set but snapshot_prefix is not");
  for (const auto& [field, message] : SolverWarnings(solver)) report->Warning(at(field) + message);

  const int num_train = solver.has_net() + solver.has_net_param() + solver.has_train_net() +
                        solver.has_train_net_param();
  if (num_train != 1) {
    report->Error(at("net") + StrCat("the train net must be given by exactly one of net, "
                                     "net_param, train_net, train_net_param; ",
                                     num_train == 0 ? "none is set" : "several are"));
    return;
  }
  auto load = [&](bool inline_net, const NetParameter& param, const std::string& file) {
    NetRef ref;
    if (inline_net) {
      ref.param = param;  // an inline net's errors name the solver file only
    } else {
      ref = LoadNet(file, path, report);
    }
    Upgrade(inline_net ? path : file, &ref, report);
    return ref;
  };
  const bool generic_inline = solver.has_net_param();
  NetRef generic;
  if (solver.has_net() || generic_inline)
    generic = load(generic_inline, solver.net_param(), solver.net());
  NetRef train =
      solver.has_train_net_param() || solver.has_train_net()
          ? load(solver.has_train_net_param(), solver.train_net_param(), solver.train_net())
          : generic;
  const int num_explicit = solver.test_net_param_size() + solver.test_net_size();
  const bool has_generic = solver.has_net() || generic_inline;
  if (has_generic ? solver.test_iter_size() < num_explicit
                  : solver.test_iter_size() != num_explicit)
    report->Error(at("test_iter") +
                  StrCat("test_iter must be given once per test net: ", num_explicit,
                         " test net(s) but ", solver.test_iter_size(), " test_iter value(s)"));
  if (solver.test_iter_size() > 0 && solver.test_interval() <= 0)
    report->Error(at("test_interval") + "test_interval must be > 0 when there are test nets");

  auto check = [&](const NetRef& net, NetState state, const std::string& context) {
    if (!net.ok) return;
    report->set_context(context);
    // Precedence as the solver's: the phase, the net's own state, then train/test_state.
    NetState merged;
    merged.set_phase(state.phase());
    merged.MergeFrom(net.param.state());
    merged.MergeFrom(state);
    CheckNet(net.param, merged, net.source, report);
  };
  NetState train_state = solver.train_state();
  train_state.set_phase(TRAIN);
  check(train, train_state, "train net");
  std::vector<NetRef> tests;
  for (const NetParameter& p : solver.test_net_param()) tests.push_back(load(true, p, ""));
  for (const std::string& f : solver.test_net()) tests.push_back(load(false, {}, f));
  for (int i = num_explicit; i < solver.test_iter_size() && has_generic; ++i)
    tests.push_back(generic);
  for (size_t i = 0; i < tests.size(); ++i) {
    NetState state = i < static_cast<size_t>(solver.test_state_size())
                         ? solver.test_state(static_cast<int>(i))
                         : NetState();
    state.set_phase(TEST);
    check(tests[i], state, StrCat("test net #", i));
  }
}

// Whether the net has, in `phase`, a layer that feeds it (one without bottoms, other than a
// Parameter layer).
bool HasInputs(const NetParameter& param, Phase phase) {
  NetParameter staged(param), filtered;
  staged.mutable_state()->set_phase(phase);
  FilterNet(staged, &filtered);
  for (const LayerParameter& layer : filtered.layer())
    if (layer.bottom_size() == 0 && layer.type() != "Parameter") return true;
  return false;
}

// Returns the report of one file: solver or net, told apart by which parse fits better.
Report ValidateFile(const std::string& path) {
  Report report;
  std::string text;
  try {
    text = ReadWholeFile(path);
  } catch (const Error& e) {
    report.Error(e.what());
    return report;
  }
  SolverParameter solver;
  NetParameter net;
  std::vector<std::string> solver_problems, net_problems;
  bool solver_syntax = true, net_syntax = true;
  const auto solver_source =
      ParseTextProtoCollecting(text, path, &solver, &solver_problems, &solver_syntax);
  const auto net_source = ParseTextProtoCollecting(text, path, &net, &net_problems, &net_syntax);
  const bool looks_like_net = net.layer_size() + net.layers_size() + net.input_size() > 0;
  const bool is_solver = solver_problems.size() < net_problems.size() ||
                         (solver_problems.size() == net_problems.size() && !looks_like_net);
  for (const std::string& p : is_solver ? solver_problems : net_problems) report.Error(p);
  if (!(is_solver ? solver_syntax : net_syntax)) return report;
  if (is_solver) {
    CheckSolver(solver, path, solver_source, &report);
    return report;
  }
  NetRef ref{net, net_source};
  if (!Upgrade(path, &ref, &report)) return report;
  // A net file whose inputs (data or Input layers) all belong to one phase, as the SSD branch's
  // separate train.prototxt and test.prototxt, is checked in that phase only: its solver never
  // builds it in the other.
  std::vector<Phase> phases;
  for (Phase phase : {TRAIN, TEST})
    if (HasInputs(ref.param, phase)) phases.push_back(phase);
  if (phases.empty()) phases = {TRAIN, TEST};
  for (Phase phase : phases) {
    report.set_context(phase == TRAIN ? "TRAIN" : "TEST");
    NetState state;
    state.set_phase(phase);
    CheckNet(ref.param, state, ref.source, &report);
  }
  return report;
}

int RunValidate(const std::vector<std::string>& args) {
  if (args.empty()) CREMA_THROW_CONFIG("give one or more prototxt files (crema validate --help)");
  // The nets are built quietly: only the findings are printed.
  if (FLAGS_minloglevel < google::GLOG_WARNING) FLAGS_minloglevel = google::GLOG_WARNING;
  int failed = 0;
  for (const std::string& path : args) {
    const Report report = ValidateFile(path);
    report.Print();
    if (report.errors() > 0) {
      ++failed;
      std::printf("%s: %d error(s), %d warning(s)\n", path.c_str(), report.errors(),
                  report.warnings());
    } else {
      std::printf("%s: valid (%d warning(s))\n", path.c_str(), report.warnings());
    }
  }
  return failed > 0 ? 2 : 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    validate, "validate", "check net and solver prototxts without running them",
    "crema validate FILE.prototxt [FILE ...]\n\n"
    "Tells a solver from a net by its fields and checks it: syntax, unknown fields (every one, "
    "with a \"did you mean\"), bottoms no earlier layer produces, layer parameters and shapes "
    "(the net is built on the CPU for TRAIN and TEST, or only for the phase its data layers "
    "belong to; a solver's train and test nets with its train_state/test_state), settings legal "
    "but unlikely meant (a negative base_lr, max_iter 0: "
    "warnings), and tops no layer reads (they become net outputs; tops of loss "
    "and Accuracy layers and of the last layer are taken as intended). A data layer whose "
    "source is missing is a warning: an ImageData layer with new_height/new_width (or "
    "crop_size), or an AnnotatedData layer with resize_param height/width (or crop_size), is "
    "shape-checked as an Input of that shape; otherwise the layers it feeds are "
    "listed as not shape-checked. After an error the layer and what it feeds are left out and "
    "the rest is checked, so one run shows every error it can. Each finding is one line with "
    "FILE:LINE:COL; a finding seen in only some phases or nets is tagged with them. Exit code "
    "0 when every file is valid (warnings allowed), 2 otherwise.",
    {}, &crema::cli::RunValidate);
