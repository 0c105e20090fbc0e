// crema test: scores a trained net (Caffe's `caffe test`): --iterations forward passes, each
// output averaged over the passes (outputs that change size between passes are counted instead);
// a DetectionEvaluate output is scored as mean average precision over the passes instead.
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "flags.hpp"
#include "net/iteration_graph.hpp"
#include "net/output_means.hpp"
#include "net/weights_match.hpp"
#include "solvers/detection_eval.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

// The ap_versions `crema test` reports for a DetectionEvaluate output.
constexpr const char* kApVersions[] = {"11point", "MaxIntegral", "Integral"};

// Prints (and logs) one line of the report.
void Report(const std::string& line) {
  LOG(INFO) << line;
  std::printf("%s\n", line.c_str());
}

// One DetectionEvaluate output's mean average precision under each of kApVersions, then each
// class's average precision.
void ReportDetections(const std::string& name, const DetectionEvalAccumulator& detections) {
  std::vector<DetectionEvalAccumulator::Result> results;
  for (const char* version : kApVersions) results.push_back(detections.Compute(version));
  std::string line = StrCat(name, ": mAP");
  for (size_t v = 0; v < results.size(); ++v)
    line += StrCat(v ? ", " : " ", kApVersions[v], " = ", static_cast<float>(results[v].map));
  Report(StrCat(line, " (", results[0].classes.size(), " classes, ", detections.batches(),
                " batches)"));
  for (size_t c = 0; c < results[0].classes.size(); ++c) {
    const DetectionEvalAccumulator::ClassAp& ap = results[0].classes[c];
    line = StrCat(name, ": class", ap.label, " AP");
    for (size_t v = 0; v < results.size(); ++v)
      line += StrCat(v ? ", " : " ", kApVersions[v], " = ",
                     static_cast<float>(results[v].classes[c].ap));
    Report(
        StrCat(line, " (", ap.positives, " ground truth boxes, ", ap.detections, " detections)"));
  }
}

int RunTest(const std::vector<std::string>& args) {
  RequireFlag("model", FLAGS_model);
  RequireFlag("weights", FLAGS_weights);
  if (FLAGS_iterations <= 0) CREMA_THROW_CONFIG("--iterations must be > 0, got ", FLAGS_iterations);
  const Device device = DeviceFromFlags();
  const Phase phase = PhaseFromFlag(TEST);
  std::unique_ptr<Net> net = Net::FromFile(FLAGS_model, phase, FLAGS_level, StagesFromFlag(),
                                           device, MemoryPlanFromFlag(MemoryPlan::kInference));
  net->SetFoldBatchNorm(FLAGS_fold_bn);
  for (const std::string& weights : SplitList(FLAGS_weights))
    CopyWeightsRequiringAMatch(net.get(), weights);
  net->set_check_finite(FLAGS_check_nan);
  LOG(INFO) << "Running for " << FLAGS_iterations << " iterations.";

  // One running sum per output element, as Caffe's test tool; outputs whose size changes between
  // batches are counted instead (OutputMeans).
  OutputMeans means;
  double loss = 0;
  // DetectionEvaluate's rows are gathered into average precision instead (solvers/detection_eval).
  const std::vector<int> detection_outputs = DetectionEvalOutputs(*net);
  std::vector<DetectionEvalAccumulator> detections(detection_outputs.size());
  const auto is_detection = [&](int output) {
    return std::find(detection_outputs.begin(), detection_outputs.end(), output) !=
           detection_outputs.end();
  };
  // On a GPU, the pass after the data layers is replayed as a CUDA graph where it can be.
  IterationGraph graph(net.get(), FLAGS_cuda_graph);
  const int start = net->num_input_layers();
  for (int i = 0; i < FLAGS_iterations; ++i) {
    try {
      loss += graph.Run([&] { net->ForwardFrom(start); });
    } catch (const NonFiniteError& e) {
      CREMA_THROW_RUNTIME(e.what(), " at iteration ", i);
    }
    means.Add(*net);
    for (size_t k = 0; k < detection_outputs.size(); ++k)
      detections[k].Add(*net->output_blobs()[detection_outputs[k]]);
    for (size_t j = 0; j < net->output_blobs().size(); ++j) {
      const Blob& out = *net->output_blobs()[j];
      const std::string& name = net->blob_names()[net->output_blob_indices()[j]];
      if (is_detection(static_cast<int>(j))) {
        LOG(INFO) << "Batch " << i << ", " << name << ": " << out.count() / 5
                  << " DetectionEvaluate rows";
        continue;
      }
      for (int64_t k = 0; k < out.count(); ++k)
        LOG(INFO) << "Batch " << i << ", " << name << " = " << static_cast<float>(out.data_at(k));
    }
  }
  loss /= FLAGS_iterations;
  LOG(INFO) << "Loss: " << static_cast<float>(loss);
  for (const OutputMeans::Mean& mean : means.Means()) {
    if (is_detection(mean.output)) continue;
    const int blob_index = net->output_blob_indices()[mean.output];
    const double weight = net->blob_loss_weights()[blob_index];
    const float value = static_cast<float>(mean.value);
    std::ostringstream line;
    line << mean.name << " = " << value;
    if (weight != 0)
      line << " (* " << static_cast<float>(weight) << " = " << static_cast<float>(weight) * value
           << " loss)";
    Report(line.str());
  }
  for (size_t k = 0; k < detection_outputs.size(); ++k)
    ReportDetections(net->blob_names()[net->output_blob_indices()[detection_outputs[k]]],
                     detections[k]);
  for (const OutputMeans::Varying& output : means.VaryingOutputs()) {
    if (is_detection(output.output)) continue;
    Report(StrCat(output.name, ": not averaged, its size varies between batches (",
                  output.min_count, " to ", output.max_count, " values per batch, ",
                  output.total_count, " in all over ", means.passes(),
                  " batches; each batch's values are in the log)"));
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(test, "test",
                    "score a trained net: average its outputs (or detection mAP) over N batches",
                    "crema test --model NET.prototxt --weights W.caffemodel[,W2] "
                    "[--iterations N] [--gpu ID] [--phase TEST] [--stage S] [--level L]\n\n"
                    "Runs N forward passes (each reads one batch from the data layers), logs "
                    "every output per batch and prints the mean of each output element as "
                    "`name = value` lines on stdout; a loss output also shows its weighted value, "
                    "e.g. `loss = 0.31 (* 1 = 0.31 loss)`, as Caffe's `caffe test` does. An output "
                    "whose size changes between batches (DetectionOutput's detections) has no "
                    "mean: it is printed as `name: not averaged, its size varies between batches "
                    "(MIN to MAX values per batch, ...)`, its values logged batch by batch. A "
                    "DetectionEvaluate output (an SSD test net) is scored as Caffe-SSD's solver "
                    "test does, gathering its rows over the N batches: `name: mAP 11point = A, "
                    "MaxIntegral = B, Integral = C (K classes, N batches)`, then one `name: classL "
                    "AP ...` line per class with its ground truth and detection counts.",
                    {"memory_plan", "fold_bn", "model", "weights", "iterations", "gpu", "math",
                     "cudnn_workspace_mb", "deterministic", "check_nan", "cuda_graph", "amp",
                     "phase", "stage", "level"},
                    &crema::cli::RunTest);
