// Caffe net -> ONNX graph. One pass over the built net's layers; each Caffe blob maps to the
// ONNX tensor that holds its current value (in-place layers get a fresh tensor name, since ONNX
// names are single-assignment; Split and Dropout only alias). Shapes come from the built net, so
// PriorBox tops are constants; DetectionOutput's rows have a symbolic count (docs/onnx.md).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/version.hpp"
#include "net/weights_match.hpp"
#include "onnx/onnx.hpp"
#include "onnx/onnx_common.hpp"

namespace crema {
namespace {

using onnx_io::PoolAxis;
using onnx_io::SetAttr;
using Shape = std::vector<int64_t>;

Shape ToShape(const std::vector<int>& dims) { return Shape(dims.begin(), dims.end()); }

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Data, loss and accuracy layers have no place in an inference graph.
bool IsTrainingOnlyType(const std::string& type, int num_bottoms) {
  if (EndsWith(type, "Loss") || type == "Accuracy" || type == "Silence") return true;
  return num_bottoms == 0 && type != "Input" && type != "Parameter";
}

class Exporter {
 public:
  Exporter(const Net& net, const OnnxExportOptions& options, onnx::GraphProto* graph)
      : net_(net), options_(options), graph_(graph) {}

  void Run() {
    graph_->set_name(net_.name().empty() ? "crema" : net_.name());
    for (int i = 0; i < net_.num_layers(); ++i) {
      if (skip_next_) {
        skip_next_ = false;
        continue;
      }
      layer_ = i;
      ExportLayer();
      // Tops take their new tensors only now: a layer's inputs are read before its outputs are
      // named (an in-place layer reads and writes the same blob).
      for (const auto& [blob, tensor] : written_) current_[blob] = tensor;
      written_.clear();
    }
    for (int id : net_.output_blob_indices()) {
      const std::string& blob = net_.blob_names()[id];
      std::string name = current_.at(blob);
      const auto dynamic = dynamic_axes_.find(name);
      if (graph_output_names_.count(name) || IsGraphInput(name) || constants_.count(name)) {
        // An output that is an input (or repeated) still needs a node producing it.
        const std::string alias = Unique(blob + "_out");
        AddNode("Identity", {name}, {alias}, alias);
        name = alias;
      }
      graph_output_names_.insert(name);
      onnx::ValueInfoProto* output = graph_->add_output();
      AddValueInfo(output, name, ToShape(net_.blobs()[id]->shape()));
      if (dynamic != dynamic_axes_.end()) {  // e.g. the number of detections
        output->mutable_type()
            ->mutable_tensor_type()
            ->mutable_shape()
            ->mutable_dim(dynamic->second.first)
            ->set_dim_param(dynamic->second.second);
      }
    }
  }

 private:
  const LayerParameter& param() const { return net_.layers()[layer_]->layer_param(); }
  const std::string& type() const { return param().type(); }
  std::string Where() const { return StrCat("layer \"", param().name(), "\" (", type(), "): "); }
  const Blob& BottomBlob(int j = 0) const { return *net_.bottom_vecs()[layer_][j]; }
  const Blob& TopBlob(int j = 0) const { return *net_.top_vecs()[layer_][j]; }
  Shape BottomShape(int j = 0) const { return ToShape(BottomBlob(j).shape()); }
  Shape TopShape(int j = 0) const { return ToShape(TopBlob(j).shape()); }
  const Blob& Param(int k) const { return *net_.layers()[layer_]->blobs()[k]; }
  int NumParams() const { return static_cast<int>(net_.layers()[layer_]->blobs().size()); }
  int NumBottoms() const { return static_cast<int>(net_.bottom_vecs()[layer_].size()); }
  int NumTops() const { return static_cast<int>(net_.top_vecs()[layer_].size()); }

  std::string In(int j = 0) const {
    return current_.at(net_.blob_names()[net_.bottom_ids(layer_)[j]]);
  }
  // A fresh tensor name for top j (the blob's name when it is still free).
  std::string Out(int j = 0) {
    const std::string& blob = net_.blob_names()[net_.top_id_vec(layer_)[j]];
    const std::string name = Unique(used_.count(blob) ? param().name() : blob);
    written_[blob] = name;
    return name;
  }
  void Alias(int top, const std::string& tensor) {
    written_[net_.blob_names()[net_.top_id_vec(layer_)[top]]] = tensor;
  }
  std::string Unique(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_.count(name); ++k) name = StrCat(base, "_", k);
    used_.insert(name);
    return name;
  }
  bool IsGraphInput(const std::string& name) const {
    for (const auto& input : graph_->input())
      if (input.name() == name) return true;
    return false;
  }

  onnx::NodeProto* AddNode(const std::string& op, const std::vector<std::string>& inputs,
                           const std::vector<std::string>& outputs, const std::string& name) {
    onnx::NodeProto* node = graph_->add_node();
    node->set_op_type(op);
    std::string unique = name;  // node names are a namespace of their own
    for (int k = 1; node_names_.count(unique); ++k) unique = StrCat(name, "_", k);
    node_names_.insert(unique);
    node->set_name(unique);
    for (const std::string& in : inputs) node->add_input(in);
    for (const std::string& out : outputs) node->add_output(out);
    return node;
  }
  // A node named after the layer with an intermediate output; returns that output.
  std::string AddStep(const std::string& op, const std::vector<std::string>& inputs,
                      const std::string& suffix, onnx::NodeProto** node = nullptr) {
    const std::string out = Unique(param().name() + "/" + suffix);
    onnx::NodeProto* n = AddNode(op, inputs, {out}, param().name() + "/" + suffix);
    if (node != nullptr) *node = n;
    return out;
  }

  std::string AddInitializer(const std::string& suffix, const Shape& dims,
                             const std::vector<float>& values) {
    return AddNamedInitializer(Unique(param().name() + "/" + suffix), dims, values);
  }
  // `name` must be unique already (Out() or Unique()).
  std::string AddNamedInitializer(const std::string& name, const Shape& dims,
                                  const std::vector<float>& values) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    used_.insert(t->name());
    return t->name();
  }
  std::string AddInt64Initializer(const std::string& suffix, const Shape& values,
                                  const Shape& dims = {-1}) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(Unique(param().name() + "/" + suffix));
    t->set_data_type(onnx::TensorProto::INT64);
    if (dims == Shape{-1}) {
      t->add_dims(static_cast<int64_t>(values.size()));
    } else {
      for (int64_t d : dims) t->add_dims(d);
    }
    for (int64_t v : values) t->add_int64_data(v);
    used_.insert(t->name());
    return t->name();
  }
  std::string AddScalar(const std::string& suffix, float value) {
    return AddInitializer(suffix, {}, {value});
  }
  std::vector<float> ParamValues(int k) const {
    const Blob& blob = Param(k);
    const float* data = blob.cpu_data<float>();
    return std::vector<float>(data, data + blob.count());
  }
  std::string ParamInitializer(int k, const std::string& suffix, Shape dims = {}) {
    if (dims.empty()) dims = ToShape(Param(k).shape());
    return AddInitializer(suffix, dims, ParamValues(k));
  }

  static void AddValueInfo(onnx::ValueInfoProto* info, const std::string& name,
                           const Shape& shape) {
    info->set_name(name);
    auto* tensor = info->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(onnx::TensorProto::FLOAT);
    auto* dims = tensor->mutable_shape();
    for (int64_t d : shape) dims->add_dim()->set_dim_value(d);
  }

  void ExportLayer() {
    const std::string& t = type();
    if (t == "Input") {
      for (int j = 0; j < NumTops(); ++j) {
        const std::string name = Out(j);
        AddValueInfo(graph_->add_input(), name, TopShape(j));
      }
    } else if (t == "Convolution" || t == "ConvolutionDepthwise" || t == "DepthwiseConvolution" ||
               t == "Deconvolution") {
      Convolution(t == "Deconvolution");
    } else if (t == "InnerProduct") {
      InnerProduct();
    } else if (t == "Pooling") {
      Pooling();
    } else if (t == "ReLU") {
      const float slope = param().relu_param().negative_slope();
      if (slope == 0) {
        AddNode("Relu", {In()}, {Out()}, param().name());
      } else {
        SetAttr(AddNode("LeakyRelu", {In()}, {Out()}, param().name()), "alpha", slope);
      }
    } else if (t == "PReLU") {
      Prelu();
    } else if (t == "Power") {
      const auto& pp = param().power_param();
      Power(In(), pp.power(), pp.scale(), pp.shift(), Out(), param().name());
    } else if (t == "ReLU6") {
      Clip(0.f, 6.f);
    } else if (t == "Clip") {
      Clip(param().clip_param().min(), param().clip_param().max());
    } else if (t == "Sigmoid" || t == "TanH") {
      AddNode(t == "Sigmoid" ? "Sigmoid" : "Tanh", {In()}, {Out()}, param().name());
    } else if (t == "Softmax") {
      const int axis = BottomBlob().CanonicalAxisIndex(param().softmax_param().axis());
      SetAttr(AddNode("Softmax", {In()}, {Out()}, param().name()), "axis", int64_t{axis});
    } else if (t == "LRN") {
      Lrn();
    } else if (t == "Concat") {
      const auto& cp = param().concat_param();
      const int axis =
          BottomBlob().CanonicalAxisIndex(cp.has_concat_dim() ? cp.concat_dim() : cp.axis());
      std::vector<std::string> inputs;
      for (int j = 0; j < NumBottoms(); ++j) inputs.push_back(In(j));
      SetAttr(AddNode("Concat", inputs, {Out()}, param().name()), "axis", int64_t{axis});
    } else if (t == "Eltwise") {
      Eltwise();
    } else if (t == "BatchNorm") {
      BatchNorm();
    } else if (t == "Scale" || t == "Bias") {
      ScaleOrBias(t == "Scale");
    } else if (t == "Dropout") {
      const auto& dp = param().dropout_param();
      if (dp.scale_train()) {
        Alias(0, In());
      } else {  // Caffe scales at test time instead: y = x * (1 - ratio).
        const std::string factor = AddScalar("keep", 1.f - dp.dropout_ratio());
        AddNode("Mul", {In(), factor}, {Out()}, param().name());
      }
    } else if (t == "Split") {
      for (int j = 0; j < NumTops(); ++j) Alias(j, In());
    } else if (t == "Flatten") {
      const int axis = BottomBlob().CanonicalAxisIndex(param().flatten_param().axis());
      const int end = BottomBlob().CanonicalAxisIndex(param().flatten_param().end_axis());
      if (axis == 1 && end == BottomBlob().num_axes() - 1) {
        SetAttr(AddNode("Flatten", {In()}, {Out()}, param().name()), "axis", int64_t{1});
      } else {
        Reshape(TopShape());
      }
    } else if (t == "Reshape") {
      Reshape(TopShape());
    } else if (t == "Permute") {
      Shape perm;
      std::vector<bool> seen(BottomShape().size(), false);
      for (uint32_t a : param().permute_param().order()) {
        perm.push_back(a);
        seen[a] = true;
      }
      for (size_t a = 0; a < seen.size(); ++a)
        if (!seen[a]) perm.push_back(static_cast<int64_t>(a));
      SetAttr(AddNode("Transpose", {In()}, {Out()}, param().name()), "perm", perm);
    } else if (t == "Upsample") {
      Upsample();
    } else if (t == "PriorBox") {
      PriorBox();
    } else if (t == "Normalize") {
      Normalize();
    } else if (t == "DetectionOutput") {
      DetectionOutput();
    } else if (IsTrainingOnlyType(t, NumBottoms())) {
      CREMA_THROW_CONFIG(Where(),
                         "a data, loss or accuracy layer has no ONNX form; pass a deploy "
                         "net (inputs from an Input layer or input: fields, no loss layers)");
    } else {
      CREMA_THROW_CONFIG(Where(), "layer type \"", t,
                         "\" has no ONNX mapping in crema "
                         "(docs/onnx.md lists the supported types)");
    }
  }

  // Conv / ConvTranspose: N-D, weights (and bias) as initializers; pads are symmetric in Caffe.
  void Convolution(bool transposed) {
    const auto& cp = param().convolution_param();
    const Blob& weight = Param(0);
    const int spatial = weight.num_axes() - 2;
    if (BottomBlob().CanonicalAxisIndex(cp.axis()) != 1)
      CREMA_THROW_CONFIG(Where(), "convolution_param.axis must be 1 for ONNX (channels first)");
    auto values = [&](const google::protobuf::RepeatedField<uint32_t>& list, bool has_h, uint32_t h,
                      uint32_t w, int64_t fallback) {
      Shape out(spatial, fallback);
      if (has_h) {
        out = {h, w};
      } else {
        for (int a = 0; a < spatial && list.size() > 0; ++a)
          out[a] = list.size() == 1 ? list.Get(0) : list.Get(a);
      }
      return out;
    };
    const Shape pads1 = values(cp.pad(), cp.has_pad_h(), cp.pad_h(), cp.pad_w(), 0);
    const Shape strides = values(cp.stride(), cp.has_stride_h(), cp.stride_h(), cp.stride_w(), 1);
    const Shape dilations = values(cp.dilation(), false, 0, 0, 1);
    Shape kernel(weight.shape().begin() + 2, weight.shape().end());
    Shape pads = pads1;
    pads.insert(pads.end(), pads1.begin(), pads1.end());
    const int64_t channels = transposed ? TopBlob().shape(1) : BottomBlob().shape(1);
    const int64_t group = channels / weight.shape(1);
    std::vector<std::string> inputs = {In(), ParamInitializer(0, "weight")};
    if (NumParams() > 1) inputs.push_back(ParamInitializer(1, "bias"));
    onnx::NodeProto* node =
        AddNode(transposed ? "ConvTranspose" : "Conv", inputs, {Out()}, param().name());
    SetAttr(node, "kernel_shape", kernel);
    SetAttr(node, "strides", strides);
    SetAttr(node, "pads", pads);
    SetAttr(node, "dilations", dilations);
    SetAttr(node, "group", group);
  }

  // Gemm on the bottom flattened from `axis`; a Reshape restores Caffe's leading axes.
  void InnerProduct() {
    const auto& ip = param().inner_product_param();
    const int axis = BottomBlob().CanonicalAxisIndex(ip.axis());
    std::string x = In();
    if (axis != 1 || BottomBlob().num_axes() != 2) {
      onnx::NodeProto* flatten;
      x = AddStep("Flatten", {x}, "flatten", &flatten);
      SetAttr(flatten, "axis", int64_t{axis});
    }
    std::vector<std::string> inputs = {x, ParamInitializer(0, "weight")};
    if (NumParams() > 1) inputs.push_back(ParamInitializer(1, "bias"));
    if (axis == 1) {
      SetAttr(AddNode("Gemm", inputs, {Out()}, param().name()), "transB",
              int64_t{ip.transpose() ? 0 : 1});
      return;
    }
    onnx::NodeProto* gemm;
    const std::string y = AddStep("Gemm", inputs, "gemm", &gemm);
    SetAttr(gemm, "transB", int64_t{ip.transpose() ? 0 : 1});
    AddNode("Reshape", {y, AddInt64Initializer("shape", TopShape())}, {Out()}, param().name());
  }

  void Reshape(const Shape& shape) {
    AddNode("Reshape", {In(), AddInt64Initializer("shape", shape)}, {Out()}, param().name());
  }

  void Clip(float lo, float hi) {
    AddNode("Clip", {In(), AddScalar("min", lo), AddScalar("max", hi)}, {Out()}, param().name());
  }

  // y = (shift + scale * x)^power as Mul, Add, Pow, each left out when it is the identity; a
  // Power that is the identity altogether is an Identity node.
  void Power(std::string x, float power, float scale, float shift, const std::string& out,
             const std::string& node_name) {
    std::vector<std::pair<std::string, std::string>> steps;  // (op, scalar initializer)
    if (scale != 1.f) steps.emplace_back("Mul", AddScalar("scale", scale));
    if (shift != 0.f) steps.emplace_back("Add", AddScalar("shift", shift));
    if (power != 1.f) steps.emplace_back("Pow", AddScalar("power", power));
    if (steps.empty()) {
      AddNode("Identity", {x}, {out}, node_name);
      return;
    }
    for (size_t i = 0; i + 1 < steps.size(); ++i)
      x = AddStep(steps[i].first, {x, steps[i].second}, StrCat("power", i));
    AddNode(steps.back().first, {x, steps.back().second}, {out}, node_name);
  }

  // ONNX PRelu broadcasts the slope from the right: per-channel slopes get shape (C, 1, ...).
  void Prelu() {
    Shape dims = {1};
    if (!param().prelu_param().channel_shared()) {
      dims = Shape(BottomShape().size() - 1, 1);
      dims[0] = BottomShape()[1];
    }
    AddNode("PRelu", {In(), ParamInitializer(0, "slope", dims)}, {Out()}, param().name());
  }

  void Lrn() {
    const auto& lp = param().lrn_param();
    if (lp.norm_region() == LRNParameter::WITHIN_CHANNEL) {
      // Caffe's composition: x * (1 + alpha * avg(x^2 over the n x n square, zero padded))^-beta,
      // k unused; the average divides by n^2 everywhere (pad (n-1)/2 keeps windows inside).
      if (BottomShape().size() != 4)
        CREMA_THROW_CONFIG(Where(), "ONNX export supports WITHIN_CHANNEL LRN on 4-D blobs only");
      const int64_t n = lp.local_size(), pad = (n - 1) / 2;
      const std::string x = In();
      onnx::NodeProto* pool;
      const std::string avg =
          AddStep("AveragePool", {AddStep("Mul", {x, x}, "square")}, "avg", &pool);
      SetAttr(pool, "kernel_shape", Shape{n, n});
      SetAttr(pool, "pads", Shape{pad, pad, pad, pad});
      SetAttr(pool, "count_include_pad", int64_t{1});
      const std::string out = Out();
      const std::string denominator = Unique(param().name() + "/scale");
      Power(avg, -lp.beta(), lp.alpha(), 1.f, denominator, denominator);
      AddNode("Mul", {x, denominator}, {out}, param().name());
      return;
    }
    // Both divide alpha by the window size: x / (k + alpha / size * sum(x^2))^beta.
    onnx::NodeProto* node = AddNode("LRN", {In()}, {Out()}, param().name());
    SetAttr(node, "size", int64_t{lp.local_size()});
    SetAttr(node, "alpha", lp.alpha());
    SetAttr(node, "beta", lp.beta());
    SetAttr(node, "bias", lp.k());
  }

  void Eltwise() {
    const auto& ep = param().eltwise_param();
    std::vector<std::string> inputs;
    for (int j = 0; j < NumBottoms(); ++j) inputs.push_back(In(j));
    if (ep.operation() == EltwiseParameter::SUM) {
      for (int j = 0; j < ep.coeff_size() && j < NumBottoms(); ++j)
        if (ep.coeff(j) != 1.f)
          inputs[j] = AddStep("Mul", {inputs[j], AddScalar(StrCat("coeff", j), ep.coeff(j))},
                              StrCat("scaled", j));
      AddNode(inputs.size() == 2 ? "Add" : "Sum", inputs, {Out()}, param().name());
    } else if (ep.operation() == EltwiseParameter::MAX) {
      AddNode("Max", inputs, {Out()}, param().name());
    } else {
      std::string acc = inputs[0];
      for (size_t j = 1; j + 1 < inputs.size(); ++j)
        acc = AddStep("Mul", {acc, inputs[j]}, StrCat("prod", j));
      AddNode("Mul", {acc, inputs.back()}, {Out()}, param().name());
    }
  }

  // Caffe keeps sums scaled by blobs[2] (the moving-average factor); ONNX wants the mean and
  // variance themselves. A Scale layer right after, on the same blob, becomes the affine part.
  void BatchNorm() {
    const auto& bp = param().batch_norm_param();
    if (bp.has_use_global_stats() && !bp.use_global_stats())
      CREMA_THROW_CONFIG(Where(),
                         "batch_norm_param.use_global_stats: false normalises with the "
                         "batch's own statistics; ONNX BatchNormalization needs the stored ones");
    const int64_t channels = BottomBlob().num_axes() > 1 ? BottomBlob().shape(1) : 1;
    const float stored = Param(2).cpu_data<float>()[0];
    const float factor = stored == 0 ? 0.f : 1.f / stored;
    std::vector<float> mean = ParamValues(0), var = ParamValues(1);
    for (float& v : mean) v *= factor;
    for (float& v : var) v *= factor;
    std::vector<float> gamma(channels, 1.f), beta(channels, 0.f);
    const std::string bn_name = param().name();
    const std::string x = In();
    int out_layer = layer_;
    if (layer_ + 1 < net_.num_layers()) {
      const Layer& next = *net_.layers()[layer_ + 1];
      const auto& sp = next.layer_param().scale_param();
      if (std::string(next.type()) == "Scale" && net_.bottom_ids(layer_ + 1).size() == 1 &&
          net_.bottom_ids(layer_ + 1)[0] == net_.top_id_vec(layer_)[0] &&
          BottomBlob().CanonicalAxisIndex(sp.axis()) == 1 && sp.num_axes() == 1) {
        const float* g = next.blobs()[0]->cpu_data<float>();
        gamma.assign(g, g + channels);
        if (next.blobs().size() > 1) {
          const float* b = next.blobs()[1]->cpu_data<float>();
          beta.assign(b, b + channels);
        }
        out_layer = layer_ + 1;
        skip_next_ = true;
      }
    }
    const std::vector<std::string> inputs = {
        x, AddInitializer("scale", {channels}, gamma), AddInitializer("bias", {channels}, beta),
        AddInitializer("mean", {channels}, mean), AddInitializer("var", {channels}, var)};
    layer_ = out_layer;  // the fused Scale's top names the output
    onnx::NodeProto* node = AddNode("BatchNormalization", inputs, {Out()}, bn_name);
    SetAttr(node, "epsilon", bp.eps());
  }

  // Scale: x * gamma (+ beta); Bias: x + beta. The factor spans axes [axis, axis + num_axes) of
  // x; trailing 1s make ONNX's right-aligned broadcasting line it up.
  void ScaleOrBias(bool scale) {
    const int axis = BottomBlob().CanonicalAxisIndex(scale ? param().scale_param().axis()
                                                           : param().bias_param().axis());
    const int rank = BottomBlob().num_axes();
    auto broadcast_shape = [&](const std::vector<int>& dims) {
      Shape shape = ToShape(dims);
      shape.resize(static_cast<size_t>(rank - axis), 1);
      return shape;
    };
    std::string factor;
    int next_param = 0;
    if (NumBottoms() == 2) {
      factor = AddStep(
          "Reshape", {In(1), AddInt64Initializer("shape", broadcast_shape(BottomBlob(1).shape()))},
          "factor");
    } else {
      factor = ParamInitializer(0, scale ? "scale" : "bias", broadcast_shape(Param(0).shape()));
      next_param = 1;
    }
    if (!scale) {
      AddNode("Add", {In(), factor}, {Out()}, param().name());
      return;
    }
    if (NumParams() > next_param) {
      const std::string y = AddStep("Mul", {In(), factor}, "scaled");
      const std::string bias =
          ParamInitializer(next_param, "bias", broadcast_shape(Param(next_param).shape()));
      AddNode("Add", {y, bias}, {Out()}, param().name());
    } else {
      AddNode("Mul", {In(), factor}, {Out()}, param().name());
    }
  }

  // Caffe's windows (ceil rounding, last window starting inside input + pad) are written as
  // explicit end padding with floor rounding, so no runtime's ceil_mode convention matters.
  void Pooling() {
    const auto& pp = param().pooling_param();
    if (pp.pool() == PoolingParameter::STOCHASTIC)
      CREMA_THROW_CONFIG(Where(), "pooling_param.pool STOCHASTIC has no ONNX operator");
    const bool max = pp.pool() == PoolingParameter::MAX;
    const Shape in = BottomShape(), out = TopShape();
    if (in.size() != 4) CREMA_THROW_CONFIG(Where(), "ONNX export supports 2-D pooling only");
    if (pp.global_pooling()) {
      AddNode(max ? "GlobalMaxPool" : "GlobalAveragePool", {In()}, {Out()}, param().name());
      return;
    }
    const int64_t kernel[2] = {pp.has_kernel_h() ? pp.kernel_h() : pp.kernel_size(),
                               pp.has_kernel_w() ? pp.kernel_w() : pp.kernel_size()};
    const int64_t pad[2] = {pp.has_pad_h() ? pp.pad_h() : pp.pad(),
                            pp.has_pad_w() ? pp.pad_w() : pp.pad()};
    const int64_t stride[2] = {pp.has_stride_h() ? pp.stride_h() : pp.stride(),
                               pp.has_stride_w() ? pp.stride_w() : pp.stride()};
    int64_t pad_end[2];
    bool overflow = false;  // a window runs past the padded input: Caffe averages fewer values
    for (int a = 0; a < 2; ++a) {
      const int64_t h = in[2 + a], o = out[2 + a];
      pad_end[a] = std::max<int64_t>(0, (o - 1) * stride[a] + kernel[a] - h - pad[a]);
      if (pad_end[a] >= kernel[a])
        CREMA_THROW_CONFIG(Where(), "the last pooling window lies in the padding (input ", h,
                           ", kernel ", kernel[a], ", stride ", stride[a], ")");
      if (pad_end[a] > pad[a]) overflow = true;
    }
    std::string x = In();
    Shape pads = {pad[0], pad[1], pad_end[0], pad_end[1]};
    int64_t count_include_pad = 1;
    if (!max && overflow) {
      // Divisor = window clipped to the input padded by `pad`: pad with zeros explicitly, then
      // average over the real (zero-padded) values only.
      if (pad[0] > 0 || pad[1] > 0) {
        x = AddStep("Pad",
                    {x, AddInt64Initializer("pads", {0, 0, pad[0], pad[1], 0, 0, pad[0], pad[1]})},
                    "pad");
      }
      pads = {0, 0, std::max<int64_t>(0, pad_end[0] - pad[0]),
              std::max<int64_t>(0, pad_end[1] - pad[1])};
      count_include_pad = 0;
    }
    onnx::NodeProto* node = AddNode(max ? "MaxPool" : "AveragePool", {x}, {Out()}, param().name());
    SetAttr(node, "kernel_shape", Shape{kernel[0], kernel[1]});
    SetAttr(node, "strides", Shape{stride[0], stride[1]});
    SetAttr(node, "pads", pads);
    if (!max) SetAttr(node, "count_include_pad", count_include_pad);
  }

  void Upsample() {
    const auto& up = param().upsample_param();
    const Shape in = BottomShape(), out = TopShape();
    if (in.size() != 4) CREMA_THROW_CONFIG(Where(), "ONNX export supports 4-D Upsample only");
    const bool nearest = up.mode() == UpsampleParameter::NEAREST;
    if (nearest && (out[2] % in[2] != 0 || out[3] % in[3] != 0))
      CREMA_THROW_CONFIG(Where(), "NEAREST upsampling to ", out[2], "x", out[3], " from ", in[2],
                         "x", in[3],
                         " is not by whole factors; ONNX Resize would round "
                         "differently");
    const std::string sizes = AddInt64Initializer("sizes", out);
    onnx::NodeProto* node = AddNode("Resize", {In(), "", "", sizes}, {Out()}, param().name());
    if (nearest) {
      SetAttr(node, "mode", std::string("nearest"));
      SetAttr(node, "coordinate_transformation_mode", std::string("asymmetric"));
      SetAttr(node, "nearest_mode", std::string("floor"));
    } else {
      SetAttr(node, "mode", std::string("linear"));
      SetAttr(node, "coordinate_transformation_mode",
              std::string(up.align_corners() ? "align_corners" : "pytorch_half_pixel"));
    }
  }

  // The boxes depend only on the shapes of the bottoms (fixed in the exported graph), so they
  // are computed once by crema's own PriorBox and written as a constant.
  void PriorBox() {
    std::unique_ptr<Layer> layer = LayerRegistry::Create(param());
    std::vector<std::unique_ptr<Blob>> scratch;
    BlobVec bottom;
    for (int j = 0; j < NumBottoms(); ++j) {
      scratch.push_back(std::make_unique<Blob>(BottomBlob(j).shape()));
      bottom.push_back(scratch.back().get());
    }
    Blob top;
    layer->SetUp(bottom, {&top});
    layer->Forward(bottom, {&top});
    const float* data = top.cpu_data<float>();
    const std::string name = Out();
    AddNamedInitializer(name, ToShape(top.shape()), std::vector<float>(data, data + top.count()));
    constants_.insert(name);
  }

  // y = scale * x / sqrt(sum x^2 + eps): the sum over the channels of each position, or over
  // all of an item's values with across_spatial; one scale, or one per channel.
  void Normalize() {
    const auto& np = param().norm_param();
    const int rank = BottomBlob().num_axes();
    Shape axes = {1};
    if (np.across_spatial())
      for (int a = 2; a < rank; ++a) axes.push_back(a);
    const std::string x = In();
    onnx::NodeProto* reduce;
    std::string sum;
    if (options_.opset >= 18) {
      sum = AddStep("ReduceSumSquare", {x, AddInt64Initializer("axes", axes)}, "sum", &reduce);
    } else {
      sum = AddStep("ReduceSumSquare", {x}, "sum", &reduce);
      SetAttr(reduce, "axes", axes);
    }
    SetAttr(reduce, "keepdims", int64_t{1});
    const std::string norm = AddStep(
        "Sqrt", {AddStep("Add", {sum, AddScalar("eps", static_cast<float>(np.eps()))}, "sum_eps")},
        "norm");
    const std::string normalized = AddStep("Div", {x, norm}, "normalized");
    Shape dims;  // a scalar, or (C, 1, ...) to broadcast over the axes after C
    if (!np.channel_shared()) {
      dims.assign(static_cast<size_t>(rank - 1), 1);
      dims[0] = BottomShape()[1];
    }
    AddNode("Mul", {normalized, ParamInitializer(0, "scale", dims)}, {Out()}, param().name());
  }

  // Decode (code_type, with the priors' variances), per-class greedy NMS (ONNX
  // NonMaxSuppression, with Caffe's top_k applied before it by masking), keep_top_k per image,
  // rows [image, label, score, xmin, ymin, xmax, ymax] in crema's order; docs/onnx.md "SSD nets".
  void DetectionOutput() {
    const auto& dp = param().detection_output_param();
    const auto& nms = dp.nms_param();
    if (!dp.share_location())
      CREMA_THROW_CONFIG(
          Where(),
          "detection_output_param.share_location: false (one box per class) has "
          "no ONNX form in crema: NonMaxSuppression shares the boxes across classes");
    if (nms.eta() != 1.f)
      CREMA_THROW_CONFIG(
          Where(), "detection_output_param.nms_param.eta ", nms.eta(),
          " (adaptive NMS) has no ONNX form: NonMaxSuppression's threshold is fixed");
    const int64_t num = BottomShape(0)[0];
    const int64_t classes = dp.num_classes();
    const int64_t priors = BottomShape(2).back() / 4;
    const std::vector<std::string> box = DecodeBoxes(dp, num, priors);  // (N, P, 1) each
    const std::string decoded = AddStepWith("Concat", box, "decoded", "axis", int64_t{2});
    // NonMaxSuppression reads [y1, x1, y2, x2] (center_point_box 0) and orders each pair itself;
    // crema's Jaccard gives an inverted box (xmax < xmin or ymax < ymin) no overlap with any box,
    // so such a box gets zero width (x2 = x1), which has none in NonMaxSuppression either.
    // CENTER_SIZE boxes are never inverted.
    std::string nms_xmax = box[2];
    if (dp.code_type() != PriorBoxParameter::CENTER_SIZE) {
      const std::string inverted = AddStep("Or",
                                           {AddStep("Less", {box[2], box[0]}, "x_inverted"),
                                            AddStep("Less", {box[3], box[1]}, "y_inverted")},
                                           "inverted");
      nms_xmax = AddStep("Where", {inverted, box[0], box[2]}, "nms_xmax");
    }
    const std::string yx_boxes =
        AddStepWith("Concat", {box[1], box[0], box[3], nms_xmax}, "yx_boxes", "axis", int64_t{2});

    // Scores (N, C, P); the background class and, with top_k, every score outside its class's
    // top_k (ties: the lower prior index first, as Caffe's stable sort) become -inf.
    const std::string scores = AddStepWith(
        "Transpose",
        {AddStep("Reshape", {In(1), AddInt64Initializer("conf_shape", {num, priors, classes})},
                 "conf")},
        "scores", "perm", Shape{0, 2, 1});
    std::vector<float> class_valid(classes, 1.f);
    if (dp.background_label_id() >= 0 && dp.background_label_id() < classes)
      class_valid[dp.background_label_id()] = 0.f;
    std::string keep = AddInitializer("class_valid", {1, classes, 1}, class_valid);
    if (nms.has_top_k() && nms.top_k() >= 0 && nms.top_k() < priors) {
      onnx::NodeProto* top_k_node;
      const std::string top_values = Unique(param().name() + "/top_k_values");
      const std::string top_indices = Unique(param().name() + "/top_k_indices");
      top_k_node = AddNode("TopK", {scores, AddInt64Initializer("top_k", {nms.top_k()})},
                           {top_values, top_indices}, param().name() + "/top_k");
      SetAttr(top_k_node, "axis", int64_t{2});
      auto filled = [&](float value, int64_t last, const std::string& suffix) {
        return AddStep("Expand",
                       {AddScalar(suffix + "_value", value),
                        AddInt64Initializer(suffix + "_shape", {num, classes, last})},
                       suffix);
      };
      const std::string in_top_k =
          AddStepWith("ScatterElements",
                      {filled(0.f, priors, "zeros"), top_indices, filled(1.f, nms.top_k(), "ones")},
                      "in_top_k", "axis", int64_t{2});
      keep = AddStep("Mul", {keep, in_top_k}, "keep");
    }
    const std::string masked =
        AddStep("Where",
                {AddStep("Greater", {keep, AddScalar("half_mask", 0.5f)}, "keep_mask"), scores,
                 AddScalar("minus_inf", -std::numeric_limits<float>::infinity())},
                "masked_scores");
    const float score_threshold =
        dp.has_confidence_threshold() ? dp.confidence_threshold() : -FLT_MAX;
    onnx::NodeProto* nms_node;
    const std::string selected =
        AddStep("NonMaxSuppression",
                {yx_boxes, masked, AddInt64Initializer("max_boxes", {priors}),
                 AddInitializer("iou_threshold", {1}, {std::min(nms.nms_threshold(), 1.f)}),
                 AddInitializer("score_threshold", {1}, {score_threshold})},
                "selected", &nms_node);
    SetAttr(nms_node, "center_point_box", int64_t{0});

    // selected (S, 3) = [image, class, prior], images then classes ascending, each class best
    // first: crema's order before keep_top_k.
    auto column = [&](int64_t k, const std::string& suffix) {
      return AddStepWith("Gather", {selected, AddInt64Initializer(suffix + "_column", {k})}, suffix,
                         "axis", int64_t{1});
    };
    const std::string image = column(0, "image"), label = column(1, "label");
    const std::string score = AddStep("GatherND", {scores, selected}, "score");  // (S)
    const std::string kept_boxes = AddStep(
        "GatherND",
        {decoded,
         AddStepWith("Concat", {image, column(2, "prior")}, "image_prior", "axis", int64_t{1})},
        "kept_boxes");
    std::string rows = AddStepWith(
        "Concat",
        {CastTo(image, onnx::TensorProto::FLOAT, "image_f"),
         CastTo(label, onnx::TensorProto::FLOAT, "label_f"),
         AddStep("Unsqueeze", {score, AddInt64Initializer("axis1", {1})}, "score_column"),
         kept_boxes},
        "rows", "axis", int64_t{1});
    if (dp.keep_top_k() >= 0) rows = KeepTopK(rows, image, score, dp.keep_top_k(), num);
    // No row at all: crema's placeholder, one row [i, -1, ...] per image.
    std::vector<float> placeholder(num * 7, -1.f);
    for (int64_t i = 0; i < num; ++i) placeholder[i * 7] = static_cast<float>(i);
    const std::string num_rows =
        AddStep("Slice",
                {AddStep("Shape", {rows}, "rows_shape"), AddInt64Initializer("first", {0}),
                 AddInt64Initializer("first_end", {1})},
                "num_rows");
    const std::string none =
        CastTo(AddStep("Equal", {num_rows, AddInt64Initializer("no_rows", {0})}, "none_kept"),
               onnx::TensorProto::INT64, "none_kept_count");
    const std::string extra = AddStep(
        "Slice",
        {AddInitializer("placeholder", {num, 7}, placeholder), AddInt64Initializer("starts", {0}),
         AddStep("Mul", {none, AddInt64Initializer("num", {num})}, "placeholder_rows"),
         AddInt64Initializer("slice_axes", {0})},
        "placeholder_used");
    const std::string all_rows =
        AddStepWith("Concat", {rows, extra}, "all_rows", "axis", int64_t{0});
    const std::string out = Out();
    AddNode("Reshape", {all_rows, AddInt64Initializer("out_shape", {1, 1, -1, 7})}, {out},
            param().name());
    dynamic_axes_[out] = {2, out + "_count"};
  }

  // DetectionOutput's decoding of the loc bottom against the priors: xmin, ymin, xmax, ymax,
  // each (N, P, 1), in crema's float steps (boxes::Decode).
  std::vector<std::string> DecodeBoxes(const DetectionOutputParameter& dp, int64_t num,
                                       int64_t priors) {
    // Priors (P, 4) and variances (P, 4); predictions t (N, P, 1) each.
    const std::string prior =
        AddStep("Reshape", {In(2), AddInt64Initializer("prior_shape", {2, priors, 4})}, "prior");
    const auto p =
        Split4(AddStep("Gather", {prior, AddInt64Initializer("zero", {0}, {})}, "boxes"), 1, "p");
    const auto t = Split4(
        AddStep("Reshape", {In(0), AddInt64Initializer("loc_shape", {num, priors, 4})}, "loc"), 2,
        "t");
    std::vector<std::string> vt = t;  // v * t; v = 1 (nothing to multiply) when in the target
    if (!dp.variance_encoded_in_target()) {
      const auto v = Split4(
          AddStep("Gather", {prior, AddInt64Initializer("one", {1}, {})}, "variance"), 1, "v");
      for (int k = 0; k < 4; ++k) vt[k] = AddStep("Mul", {v[k], t[k]}, StrCat("vt", k));
    }
    std::vector<std::string> box(4);  // xmin, ymin, xmax, ymax
    if (dp.code_type() == PriorBoxParameter::CORNER) {
      for (int k = 0; k < 4; ++k) box[k] = AddStep("Add", {p[k], vt[k]}, StrCat("box", k));
    } else {
      const std::string width = AddStep("Sub", {p[2], p[0]}, "prior_width");
      const std::string height = AddStep("Sub", {p[3], p[1]}, "prior_height");
      const std::string size[4] = {width, height, width, height};
      if (dp.code_type() == PriorBoxParameter::CORNER_SIZE) {
        for (int k = 0; k < 4; ++k)
          box[k] = AddStep("Add", {p[k], AddStep("Mul", {vt[k], size[k]}, StrCat("offset", k))},
                           StrCat("box", k));
      } else {
        const std::string half = AddScalar("half", 0.5f);
        for (int k = 0; k < 2; ++k) {
          const std::string prior_center =
              AddStep("Mul", {AddStep("Add", {p[k], p[k + 2]}, StrCat("prior_sum", k)), half},
                      StrCat("prior_center", k));
          const std::string center =
              AddStep("Add", {AddStep("Mul", {vt[k], size[k]}, StrCat("shift", k)), prior_center},
                      StrCat("center", k));
          const std::string half_size =
              AddStep("Mul",
                      {AddStep("Mul", {AddStep("Exp", {vt[k + 2]}, StrCat("exp", k)), size[k]},
                               StrCat("size", k)),
                       half},
                      StrCat("half_size", k));
          box[k] = AddStep("Sub", {center, half_size}, StrCat("box", k));
          box[k + 2] = AddStep("Add", {center, half_size}, StrCat("box", k + 2));
        }
      }
    }
    return box;
  }

  // At most keep_top_k rows (S, 7) per image, by score across classes, in row order. image (S, 1)
  // and score (S) are the rows' image index and score.
  std::string KeepTopK(const std::string& rows, const std::string& image, const std::string& score,
                       int64_t keep_top_k, int64_t num) {
    const std::string count = AddStep("Shape", {score}, "count");  // (1): S
    if (num == 1) {
      // The keep_top_k best scores (ties: earlier rows first, as Caffe's stable sort), put
      // back into row order (labels ascending, then score).
      const std::string k =
          AddStep("Min", {count, AddInt64Initializer("keep_top_k", {keep_top_k})}, "k");
      const std::string best_values = Unique(param().name() + "/best_values");
      const std::string best = Unique(param().name() + "/best");
      AddNode("TopK", {score, k}, {best_values, best}, param().name() + "/keep_top_k");
      const std::string order_values = Unique(param().name() + "/order");
      const std::string order_indices = Unique(param().name() + "/order_indices");
      SetAttr(
          AddNode("TopK", {best, k}, {order_values, order_indices}, param().name() + "/row_order"),
          "largest", int64_t{0});
      return AddStep("Gather", {rows, order_values}, "kept_rows");
    } else {
      // Per image: a row's rank = the rows of its image with a higher score, or an equal score
      // and an earlier position (Caffe's stable sort); rows ranked below keep_top_k stay.
      auto unsqueeze = [&](const std::string& x, int64_t axis, const std::string& suffix) {
        return AddStep("Unsqueeze", {x, AddInt64Initializer(suffix + "_axis", {axis})}, suffix);
      };
      const std::string same = AddStep(
          "Equal", {image, AddStepWith("Transpose", {image}, "image_row", "perm", Shape{1, 0})},
          "same_image");
      const std::string score_column = unsqueeze(score, 1, "score_i");
      const std::string score_row = unsqueeze(score, 0, "score_j");
      const std::string position = AddStep(
          "Range",
          {AddInt64Initializer("range_start", {0}, {}),
           AddStep("Squeeze", {count, AddInt64Initializer("count_axis", {0})}, "count_scalar"),
           AddInt64Initializer("range_step", {1}, {})},
          "position");
      const std::string earlier = AddStep(
          "Less", {unsqueeze(position, 0, "position_j"), unsqueeze(position, 1, "position_i")},
          "earlier");
      const std::string ahead = AddStep(
          "And",
          {same,
           AddStep("Or",
                   {AddStep("Greater", {score_row, score_column}, "higher"),
                    AddStep("And", {AddStep("Equal", {score_row, score_column}, "tied"), earlier},
                            "tied_earlier")},
                   "better")},
          "ahead");
      onnx::NodeProto* sum;
      const std::string rank = AddStep("ReduceSum",
                                       {CastTo(ahead, onnx::TensorProto::INT64, "ahead_count"),
                                        AddInt64Initializer("rank_axes", {1})},
                                       "rank", &sum);
      SetAttr(sum, "keepdims", int64_t{0});
      return AddStepWith(
          "Compress",
          {rows, AddStep("Less", {rank, AddInt64Initializer("keep_top_k", {keep_top_k})},
                         "within_keep_top_k")},
          "kept_rows", "axis", int64_t{0});
    }
  }

  // AddStep with one attribute.
  template <typename T>
  std::string AddStepWith(const std::string& op, const std::vector<std::string>& inputs,
                          const std::string& suffix, const std::string& attr, T value) {
    onnx::NodeProto* node;
    const std::string out = AddStep(op, inputs, suffix, &node);
    SetAttr(node, attr, value);
    return out;
  }
  std::string CastTo(const std::string& x, int64_t to, const std::string& suffix) {
    return AddStepWith("Cast", {x}, suffix, "to", to);
  }
  // x split into 4 equal parts along `axis`.
  std::vector<std::string> Split4(const std::string& x, int64_t axis, const std::string& suffix) {
    std::vector<std::string> parts;
    for (int k = 0; k < 4; ++k) parts.push_back(Unique(StrCat(param().name(), "/", suffix, k)));
    SetAttr(AddNode("Split", {x, AddInt64Initializer("split", {1, 1, 1, 1})}, parts,
                    param().name() + "/" + suffix),
            "axis", axis);
    return parts;
  }

  const Net& net_;
  OnnxExportOptions options_;
  onnx::GraphProto* graph_;
  int layer_ = 0;
  bool skip_next_ = false;
  std::map<std::string, std::string> current_;  // Caffe blob -> ONNX tensor holding it now
  std::map<std::string, std::string> written_;  // the same for the current layer's tops
  std::set<std::string> used_;                  // ONNX tensor names taken
  std::set<std::string> node_names_;
  std::set<std::string> graph_output_names_;
  std::set<std::string> constants_;  // initializers that stand for a layer's top
  std::map<std::string, std::pair<int, std::string>> dynamic_axes_;  // tensor -> (axis, dim_param)
};

}  // namespace

void ExportOnnx(const NetParameter& deploy, const std::vector<std::string>& weights,
                const std::string& source, const OnnxExportOptions& options,
                onnx::ModelProto* model) {
  OnnxIrVersionForOpset(options.opset);  // a bad opset fails before the net is built
  NetParameter filtered;
  NetParameter test_param = deploy;
  test_param.mutable_state()->set_phase(TEST);
  FilterNet(test_param, &filtered);
  for (const LayerParameter& layer : filtered.layer())
    if (IsTrainingOnlyType(layer.type(), layer.bottom_size()))
      CREMA_THROW_CONFIG(source, ": layer \"", layer.name(), "\" (", layer.type(),
                         "): a data, loss or accuracy layer has no ONNX form; pass a deploy net "
                         "(inputs from an Input layer or input: fields, no loss layers)");
  NetOptions net_options;
  net_options.override_state = true;
  net_options.state.set_phase(TEST);
  net_options.verbose = false;
  Net net(deploy, net_options);
  for (const std::string& path : weights) CopyWeightsRequiringAMatch(&net, path);
  ExportOnnx(net, options, model);
}

void ExportOnnx(const Net& net, const OnnxExportOptions& options, onnx::ModelProto* model) {
  const int ir_version = OnnxIrVersionForOpset(options.opset);
  model->Clear();
  model->set_ir_version(ir_version);
  model->set_producer_name("crema");
  model->set_producer_version(VersionString());
  onnx::OperatorSetIdProto* opset = model->add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  Exporter(net, options, model->mutable_graph()).Run();
}

void ExportOnnxFile(const std::string& model_path, const std::vector<std::string>& weights,
                    const std::string& out_path, const OnnxExportOptions& options) {
  NetParameter deploy;
  ReadNetParamsFromTextFile(model_path, &deploy);
  onnx::ModelProto model;
  ExportOnnx(deploy, weights, model_path, options, &model);
  WriteBinaryProto(model, out_path);
}

}  // namespace crema
