// crema export-onnx / import-onnx: Caffe deploy net + weights <-> ONNX model (docs/onnx.md).
#include "onnx/onnx.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "flags.hpp"
#include "verb.hpp"

DEFINE_int32(opset, 17, "export-onnx: the ONNX opset to write (13 to 21; IR version to match).");
DEFINE_string(out_model, "", "import-onnx: the deploy prototxt to write.");
DEFINE_string(out_weights, "", "import-onnx: the .caffemodel to write.");

namespace crema::cli {
namespace {

int RunExportOnnx(const std::vector<std::string>& args) {
  RequireFlag("model", FLAGS_model);
  RequireFlag("out", FLAGS_out);
  OnnxExportOptions options;
  options.opset = FLAGS_opset;
  ExportOnnxFile(FLAGS_model, SplitList(FLAGS_weights), FLAGS_out, options);
  std::printf("%s -> %s (opset %d)\n", FLAGS_model.c_str(), FLAGS_out.c_str(), FLAGS_opset);
  return 0;
}

int RunImportOnnx(const std::vector<std::string>& args) {
  if (args.size() != 1)
    CREMA_THROW_CONFIG("import-onnx takes one model file, got ", args.size(),
                       " (crema import-onnx MODEL.onnx --out-model D.prototxt --out-weights "
                       "W.caffemodel)");
  RequireFlag("out_model", FLAGS_out_model);
  RequireFlag("out_weights", FLAGS_out_weights);
  ImportOnnxFile(args[0], FLAGS_out_model, FLAGS_out_weights);
  std::printf("%s -> %s, %s\n", args[0].c_str(), FLAGS_out_model.c_str(),
              FLAGS_out_weights.c_str());
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(export_onnx, "export-onnx",
                    "write a deploy net and its weights as an ONNX model",
                    "crema export-onnx --model DEPLOY.prototxt --weights W.caffemodel --out "
                    "M.onnx [--opset 17]\n\n"
                    "The net is built for TEST; every layer becomes ONNX operators (docs/onnx.md "
                    "has the table), weights become initializers. A train_val net's data and "
                    "loss layers, or a layer type without a mapping, are an error naming the "
                    "layer.",
                    {"model", "weights", "out", "opset"}, &crema::cli::RunExportOnnx);

CREMA_REGISTER_VERB(import_onnx, "import-onnx",
                    "turn an ONNX model into a deploy prototxt and a .caffemodel",
                    "crema import-onnx M.onnx --out-model DEPLOY.prototxt --out-weights "
                    "W.caffemodel\n\n"
                    "Graph inputs become Input layers; the operators of docs/onnx.md become "
                    "layers (weights must be initializers or Constant nodes). An unsupported "
                    "operator or attribute is an error naming the node.",
                    {"out_model", "out_weights"}, &crema::cli::RunImportOnnx);
