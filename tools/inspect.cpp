// crema inspect: builds a net (no weights) and prints its layers, blobs and shapes.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "flags.hpp"
#include "net/memory_plan.hpp"
#include "net/net_json.hpp"
#include "verb.hpp"

DEFINE_bool(memory, false,
            "inspect: print each blob's activation bytes (data and diff) before and after the "
            "memory plan, for inference and for training, and the totals.");

namespace crema::cli {
namespace {

std::string ShapeText(const std::vector<int>& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + ")";
}

std::string Names(const Net& net, const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + net.blob_names()[ids[i]];
  return out;
}

// Where a blob's data or diff lives under the plan: an offset in the arena, or its own memory and
// why.
std::string Placement(size_t bytes, int64_t offset, const std::string& note) {
  if (bytes == 0) return "-";
  return offset >= 0 ? "@" + std::to_string(offset) : "own (" + note + ")";
}

// "title: N layers: a -> b, ..." for the layers i with into[i] >= 0 (b: layer into[i]).
void PrintLayerMap(const Net& net, const std::vector<int>& into, const char* title) {
  std::string pairs;
  int count = 0;
  for (int i = 0; i < net.num_layers(); ++i)
    if (into[i] >= 0)
      pairs +=
          StrCat(count++ ? ", " : ": ", net.layer_names()[i], " -> ", net.layer_names()[into[i]]);
  std::printf("%s: %d layer%s%s\n", title, count, count == 1 ? "" : "s", pairs.c_str());
}

// The plan the net applies now.
void PrintMemoryPlan(const Net& net) {
  const MemoryPlanLayout& layout = *net.memory_layout();
  const MemoryPlan mode = layout.mode;
  size_t width = 4;
  for (const std::string& name : net.blob_names()) width = std::max(width, name.size());
  const int w = static_cast<int>(width);
  std::printf("\nactivation memory, %s:\n  %-*s  %-18s  %12s  %-20s  %12s  %s\n",
              mode == MemoryPlan::kInference ? "inference (forward only)"
                                             : "training (forward and backward)",
              w, "blob", "shape", "data bytes", "data at", "diff bytes", "diff at");
  for (size_t b = 0; b < layout.blobs.size(); ++b) {
    const MemoryPlanLayout::BlobEntry& e = layout.blobs[b];
    std::printf("  %-*s  %-18s  %12zu  %-20s  %12zu  %s\n", w, net.blob_names()[b].c_str(),
                ShapeText(net.blobs()[b]->shape()).c_str(), e.data_bytes,
                Placement(e.data_bytes, e.data_offset, e.data_note).c_str(), e.diff_bytes,
                Placement(e.diff_bytes, e.diff_offset, e.diff_note).c_str());
  }
  if (mode == MemoryPlan::kInference) {
    std::string names;
    for (int l : layout.in_place_layers) names += " " + net.layer_names()[l];
    std::printf("  run in place: %zu layer%s%s\n", layout.in_place_layers.size(),
                layout.in_place_layers.size() == 1 ? "" : "s", names.c_str());
  }
  std::printf(
      "  total bytes: data %zu + diff %zu -> arena %zu + own %zu (data) + %zu (diff) = %zu "
      "(%.3fx)\n",
      layout.data_before, layout.diff_before, layout.arena_bytes, layout.kept_data,
      layout.kept_diff, layout.after(),
      layout.before() ? static_cast<double>(layout.after()) / static_cast<double>(layout.before())
                      : 1.0);
}

int RunInspect(const std::vector<std::string>& args) {
  RequireFlag("model", FLAGS_model);
  const Phase phase = PhaseFromFlag(TEST);
  const std::vector<std::string> stages = StagesFromFlag();
  // As Net::FromFile, without the per-layer set-up log (this verb prints the same, better).
  NetParameter param;
  NetOptions options;
  options.source = ReadNetParamsFromTextFile(FLAGS_model, &param);
  options.override_state = true;
  options.state.set_phase(phase);
  options.state.set_level(FLAGS_level);
  for (const std::string& s : stages) options.state.add_stage(s);
  options.verbose = false;
  auto net = std::make_unique<Net>(param, options);
  if (FLAGS_json) {
    std::fputs(NetToJson(*net, stages).c_str(), stdout);
    return 0;
  }

  int64_t total = 0, unique = 0;
  for (size_t i = 0; i < net->params().size(); ++i) {
    total += net->params()[i]->count();
    if (net->param_owners()[i] < 0) unique += net->params()[i]->count();
  }
  std::string stage_text;
  for (const std::string& s : stages) stage_text += (stage_text.empty() ? "" : ",") + s;
  std::printf("net \"%s\", phase %s%s%s: %d layers, %zu blobs, %lld learnable parameters",
              net->name().c_str(), phase == TRAIN ? "TRAIN" : "TEST",
              stage_text.empty() ? "" : ", stages ", stage_text.c_str(), net->num_layers(),
              net->blobs().size(), static_cast<long long>(total));
  if (unique != total) std::printf(" (%lld unique)", static_cast<long long>(unique));
  std::printf("\n");

  size_t name_width = 4, type_width = 4;
  for (int i = 0; i < net->num_layers(); ++i) {
    name_width = std::max(name_width, net->layer_names()[i].size());
    type_width = std::max(type_width, std::string(net->layers()[i]->type()).size());
  }
  const int nw = static_cast<int>(name_width), tw = static_cast<int>(type_width);
  std::printf("\n%4s  %-*s  %-*s  %s\n", "#", nw, "name", tw, "type", "bottoms -> tops");
  for (int i = 0; i < net->num_layers(); ++i) {
    const Layer& layer = *net->layers()[i];
    std::string tops;
    const std::vector<int>& top_ids = net->top_id_vec(i);
    for (size_t j = 0; j < top_ids.size(); ++j) {
      tops += (j ? ", " : "") + net->blob_names()[top_ids[j]] + " " +
              ShapeText(net->top_vecs()[i][j]->shape());
      if (layer.loss(static_cast<int>(j)) != 0)
        tops += " [loss weight " + JsonNumber(layer.loss(static_cast<int>(j))) + "]";
    }
    std::printf("%4d  %-*s  %-*s  %s -> %s\n", i, nw, net->layer_names()[i].c_str(), tw,
                layer.type(), Names(*net, net->bottom_ids(i)).c_str(), tops.c_str());
    if (!layer.blobs().empty()) {
      std::string params;
      for (size_t j = 0; j < layer.blobs().size(); ++j)
        params += (j ? " " : "") + ShapeText(layer.blobs()[j]->shape());
      std::printf("%4s  %-*s  %-*s  params %s\n", "", nw, "", tw, "", params.c_str());
    }
  }
  const std::string inputs = Names(*net, net->input_blob_indices());
  const std::string outputs = Names(*net, net->output_blob_indices());
  std::printf("\ninputs: %s\noutputs: %s\n", inputs.empty() ? "(none)" : inputs.c_str(),
              outputs.empty() ? "(none)" : outputs.c_str());
  if (FLAGS_memory) {
    // Inference folds BatchNorm (+ Scale) into convolutions unless --fold-bn=false.
    net->SetFoldBatchNorm(FLAGS_fold_bn);
    std::printf("\n");
    PrintLayerMap(*net, net->folded_into(), "folded into convolutions for inference (--fold-bn)");
    PrintLayerMap(*net, net->relu_fused_into(), "ReLUs fused into their producers (--fuse-relu)");
    PrintLayerMap(*net, net->relu_backward_fused_into(),
                  "ReLU gradients computed by their reader in training on the CPU (--fuse-relu)");
    PrintLayerMap(*net, net->fused_into_batch_norm(),
                  "Scales and ReLUs in BatchNorm groups (--fuse-batch-norm)");
    net->SetMemoryPlan(MemoryPlan::kInference, {});
    PrintLayerMap(*net, net->sum_fused_into(),
                  "Eltwise SUMs computed in their convolution on the CPU (--fuse-sum)");
    PrintLayerMap(*net, net->depthwise_fused_into(),
                  "depthwise convolutions computed in their 1x1 convolution on the CPU "
                  "(--fuse-depthwise)");
    PrintMemoryPlan(*net);
    net->SetMemoryPlan(MemoryPlan::kOff, {});
    net->SetFoldBatchNorm(false);
    net->SetMemoryPlan(MemoryPlan::kTraining, {});
    PrintMemoryPlan(*net);
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(inspect, "inspect",
                    "build a net (no weights) and print its layers, blobs and shapes",
                    "crema inspect --model NET.prototxt [--phase TRAIN|TEST] [--stage S[,S]] "
                    "[--level L] [--json] [--memory]\n\n"
                    "Builds the net as `train`/`test` would (data layers open their sources) and "
                    "prints each layer: index, name, type, bottoms, tops with shapes, loss "
                    "weights and learnable parameter shapes, including the Split layers crema "
                    "inserts. --json prints the same as JSON (the fields of Caffe's reference "
                    "shape dumps). --memory adds the activation memory plan: per blob its data and "
                    "diff bytes and the shared buffer it gets (or why it keeps its own), for "
                    "inference and for training, and the totals before -> after planning. The "
                    "phase defaults to TEST.",
                    {"model", "phase", "stage", "level", "json", "memory", "fold_bn"},
                    &crema::cli::RunInspect);
