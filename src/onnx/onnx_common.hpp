#pragma once
// Helpers shared by the ONNX exporter and importer: attributes, tensors, Caffe's pooling windows.
#include <cstdint>
#include <string>
#include <vector>

#include "onnx.pb.h"

namespace crema::onnx_io {

void SetAttr(onnx::NodeProto* node, const std::string& name, int64_t value);
void SetAttr(onnx::NodeProto* node, const std::string& name, float value);
void SetAttr(onnx::NodeProto* node, const std::string& name, const std::string& value);
void SetAttr(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& values);

// The attribute `name` of `node`, or null.
const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name);

// One spatial axis of a pooling window sweep: input size, kernel, stride, begin/end padding.
// Caffe's windows start at i * stride - pad_begin for i < out; the divisor of an average is the
// window clipped to [count_lo, count_hi) (input coordinates).
struct PoolAxis {
  int64_t in = 0, kernel = 0, stride = 1, pad_begin = 0, pad_end = 0;
};
// Caffe's pooled size (ceil, or floor with round_mode FLOOR), including its rule that the last
// window starts inside the input plus the begin padding.
int64_t CaffePooledSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode);
// The divisors of each output position when averages count the window clipped to [lo, hi).
std::vector<int64_t> PoolDivisors(const PoolAxis& axis, int64_t out, int64_t lo, int64_t hi);

}  // namespace crema::onnx_io
