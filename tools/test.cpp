// crema test: scores a trained net (Caffe's `caffe test`): --iterations forward passes, each
// output averaged over the passes (outputs that change size between passes are counted instead).
#include <glog/logging.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "flags.hpp"
#include "net/iteration_graph.hpp"
#include "net/output_means.hpp"
#include "net/weights_match.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

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
    for (size_t j = 0; j < net->output_blobs().size(); ++j) {
      const Blob& out = *net->output_blobs()[j];
      const std::string& name = net->blob_names()[net->output_blob_indices()[j]];
      for (int64_t k = 0; k < out.count(); ++k)
        LOG(INFO) << "Batch " << i << ", " << name << " = " << static_cast<float>(out.data_at(k));
    }
  }
  loss /= FLAGS_iterations;
  LOG(INFO) << "Loss: " << static_cast<float>(loss);
  for (const OutputMeans::Mean& mean : means.Means()) {
    const int blob_index = net->output_blob_indices()[mean.output];
    const double weight = net->blob_loss_weights()[blob_index];
    const float value = static_cast<float>(mean.value);
    std::ostringstream line;
    line << mean.name << " = " << value;
    if (weight != 0)
      line << " (* " << static_cast<float>(weight) << " = " << static_cast<float>(weight) * value
           << " loss)";
    LOG(INFO) << line.str();
    std::printf("%s\n", line.str().c_str());
  }
  for (const OutputMeans::Varying& output : means.VaryingOutputs()) {
    const std::string line =
        StrCat(output.name, ": not averaged, its size varies between batches (", output.min_count,
               " to ", output.max_count, " values per batch, ", output.total_count, " in all over ",
               means.passes(), " batches; each batch's values are in the log)");
    LOG(INFO) << line;
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(test, "test", "score a trained net: average its outputs over N batches",
                    "crema test --model NET.prototxt --weights W.caffemodel[,W2] "
                    "[--iterations N] [--gpu ID] [--phase TEST] [--stage S] [--level L]\n\n"
                    "Runs N forward passes (each reads one batch from the data layers), logs "
                    "every output per batch and prints the mean of each output element as "
                    "`name = value` lines on stdout; a loss output also shows its weighted value, "
                    "e.g. `loss = 0.31 (* 1 = 0.31 loss)`, as Caffe's `caffe test` does. An output "
                    "whose size changes between batches (DetectionOutput's detections) has no "
                    "mean: it is printed as `name: not averaged, its size varies between batches "
                    "(MIN to MAX values per batch, ...)`, its values logged batch by batch.",
                    {"memory_plan", "fold_bn", "model", "weights", "iterations", "gpu", "math",
                     "cudnn_workspace_mb", "deterministic", "check_nan", "cuda_graph", "amp",
                     "phase", "stage", "level"},
                    &crema::cli::RunTest);
