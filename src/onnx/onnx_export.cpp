// Caffe net -> ONNX graph. One pass over the built net's layers; each Caffe blob maps to the
// ONNX tensor that holds its current value (in-place layers get a fresh tensor name, since ONNX
// names are single-assignment; Split and Dropout only alias). Shapes come from the built net.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "crema/error.hpp"
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
      if (graph_output_names_.count(name) || IsGraphInput(name)) {
        // An output that is an input (or repeated) still needs a node producing it.
        const std::string alias = Unique(blob + "_out");
        AddNode("Identity", {name}, {alias}, alias);
        name = alias;
      }
      graph_output_names_.insert(name);
      AddValueInfo(graph_->add_output(), name, ToShape(net_.blobs()[id]->shape()));
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
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(Unique(param().name() + "/" + suffix));
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(
        std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
    used_.insert(t->name());
    return t->name();
  }
  std::string AddInt64Initializer(const std::string& suffix, const Shape& values) {
    onnx::TensorProto* t = graph_->add_initializer();
    t->set_name(Unique(param().name() + "/" + suffix));
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(values.size()));
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
