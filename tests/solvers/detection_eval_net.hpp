#pragma once
// A net for the detection test of the solver and of `crema test`: in the TEST phase, two
// Parameter layers ("det", "gt") hold fixed DetectionEvaluate bottoms (from the weights file
// WriteDetectionEvalWeights writes), so every batch evaluates the same rows; a Reduction of the
// ground truth is an ordinary output beside it. The TRAIN phase is a one-weight regression.
#include <fstream>
#include <string>
#include <vector>

#include "crema/proto.hpp"

namespace crema::detection_eval_net {

inline constexpr char kNet[] = R"(name: "detection_eval_net"
layer { name: "data" type: "DummyData" top: "x" top: "y" include { phase: TRAIN }
        dummy_data_param { shape { dim: 1 dim: 1 } shape { dim: 1 dim: 1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "x" top: "ip" include { phase: TRAIN }
        inner_product_param { num_output: 1 } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip" bottom: "y" top: "loss"
        include { phase: TRAIN } }
layer { name: "det" type: "Parameter" top: "det" include { phase: TEST }
        parameter_param { shape { dim: 1 dim: 1 dim: 4 dim: 7 } } }
layer { name: "gt" type: "Parameter" top: "gt" include { phase: TEST }
        parameter_param { shape { dim: 1 dim: 1 dim: 3 dim: 8 } } }
layer { name: "detection_eval" type: "DetectionEvaluate" bottom: "det" bottom: "gt"
        top: "detection_eval" include { phase: TEST }
        detection_evaluate_param { num_classes: 3 } }
layer { name: "gt_sum" type: "Reduction" bottom: "gt" top: "gt_sum" include { phase: TEST } }
)";

// Image 0 has class 1 boxes A and B and class 2 box C. Detections: class 1 A (0.9, true), a box
// meeting nothing (0.8, false), B (0.7, true); class 2 the same stray box (0.6, false).
inline const std::vector<float> kDetections = {0, 1, 0.9f, 0.1f, 0.1f, 0.4f, 0.4f,  //
                                               0, 1, 0.8f, 0.4f, 0.6f, 0.5f, 0.7f,  //
                                               0, 1, 0.7f, 0.6f, 0.6f, 0.9f, 0.9f,  //
                                               0, 2, 0.6f, 0.4f, 0.6f, 0.5f, 0.7f};
inline const std::vector<float> kGroundTruth = {0, 1, 0, 0.1f, 0.1f, 0.4f, 0.4f, 0,  //
                                                0, 1, 0, 0.6f, 0.6f, 0.9f, 0.9f, 0,  //
                                                0, 2, 0, 0.5f, 0.1f, 0.9f, 0.4f, 0};
// The sum of kGroundTruth: 2 + 4 + 3.9.
constexpr double kGroundTruthSum = 9.9;

// The mean average precision after two batches (twice the rows above). Class 2 has 2 positives
// and no true detection: 0. Class 1 has 4 positives; ranked by score (ties in batch order) its
// detections are T T F F T T: precision 1, 1, 2/3, 1/2, 3/5, 2/3 at recall 1/4, 1/2, 1/2, 1/2,
// 3/4, 1. The mean is over both classes.
//   11point: recall >= 0 ... 0.5 reaches precision 1, >= 0.6 ... 1 reaches 2/3.
//   MaxIntegral: 1 up to recall 1/2, then 2/3 (the best to the right) for the last half.
//   Integral: each precision times the recall it adds.
constexpr double kMap11Point = (6 * 1.0 + 5 * (2.0 / 3)) / 11 / 2;
constexpr double kMapMaxIntegral = (0.5 * 1.0 + 0.5 * (2.0 / 3)) / 2;
constexpr double kMapIntegral = (0.25 + 0.25 + 0.25 * 0.6 + 0.25 * (2.0 / 3)) / 2;

inline void AddBlob(NetParameter* net, const char* name, const std::vector<int>& shape,
                    const std::vector<float>& values) {
  LayerParameter* layer = net->add_layer();
  layer->set_name(name);
  layer->set_type("Parameter");
  BlobProto* blob = layer->add_blobs();
  for (int dim : shape) blob->mutable_shape()->add_dim(dim);
  for (float v : values) blob->add_data(v);
}

// The weights of "det" and "gt" (a binary .caffemodel).
inline void WriteDetectionEvalWeights(const std::string& path) {
  NetParameter net;
  net.set_name("detection_eval_net");
  AddBlob(&net, "det", {1, 1, 4, 7}, kDetections);
  AddBlob(&net, "gt", {1, 1, 3, 8}, kGroundTruth);
  std::ofstream out(path, std::ios::binary);
  net.SerializeToOstream(&out);
}

}  // namespace crema::detection_eval_net
