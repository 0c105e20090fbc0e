#include "onnx/onnx_common.hpp"

#include <algorithm>

#include "crema/error.hpp"
#include "onnx/onnx.hpp"

namespace crema {

int OnnxIrVersionForOpset(int opset) {
  if (opset < 13 || opset > 21)
    CREMA_THROW_CONFIG("--opset ", opset, ": crema writes opsets 13 to 21 (default 17)");
  if (opset <= 14) return 7;
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  return 10;
}

namespace onnx_io {

namespace {
onnx::AttributeProto* NewAttr(onnx::NodeProto* node, const std::string& name,
                              onnx::AttributeProto::AttributeType type) {
  onnx::AttributeProto* attr = node->add_attribute();
  attr->set_name(name);
  attr->set_type(type);
  return attr;
}
}  // namespace

void SetAttr(onnx::NodeProto* node, const std::string& name, int64_t value) {
  NewAttr(node, name, onnx::AttributeProto::INT)->set_i(value);
}
void SetAttr(onnx::NodeProto* node, const std::string& name, float value) {
  NewAttr(node, name, onnx::AttributeProto::FLOAT)->set_f(value);
}
void SetAttr(onnx::NodeProto* node, const std::string& name, const std::string& value) {
  NewAttr(node, name, onnx::AttributeProto::STRING)->set_s(value);
}
void SetAttr(onnx::NodeProto* node, const std::string& name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* attr = NewAttr(node, name, onnx::AttributeProto::INTS);
  for (int64_t v : values) attr->add_ints(v);
}

const onnx::AttributeProto* FindAttr(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& attr : node.attribute())
    if (attr.name() == name) return &attr;
  return nullptr;
}

int64_t CaffePooledSize(int64_t in, int64_t kernel, int64_t stride, int64_t pad, bool ceil_mode) {
  const int64_t span = in + 2 * pad - kernel;
  int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (pad > 0 && (out - 1) * stride >= in + pad) --out;
  return out;
}

std::vector<int64_t> PoolDivisors(const PoolAxis& axis, int64_t out, int64_t lo, int64_t hi) {
  std::vector<int64_t> divisors(static_cast<size_t>(std::max<int64_t>(out, 0)));
  for (int64_t i = 0; i < out; ++i) {
    const int64_t start = i * axis.stride - axis.pad_begin;
    const int64_t end = start + axis.kernel;
    divisors[static_cast<size_t>(i)] =
        std::max<int64_t>(0, std::min(end, hi) - std::max(start, lo));
  }
  return divisors;
}

}  // namespace onnx_io
}  // namespace crema
