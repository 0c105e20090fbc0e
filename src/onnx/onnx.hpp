#pragma once
// Conversion between Caffe nets (a deploy prototxt and its .caffemodel) and ONNX models.
// Export builds the net for TEST on the CPU (so legacy formats are upgraded, Split layers
// inserted and every blob shape known) and writes one ONNX node group per layer, weights as
// initializers; import reads an ONNX graph of the operators docs/onnx.md lists and writes a
// deploy prototxt with an Input layer plus a .caffemodel. Anything without an exact Caffe/ONNX
// equivalent is a ConfigError naming the layer (or node) and its type (or op_type).
#include <string>
#include <vector>

#include "crema/proto.hpp"
#include "onnx.pb.h"

namespace crema {

class Net;

struct OnnxExportOptions {
  int opset = 17;  // 13 (Softmax over one axis) .. 21
};

// The ONNX IR version that goes with an opset (opset 17 -> IR 8); ConfigError outside 13..21.
int OnnxIrVersionForOpset(int opset);

// `deploy` is a net parameter as read from a prototxt (upgraded); `weights` are .caffemodel
// paths copied into it in order. `source` names the prototxt in messages.
void ExportOnnx(const NetParameter& deploy, const std::vector<std::string>& weights,
                const std::string& source, const OnnxExportOptions& options,
                onnx::ModelProto* model);
// The same from a net already built for TEST (with its weights), e.g. one filled in memory.
void ExportOnnx(const Net& net, const OnnxExportOptions& options, onnx::ModelProto* model);
void ExportOnnxFile(const std::string& model_path, const std::vector<std::string>& weights,
                    const std::string& out_path, const OnnxExportOptions& options);

// `deploy` gets the layers (no blobs), `weights` the same layers with their blobs only.
void ImportOnnx(const onnx::ModelProto& model, const std::string& source, NetParameter* deploy,
                NetParameter* weights);
void ImportOnnxFile(const std::string& onnx_path, const std::string& out_model,
                    const std::string& out_weights);

}  // namespace crema
