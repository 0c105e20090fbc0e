#include "solvers/detection_eval.hpp"

#include <algorithm>
#include <cstring>

#include "crema/error.hpp"
#include "crema/layer.hpp"
#include "io/boxes.hpp"

namespace crema {

void DetectionEvalAccumulator::Add(const Blob& rows) {
  if (rows.num_axes() < 1 || rows.shape(rows.num_axes() - 1) != 5)
    CREMA_THROW_RUNTIME("detection evaluation: expected DetectionEvaluate rows of 5 values, got ",
                        rows.shape_string());
  const int64_t num_rows = rows.count() / 5;
  for (int64_t i = 0; i < num_rows; ++i) {
    const int64_t at = i * 5;
    const int image = static_cast<int>(rows.data_at(at));
    const int label = static_cast<int>(rows.data_at(at + 1));
    if (image == -1) {
      num_positives_[label] += static_cast<int>(rows.data_at(at + 2));
      continue;
    }
    const int tp = static_cast<int>(rows.data_at(at + 3));
    const int fp = static_cast<int>(rows.data_at(at + 4));
    if (tp == 0 && fp == 0) continue;
    detections_[label].emplace_back(static_cast<float>(rows.data_at(at + 2)), tp);
  }
  ++batches_;
}

DetectionEvalAccumulator::Result DetectionEvalAccumulator::Compute(
    const std::string& ap_version) const {
  Result result;
  double sum = 0;
  for (const auto& [label, positives] : num_positives_) {
    const auto it = detections_.find(label);
    ClassAp ap{label, positives, 0, 0.0};
    if (it != detections_.end()) {
      ap.detections = static_cast<int>(it->second.size());
      ap.ap = boxes::AveragePrecision(it->second, positives, ap_version);
    } else {
      boxes::CheckApVersion(ap_version, "ap_version");
    }
    sum += ap.ap;
    result.classes.push_back(ap);
  }
  if (!result.classes.empty()) result.map = sum / static_cast<double>(result.classes.size());
  return result;
}

std::vector<int> DetectionEvalOutputs(const Net& net) {
  std::vector<int> outputs;
  const std::vector<int>& output_ids = net.output_blob_indices();
  for (int i = 0; i < net.num_layers(); ++i) {
    if (std::strcmp(net.layers()[i]->type(), "DetectionEvaluate") != 0) continue;
    for (int top_id : net.top_id_vec(i)) {
      const auto it = std::find(output_ids.begin(), output_ids.end(), top_id);
      if (it != output_ids.end()) outputs.push_back(static_cast<int>(it - output_ids.begin()));
    }
  }
  std::sort(outputs.begin(), outputs.end());
  return outputs;
}

}  // namespace crema
