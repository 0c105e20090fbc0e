// ONNX graph -> Caffe net. Nodes are read in order (ONNX requires topological order), shapes are
// propagated alongside (pooling and broadcasting need them), and each node becomes zero (alias,
// constant, folded Pad), one or two Caffe layers. Weights go into the layers' blobs, which are
// moved into the weights NetParameter at the end.
#include <glog/logging.h>

#include <algorithm>
#include <cfloat>
#include <cstring>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto_io.hpp"
#include "onnx/onnx.hpp"
#include "onnx/onnx_common.hpp"

namespace crema {
namespace {

using onnx_io::FindAttr;
using onnx_io::PoolAxis;
// Dimensions and attribute lists with checked indexing: a malformed graph (a dimension, input or
// attribute value missing) throws std::out_of_range, which Run turns into a ConfigError naming
// the node.
struct Shape : std::vector<int64_t> {
  using std::vector<int64_t>::vector;
  Shape(const std::vector<int64_t>& values) : std::vector<int64_t>(values) {}  // NOLINT
  int64_t& operator[](size_t i) { return at(i); }
  const int64_t& operator[](size_t i) const { return at(i); }
};

struct Constant {
  Shape dims;
  std::vector<double> values;
};

// -1 when a dimension is negative or the product overflows int64.
int64_t Count(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

std::string ShapeText(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + ")";
}

template <typename T>
std::vector<double> FromRaw(const std::string& raw) {
  std::vector<T> typed(raw.size() / sizeof(T));
  std::memcpy(typed.data(), raw.data(), typed.size() * sizeof(T));
  return std::vector<double>(typed.begin(), typed.end());
}

// Float, double and integer tensors, stored in typed fields or raw_data.
Constant DecodeTensor(const onnx::TensorProto& t, const std::string& where) {
  Constant c;
  c.dims.assign(t.dims().begin(), t.dims().end());
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    CREMA_THROW_CONFIG(where, "tensor \"", t.name(),
                       "\" keeps its data in an external file; "
                       "save the model with the weights inside (onnx.save_model(..., "
                       "save_as_external_data=False))");
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      c.values = raw ? FromRaw<float>(t.raw_data())
                     : std::vector<double>(t.float_data().begin(), t.float_data().end());
      break;
    case onnx::TensorProto::DOUBLE:
      c.values = raw ? FromRaw<double>(t.raw_data())
                     : std::vector<double>(t.double_data().begin(), t.double_data().end());
      break;
    case onnx::TensorProto::INT64:
      c.values = raw ? FromRaw<int64_t>(t.raw_data())
                     : std::vector<double>(t.int64_data().begin(), t.int64_data().end());
      break;
    case onnx::TensorProto::INT32:
      c.values = raw ? FromRaw<int32_t>(t.raw_data())
                     : std::vector<double>(t.int32_data().begin(), t.int32_data().end());
      break;
    default:
      CREMA_THROW_CONFIG(where, "tensor \"", t.name(), "\" has data type ", t.data_type(),
                         "; crema reads float, double, int32 and int64 tensors");
  }
  if (Count(c.dims) < 0)
    CREMA_THROW_CONFIG(where, "tensor \"", t.name(), "\" has a negative dimension or more than ",
                       "2^63 elements: shape ", ShapeText(c.dims));
  if (static_cast<int64_t>(c.values.size()) != Count(c.dims))
    CREMA_THROW_CONFIG(where, "tensor \"", t.name(), "\" holds ", c.values.size(),
                       " values for shape ", ShapeText(c.dims));
  return c;
}

int64_t IntAttr(const onnx::NodeProto& node, const char* name, int64_t fallback) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a == nullptr ? fallback : a->i();
}
float FloatAttr(const onnx::NodeProto& node, const char* name, float fallback) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a == nullptr ? fallback : a->f();
}
std::string StringAttr(const onnx::NodeProto& node, const char* name, const std::string& fallback) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a == nullptr ? fallback : a->s();
}
Shape IntsAttr(const onnx::NodeProto& node, const char* name, const Shape& fallback) {
  const onnx::AttributeProto* a = FindAttr(node, name);
  return a == nullptr ? fallback : Shape(a->ints().begin(), a->ints().end());
}

// Sets a repeated spatial field: nothing when every value is the default, one value when all
// are equal, else one per axis.
void SetSpatial(google::protobuf::RepeatedField<uint32_t>* field, const Shape& values,
                int64_t fallback) {
  const bool all_equal =
      std::all_of(values.begin(), values.end(), [&](int64_t v) { return v == values[0]; });
  if (all_equal && values[0] == fallback) return;
  if (all_equal) {
    field->Add(static_cast<uint32_t>(values[0]));
  } else {
    for (int64_t v : values) field->Add(static_cast<uint32_t>(v));
  }
}

void FillBlob(BlobProto* blob, const Shape& dims, const std::vector<double>& values) {
  blob->mutable_shape();  // set even for a scalar (no dims)
  for (int64_t d : dims) blob->mutable_shape()->add_dim(d);
  for (double v : values) blob->add_data(static_cast<float>(v));
}

class Importer {
 public:
  Importer(const onnx::ModelProto& model, const std::string& source, NetParameter* deploy)
      : graph_(model.graph()), source_(source), deploy_(deploy) {
    for (const auto& opset : model.opset_import())
      if (opset.domain().empty() || opset.domain() == "ai.onnx") opset_ = opset.version();
  }

  void Run() {
    deploy_->set_name(graph_.name());
    for (const onnx::TensorProto& t : graph_.initializer())
      constants_[t.name()] = DecodeTensor(t, source_ + ": ");
    for (const onnx::NodeProto& node : graph_.node())
      for (const std::string& in : node.input()) consumers_[in].push_back(&node);
    for (const onnx::ValueInfoProto& input : graph_.input())
      if (!constants_.count(input.name())) AddInput(input);
    for (const onnx::NodeProto& node : graph_.node()) {
      node_ = &node;
      if (node.output_size() == 0 || node.output(0).empty())
        CREMA_THROW_CONFIG(Where(), "the node has no output");
      for (const std::string& output : node.output()) {
        if (!output.empty() && (blob_.count(output) || constants_.count(output)))
          CREMA_THROW_CONFIG(Where(), "output \"", output, "\" is already defined by an ",
                             "earlier node, input or initializer (ONNX assigns each tensor once)");
      }
      try {
        ImportNode();
      } catch (const std::out_of_range&) {
        CREMA_THROW_CONFIG(Where(), "malformed node: an input, a dimension or an attribute ",
                           "value it needs is missing");
      }
    }
    for (const onnx::ValueInfoProto& output : graph_.output())
      if (!blob_.count(output.name()))
        CREMA_THROW_CONFIG(source_, ": graph output \"", output.name(),
                           "\" is not computed by any node crema imported");
  }

 private:
  const onnx::NodeProto& node() const { return *node_; }
  const std::string& op() const { return node_->op_type(); }
  std::string Where() const {
    return StrCat(source_, ": node \"", node().name(), "\" (", op(), "): ");
  }
  bool IsConst(int j) const {
    return j < node().input_size() && constants_.count(node().input(j)) > 0;
  }
  bool HasInput(int j) const { return j < node().input_size() && !node().input(j).empty(); }
  const Constant& Const(int j) const {
    if (!IsConst(j))
      CREMA_THROW_CONFIG(Where(), "input ", j, " (\"",
                         j < node().input_size() ? node().input(j) : "",
                         "\") must be a constant (an initializer) for a Caffe layer");
    return constants_.at(node().input(j));
  }
  const std::string& Blob(int j = 0) const {
    if (j >= node().input_size() || !blob_.count(node().input(j)))
      CREMA_THROW_CONFIG(Where(), "input ", j, " is not a tensor computed by the graph");
    return blob_.at(node().input(j));
  }
  const Shape& InShape(int j = 0) const {
    Blob(j);  // a ConfigError when input j is not computed by the graph
    return shape_.at(node().input(j));
  }
  int Rank(int j = 0) const { return static_cast<int>(InShape(j).size()); }
  int Axis(int64_t axis, int rank) const {
    if (axis < -rank || axis >= rank)
      CREMA_THROW_CONFIG(Where(), "axis ", axis, " is out of range for rank ", rank);
    return static_cast<int>(axis < 0 ? axis + rank : axis);
  }

  std::string UniqueLayerName(const std::string& base) {
    std::string name = base;
    for (int k = 1; layer_names_.count(name); ++k) name = StrCat(base, "_", k);
    layer_names_.insert(name);
    return name;
  }

  // A layer reading `bottoms` and writing node output 0 (or `top` when given) of shape `shape`.
  LayerParameter* AddLayer(const std::string& type, const std::vector<std::string>& bottoms,
                           const Shape& shape, const std::string& top_tensor = "") {
    const std::string tensor = top_tensor.empty() ? node().output(0) : top_tensor;
    LayerParameter* layer = deploy_->add_layer();
    const std::string base = !node().name().empty() && top_tensor.empty() ? node().name() : tensor;
    layer->set_name(UniqueLayerName(base));
    layer->set_type(type);
    for (const std::string& b : bottoms) layer->add_bottom(b);
    layer->add_top(tensor);
    blob_[tensor] = tensor;
    shape_[tensor] = shape;
    return layer;
  }
  void Alias(const std::string& tensor, const std::string& input) {
    blob_[tensor] = blob_.at(input);
    shape_[tensor] = shape_.at(input);
  }

  void AddInput(const onnx::ValueInfoProto& input) {
    Shape shape;
    for (const auto& dim : input.type().tensor_type().shape().dim()) {
      if (dim.has_dim_value()) {
        shape.push_back(dim.dim_value());
      } else if (shape.empty()) {
        LOG(WARNING) << "input \"" << input.name() << "\": batch dimension \"" << dim.dim_param()
                     << "\" is symbolic; the Input layer uses 1 (reshape it with --input)";
        shape.push_back(1);
      } else {
        CREMA_THROW_CONFIG(source_, ": graph input \"", input.name(), "\" has a symbolic ",
                           "dimension ", shape.size(), "; Caffe's Input layer needs fixed sizes");
      }
    }
    LayerParameter* layer = deploy_->add_layer();
    layer->set_name(UniqueLayerName(input.name()));
    layer->set_type("Input");
    layer->add_top(input.name());
    BlobShape* bs = layer->mutable_input_param()->add_shape();
    for (int64_t d : shape) bs->add_dim(d);
    blob_[input.name()] = input.name();
    shape_[input.name()] = shape;
  }

  void ImportNode() {
    const std::string& t = op();
    if (!node().domain().empty() && node().domain() != "ai.onnx")
      CREMA_THROW_CONFIG(Where(), "operator domain \"", node().domain(), "\" is not supported");
    if (t == "Constant") {
      const onnx::AttributeProto* value = FindAttr(node(), "value");
      if (value == nullptr || !value->has_t())
        CREMA_THROW_CONFIG(Where(), "only Constant nodes with a tensor `value` are supported");
      constants_[node().output(0)] = DecodeTensor(value->t(), Where());
    } else if (t == "Conv" || t == "ConvTranspose") {
      Convolution(t == "ConvTranspose");
    } else if (t == "Gemm") {
      Gemm();
    } else if (t == "MatMul") {
      MatMul();
    } else if (t == "MaxPool" || t == "AveragePool") {
      Pooling(t == "MaxPool");
    } else if (t == "GlobalMaxPool" || t == "GlobalAveragePool") {
      Shape shape = InShape();
      std::fill(shape.begin() + 2, shape.end(), 1);
      LayerParameter* layer = AddLayer("Pooling", {Blob()}, shape);
      layer->mutable_pooling_param()->set_pool(t == "GlobalMaxPool" ? PoolingParameter::MAX
                                                                    : PoolingParameter::AVE);
      layer->mutable_pooling_param()->set_global_pooling(true);
    } else if (t == "Pad") {
      Pad();
    } else if (t == "Relu") {
      AddLayer("ReLU", {Blob()}, InShape());
    } else if (t == "LeakyRelu") {
      AddLayer("ReLU", {Blob()}, InShape())
          ->mutable_relu_param()
          ->set_negative_slope(FloatAttr(node(), "alpha", 0.01f));
    } else if (t == "PRelu") {
      Prelu();
    } else if (t == "Pow") {
      if (!IsConst(1) || Const(1).values.size() != 1)
        CREMA_THROW_CONFIG(Where(), "only a constant scalar exponent maps to Caffe's Power");
      AddLayer("Power", {Blob()}, InShape())
          ->mutable_power_param()
          ->set_power(static_cast<float>(Const(1).values[0]));
    } else if (t == "Sigmoid" || t == "Tanh") {
      AddLayer(t == "Sigmoid" ? "Sigmoid" : "TanH", {Blob()}, InShape());
    } else if (t == "Clip") {
      Clip();
    } else if (t == "Softmax") {
      const int64_t axis = IntAttr(node(), "axis", opset_ >= 13 ? -1 : 1);
      const int a = Axis(axis, Rank());
      if (opset_ < 13 && a != Rank() - 1)
        CREMA_THROW_CONFIG(Where(), "before opset 13 Softmax normalises over all axes from ",
                           "`axis` on; Caffe's Softmax normalises over one axis");
      AddLayer("Softmax", {Blob()}, InShape())->mutable_softmax_param()->set_axis(a);
    } else if (t == "LRN") {
      const int64_t size = IntAttr(node(), "size", 0);
      if (size % 2 == 0)
        CREMA_THROW_CONFIG(Where(), "LRN size ", size, " is even; Caffe's LRN needs an odd size");
      LRNParameter* lp = AddLayer("LRN", {Blob()}, InShape())->mutable_lrn_param();
      lp->set_local_size(static_cast<uint32_t>(size));
      lp->set_alpha(FloatAttr(node(), "alpha", 1e-4f));
      lp->set_beta(FloatAttr(node(), "beta", 0.75f));
      lp->set_k(FloatAttr(node(), "bias", 1.f));
    } else if (t == "Concat") {
      const int axis = Axis(IntAttr(node(), "axis", 1), Rank());
      std::vector<std::string> bottoms;
      Shape shape = InShape();
      shape[axis] = 0;
      for (int j = 0; j < node().input_size(); ++j) {
        bottoms.push_back(Blob(j));
        shape[axis] += InShape(j)[axis];
      }
      AddLayer("Concat", bottoms, shape)->mutable_concat_param()->set_axis(axis);
    } else if (t == "Add" || t == "Mul" || t == "Sum" || t == "Max") {
      Elementwise();
    } else if (t == "BatchNormalization") {
      BatchNormalization();
    } else if (t == "Flatten") {
      const int axis = Axis(IntAttr(node(), "axis", 1), Rank() + 1);
      const Shape& in = InShape();
      const Shape shape = {Count(Shape(in.begin(), in.begin() + axis)),
                           Count(Shape(in.begin() + axis, in.end()))};
      if (axis == 1) {
        AddLayer("Flatten", {Blob()}, shape);
      } else {
        ReshapeLayer(Shape{shape[0], -1}, shape);
      }
    } else if (t == "Reshape") {
      Reshape();
    } else if (t == "Dropout" || t == "Identity") {
      if (t == "Dropout" && IsConst(2) && Const(2).values.at(0) != 0)
        CREMA_THROW_CONFIG(Where(), "training_mode true: dropout at inference is not supported");
      Alias(node().output(0), node().input(0));
    } else if (t == "Transpose") {
      Shape perm = IntsAttr(node(), "perm", {});
      if (perm.empty())
        for (int a = Rank() - 1; a >= 0; --a) perm.push_back(a);
      Shape shape;
      for (int64_t a : perm) shape.push_back(InShape()[a]);
      LayerParameter* layer = AddLayer("Permute", {Blob()}, shape);
      for (int64_t a : perm) layer->mutable_permute_param()->add_order(static_cast<uint32_t>(a));
    } else if (t == "Resize") {
      Resize();
    } else {
      CREMA_THROW_CONFIG(Where(), "operator ", t,
                         " has no Caffe mapping in crema "
                         "(docs/onnx.md lists the supported operators)");
    }
  }

  // Caffe pads both sides of an axis equally: pads [b1.., e1..] must have b == e.
  Shape SymmetricPads(const Shape& pads, size_t spatial) const {
    if (pads.empty()) return Shape(spatial, 0);
    if (pads.size() != 2 * spatial)
      CREMA_THROW_CONFIG(Where(), "pads has ", pads.size(), " values");
    for (size_t a = 0; a < spatial; ++a)
      if (pads[a] != pads[a + spatial])
        CREMA_THROW_CONFIG(Where(), "asymmetric pads (axis ", a + 2, ": ", pads[a], " before, ",
                           pads[a + spatial], " after); Caffe pads both sides equally");
    return Shape(pads.begin(), pads.begin() + static_cast<long>(spatial));
  }

  // auto_pad: NOTSET (explicit pads) or VALID; SAME_* only when it comes out symmetric.
  Shape ConvPads(const Shape& kernel, const Shape& strides, const Shape& dilations) const {
    const std::string auto_pad = StringAttr(node(), "auto_pad", "NOTSET");
    const size_t spatial = kernel.size();
    if (auto_pad == "NOTSET") return SymmetricPads(IntsAttr(node(), "pads", {}), spatial);
    if (auto_pad == "VALID") return Shape(spatial, 0);
    Shape pads(spatial);
    for (size_t a = 0; a < spatial; ++a) {
      const int64_t in = InShape()[a + 2];
      const int64_t out = (in + strides[a] - 1) / strides[a];
      const int64_t total =
          std::max<int64_t>(0, (out - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1 - in);
      if (total % 2 != 0)
        CREMA_THROW_CONFIG(Where(), "auto_pad ", auto_pad, " pads axis ", a + 2,
                           " unevenly; Caffe pads both sides equally");
      pads[a] = total / 2;
    }
    return pads;
  }

  void Convolution(bool transposed) {
    const Constant& weight = Const(1);
    const size_t spatial = weight.dims.size() - 2;
    if (Rank() != static_cast<int>(weight.dims.size()))
      CREMA_THROW_CONFIG(Where(), "input rank ", Rank(), " does not match weights ",
                         ShapeText(weight.dims));
    const Shape kernel(weight.dims.begin() + 2, weight.dims.end());
    const Shape strides = IntsAttr(node(), "strides", Shape(spatial, 1));
    const Shape dilations = IntsAttr(node(), "dilations", Shape(spatial, 1));
    if (strides.size() != spatial || dilations.size() != spatial)
      CREMA_THROW_CONFIG(Where(), "strides ", ShapeText(strides), " and dilations ",
                         ShapeText(dilations), " must have one value per spatial axis (", spatial,
                         ")");
    for (size_t a = 0; a < spatial; ++a)
      if (strides[a] < 1 || dilations[a] < 1 || kernel[a] < 1)
        CREMA_THROW_CONFIG(Where(), "kernel ", ShapeText(kernel), ", strides ", ShapeText(strides),
                           " and dilations ", ShapeText(dilations), " must be >= 1");
    const Shape pads = ConvPads(kernel, strides, dilations);
    const int64_t group = IntAttr(node(), "group", 1);
    if (group < 1) CREMA_THROW_CONFIG(Where(), "group must be >= 1, got ", group);
    const int64_t num_output = transposed ? weight.dims[1] * group : weight.dims[0];
    Shape shape = {InShape()[0], num_output};
    for (size_t a = 0; a < spatial; ++a) {
      const int64_t in = InShape()[a + 2], extent = dilations[a] * (kernel[a] - 1) + 1;
      shape.push_back(transposed ? strides[a] * (in - 1) + extent - 2 * pads[a]
                                 : (in + 2 * pads[a] - extent) / strides[a] + 1);
    }
    if (transposed) {
      for (int64_t p : IntsAttr(node(), "output_padding", {}))
        if (p != 0)
          CREMA_THROW_CONFIG(Where(), "output_padding is not 0; Caffe's Deconvolution has none");
      const Shape requested = IntsAttr(node(), "output_shape", {});
      if (!requested.empty() && requested != Shape(shape.begin() + 2, shape.end()))
        CREMA_THROW_CONFIG(Where(), "output_shape ", ShapeText(requested), " differs from the ",
                           "size Caffe computes, ", ShapeText(shape));
    }
    std::vector<std::string> bottoms = {Blob()};
    LayerParameter* layer = AddLayer(transposed ? "Deconvolution" : "Convolution", bottoms, shape);
    ConvolutionParameter* cp = layer->mutable_convolution_param();
    cp->set_num_output(static_cast<uint32_t>(num_output));
    SetSpatial(cp->mutable_kernel_size(), kernel, -1);
    SetSpatial(cp->mutable_pad(), pads, 0);
    SetSpatial(cp->mutable_stride(), strides, 1);
    SetSpatial(cp->mutable_dilation(), dilations, 1);
    if (group != 1) cp->set_group(static_cast<uint32_t>(group));
    FillBlob(layer->add_blobs(), weight.dims, weight.values);
    if (HasInput(2)) {
      FillBlob(layer->add_blobs(), {num_output}, Const(2).values);
    } else {
      cp->set_bias_term(false);
    }
  }

  // Y = alpha * A * B' + beta * C with A (M, K) -> InnerProduct; alpha and beta are folded in.
  void Gemm() {
    if (IntAttr(node(), "transA", 0) != 0)
      CREMA_THROW_CONFIG(Where(), "transA = 1: Caffe's InnerProduct cannot transpose its input");
    const Constant& b = Const(1);
    if (b.dims.size() != 2) CREMA_THROW_CONFIG(Where(), "B must be 2-D");
    const float alpha = FloatAttr(node(), "alpha", 1.f), beta = FloatAttr(node(), "beta", 1.f);
    const bool trans_b = IntAttr(node(), "transB", 0) != 0;
    const int64_t n = trans_b ? b.dims[0] : b.dims[1], k = trans_b ? b.dims[1] : b.dims[0];
    std::vector<double> weight(static_cast<size_t>(n * k));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j)
        weight[i * k + j] = alpha * b.values[trans_b ? i * k + j : j * n + i];
    InnerProduct(Blob(), {InShape()[0], n}, 1, n, k, weight, HasInput(2) ? &Const(2) : nullptr,
                 beta);
  }

  // A (..., K) x B (K, N) with B constant -> InnerProduct over the last axis.
  void MatMul() {
    const Constant& b = Const(1);
    if (b.dims.size() != 2 || Rank() < 2)
      CREMA_THROW_CONFIG(Where(), "only an input times a constant 2-D matrix is supported");
    const int64_t k = b.dims[0], n = b.dims[1];
    std::vector<double> weight(static_cast<size_t>(n * k));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < k; ++j) weight[i * k + j] = b.values[j * n + i];
    Shape shape = InShape();
    shape.back() = n;
    InnerProduct(Blob(), shape, Rank() - 1, n, k, weight, nullptr, 1.f);
  }

  void InnerProduct(const std::string& bottom, const Shape& shape, int axis, int64_t n, int64_t k,
                    const std::vector<double>& weight, const Constant* bias, float beta) {
    if (Count(Shape(InShape().begin() + axis, InShape().end())) != k)
      CREMA_THROW_CONFIG(Where(), "input ", ShapeText(InShape()), " does not have ", k,
                         " features");
    LayerParameter* layer = AddLayer("InnerProduct", {bottom}, shape);
    InnerProductParameter* ip = layer->mutable_inner_product_param();
    ip->set_num_output(static_cast<uint32_t>(n));
    if (axis != 1) ip->set_axis(axis);
    FillBlob(layer->add_blobs(), {n, k}, weight);
    if (bias == nullptr) {
      ip->set_bias_term(false);
      return;
    }
    std::vector<double> values(static_cast<size_t>(n));
    if (Count(bias->dims) != n && Count(bias->dims) != 1)
      CREMA_THROW_CONFIG(Where(), "bias ", ShapeText(bias->dims), " is not per output (", n, ")");
    for (int64_t i = 0; i < n; ++i) values[i] = beta * bias->values[Count(bias->dims) == 1 ? 0 : i];
    FillBlob(layer->add_blobs(), {n}, values);
  }

  // A Pad feeding only average pooling is folded into it (zeros counted as Caffe counts pads).
  void Pad() {
    const std::string mode = StringAttr(node(), "mode", "constant");
    Shape pads = IsConst(1) ? Shape() : IntsAttr(node(), "pads", {});
    if (IsConst(1))
      for (double v : Const(1).values) pads.push_back(static_cast<int64_t>(v));
    const double value = IsConst(2) ? Const(2).values.at(0) : FloatAttr(node(), "value", 0.f);
    const int rank = Rank();
    bool foldable = mode == "constant" && value == 0 && !HasInput(3) &&
                    pads.size() == static_cast<size_t>(2 * rank) && rank == 4;
    for (int a = 0; foldable && a < rank; ++a)
      foldable = pads[a] == pads[a + rank] && pads[a] >= 0 && (a >= 2 || pads[a] == 0);
    for (const onnx::NodeProto* consumer : consumers_[node().output(0)])
      foldable = foldable && consumer->op_type() == "AveragePool";
    if (!foldable)
      CREMA_THROW_CONFIG(Where(),
                         "Pad is imported only as zero padding of H and W feeding "
                         "AveragePool (folded into Caffe's pooling pad)");
    pending_pad_[node().output(0)] = {node().input(0), {pads[2], pads[3]}};
    shape_[node().output(0)] = InShape();
  }

  // Accepts MaxPool/AveragePool when Caffe's Pooling with some symmetric pad and CEIL or FLOOR
  // rounding visits the same windows (and, for averages, divides by the same counts).
  void Pooling(bool max) {
    std::string input = node().input(0);
    int64_t folded[2] = {0, 0};
    auto pending = pending_pad_.find(input);
    if (pending != pending_pad_.end()) {
      input = pending->second.input;
      folded[0] = pending->second.pads[0];
      folded[1] = pending->second.pads[1];
    }
    const Shape in = shape_.at(input);
    if (in.size() != 4) CREMA_THROW_CONFIG(Where(), "only 2-D pooling is supported");
    const Shape kernel = IntsAttr(node(), "kernel_shape", {});
    if (kernel.size() != 2) CREMA_THROW_CONFIG(Where(), "kernel_shape must have 2 values");
    const Shape strides = IntsAttr(node(), "strides", {1, 1});
    if (strides.size() != 2 || strides[0] < 1 || strides[1] < 1 || kernel[0] < 1 || kernel[1] < 1)
      CREMA_THROW_CONFIG(Where(), "kernel_shape ", ShapeText(kernel), " and strides ",
                         ShapeText(strides), " must be 2 values >= 1 each");
    for (int64_t d : IntsAttr(node(), "dilations", {1, 1}))
      if (d != 1) CREMA_THROW_CONFIG(Where(), "dilated pooling has no Caffe equivalent");
    const std::string auto_pad = StringAttr(node(), "auto_pad", "NOTSET");
    if (auto_pad != "NOTSET" && auto_pad != "VALID")
      CREMA_THROW_CONFIG(Where(), "auto_pad ", auto_pad, " is not supported; use explicit pads");
    Shape pads = auto_pad == "VALID" ? Shape(4, 0) : IntsAttr(node(), "pads", Shape(4, 0));
    if (pads.size() != 4) CREMA_THROW_CONFIG(Where(), "pads must have 4 values");
    for (int64_t p : pads)
      if (p < 0) CREMA_THROW_CONFIG(Where(), "pads ", ShapeText(pads), " must be >= 0");
    const bool ceil_mode = IntAttr(node(), "ceil_mode", 0) != 0;
    const bool include_pad = IntAttr(node(), "count_include_pad", 0) != 0;
    Shape out_shape = {in[0], in[1], 0, 0};
    int64_t caffe_pad[2];
    bool mode_ok[2][2] = {{false, false}, {false, false}};  // [axis][0: CEIL, 1: FLOOR]
    for (int a = 0; a < 2; ++a) {
      // The ONNX windows in the coordinates of the unpadded input.
      PoolAxis onnx_axis{in[2 + a], kernel[a], strides[a], pads[a] + folded[a],
                         pads[a + 2] + folded[a]};
      const int64_t span = onnx_axis.in + onnx_axis.pad_begin + onnx_axis.pad_end - kernel[a];
      int64_t out = (ceil_mode ? (span + strides[a] - 1) / strides[a] : span / strides[a]) + 1;
      if (ceil_mode && (out - 1) * strides[a] >= onnx_axis.in + onnx_axis.pad_begin) --out;
      const int64_t lo = include_pad ? -onnx_axis.pad_begin : -folded[a];
      const int64_t hi = onnx_axis.in + (include_pad ? onnx_axis.pad_end : folded[a]);
      const int64_t p = onnx_axis.pad_begin;
      for (bool caffe_ceil_mode : {true, false}) {
        if (p >= kernel[a]) continue;
        if (onnx_io::CaffePooledSize(onnx_axis.in, kernel[a], strides[a], p, caffe_ceil_mode) !=
            out)
          continue;
        PoolAxis caffe_axis{onnx_axis.in, kernel[a], strides[a], p, p};
        const bool same_counts =
            max || onnx_io::PoolDivisors(onnx_axis, out, lo, hi) ==
                       onnx_io::PoolDivisors(caffe_axis, out, -p, onnx_axis.in + p);
        mode_ok[a][caffe_ceil_mode ? 0 : 1] = same_counts;
      }
      if (!mode_ok[a][0] && !mode_ok[a][1])
        CREMA_THROW_CONFIG(Where(), "no Caffe Pooling takes the same windows on axis ", a + 2,
                           " (input ", onnx_axis.in, ", kernel ", kernel[a], ", stride ",
                           strides[a], ", pads ", onnx_axis.pad_begin, "/", onnx_axis.pad_end,
                           ceil_mode ? ", ceil_mode" : "",
                           max           ? ""
                           : include_pad ? ", count_include_pad"
                                         : "",
                           ")");
      caffe_pad[a] = p;
      out_shape[2 + a] = out;
    }
    const bool ceil_both = mode_ok[0][0] && mode_ok[1][0];
    if (!ceil_both && !(mode_ok[0][1] && mode_ok[1][1]))
      CREMA_THROW_CONFIG(Where(), "H and W need different rounding modes; Caffe has one");
    LayerParameter* layer = AddLayer("Pooling", {blob_.at(input)}, out_shape);
    PoolingParameter* pp = layer->mutable_pooling_param();
    pp->set_pool(max ? PoolingParameter::MAX : PoolingParameter::AVE);
    if (kernel[0] == kernel[1]) {
      pp->set_kernel_size(static_cast<uint32_t>(kernel[0]));
    } else {
      pp->set_kernel_h(static_cast<uint32_t>(kernel[0]));
      pp->set_kernel_w(static_cast<uint32_t>(kernel[1]));
    }
    if (strides[0] == strides[1]) {
      if (strides[0] != 1) pp->set_stride(static_cast<uint32_t>(strides[0]));
    } else {
      pp->set_stride_h(static_cast<uint32_t>(strides[0]));
      pp->set_stride_w(static_cast<uint32_t>(strides[1]));
    }
    if (caffe_pad[0] == caffe_pad[1]) {
      if (caffe_pad[0] != 0) pp->set_pad(static_cast<uint32_t>(caffe_pad[0]));
    } else {
      pp->set_pad_h(static_cast<uint32_t>(caffe_pad[0]));
      pp->set_pad_w(static_cast<uint32_t>(caffe_pad[1]));
    }
    if (!ceil_both) pp->set_round_mode(PoolingParameter::FLOOR);
  }

  // The slope broadcasts from the right; Caffe's PReLU has one slope, or one per channel (axis 1).
  void Prelu() {
    const Constant& slope = Const(1);
    const Shape& in = InShape();
    LayerParameter* layer = AddLayer("PReLU", {Blob()}, in);
    if (slope.values.size() == 1) {
      layer->mutable_prelu_param()->set_channel_shared(true);
      FillBlob(layer->add_blobs(), {}, slope.values);
      return;
    }
    int axis = 0;
    Shape core;
    if (in.size() < 2 || !BroadcastSpan(in, slope.dims, &axis, &core) || axis != 1 ||
        core.size() != 1)
      CREMA_THROW_CONFIG(Where(), "slope ", ShapeText(slope.dims), " is not one per channel of ",
                         ShapeText(in), "; Caffe's PReLU has one slope or one per channel");
    FillBlob(layer->add_blobs(), core, slope.values);
  }

  void Clip() {
    double lo = -FLT_MAX, hi = FLT_MAX;
    if (opset_ < 11) {
      lo = FloatAttr(node(), "min", -FLT_MAX);
      hi = FloatAttr(node(), "max", FLT_MAX);
    }
    if (HasInput(1)) lo = Const(1).values.at(0);
    if (HasInput(2)) hi = Const(2).values.at(0);
    if (lo == 0 && hi == 6) {
      AddLayer("ReLU6", {Blob()}, InShape());
      return;
    }
    ClipParameter* cp = AddLayer("Clip", {Blob()}, InShape())->mutable_clip_param();
    cp->set_min(static_cast<float>(lo));
    cp->set_max(static_cast<float>(hi));
  }

  // Where a broadcast operand of shape `small` sits in `big` (right-aligned): the axis of its
  // first non-1 dimension and the dimensions up to its last non-1 one (all must equal big's).
  bool BroadcastSpan(const Shape& big, const Shape& small, int* axis, Shape* core) const {
    if (small.size() > big.size()) return false;
    const size_t offset = big.size() - small.size();
    size_t first = small.size(), last = 0;
    for (size_t i = 0; i < small.size(); ++i)
      if (small[i] != 1) {
        first = std::min(first, i);
        last = i;
      }
    core->clear();
    *axis = static_cast<int>(big.size());
    if (first == small.size()) return true;  // a scalar
    *axis = static_cast<int>(offset + first);
    for (size_t i = first; i <= last; ++i) {
      if (small[i] != big[offset + i]) return false;
      core->push_back(small[i]);
    }
    return true;
  }

  // Add/Sum -> Eltwise SUM or Bias; Mul -> Eltwise PROD or Scale; Max -> Eltwise MAX. A scalar
  // constant becomes a Power layer (y = shift + scale * x).
  void Elementwise() {
    const std::string& t = op();
    std::vector<int> dynamic, constant;
    for (int j = 0; j < node().input_size(); ++j) (IsConst(j) ? constant : dynamic).push_back(j);
    if (dynamic.empty()) CREMA_THROW_CONFIG(Where(), "all inputs are constants");
    bool same = constant.empty();
    for (int j : dynamic) same = same && InShape(j) == InShape(dynamic[0]);
    if (same) {
      std::vector<std::string> bottoms;
      for (int j : dynamic) bottoms.push_back(Blob(j));
      EltwiseParameter* ep = AddLayer("Eltwise", bottoms, InShape())->mutable_eltwise_param();
      ep->set_operation(t == "Mul"   ? EltwiseParameter::PROD
                        : t == "Max" ? EltwiseParameter::MAX
                                     : EltwiseParameter::SUM);
      return;
    }
    if ((t != "Add" && t != "Mul") || node().input_size() != 2)
      CREMA_THROW_CONFIG(Where(),
                         "inputs of different shapes are supported only for Add and Mul "
                         "of two inputs");
    const bool add = t == "Add";
    // The operand with the larger shape is x; the other broadcasts over it.
    int x = dynamic[0], y = 1 - dynamic[0];
    if (constant.empty() && Count(InShape(y)) > Count(InShape(x))) std::swap(x, y);
    const Shape big = InShape(x);
    const Shape small = IsConst(y) ? Const(y).dims : InShape(y);
    int axis = 0;
    Shape core;
    if (!BroadcastSpan(big, small, &axis, &core))
      CREMA_THROW_CONFIG(Where(), "operand ", ShapeText(small), " does not broadcast onto ",
                         ShapeText(big), " as one block of axes");
    if (IsConst(y) && core.empty()) {
      PowerParameter* pp = AddLayer("Power", {Blob(x)}, big)->mutable_power_param();
      const double v = Const(y).values.at(0);
      add ? pp->set_shift(static_cast<float>(v)) : pp->set_scale(static_cast<float>(v));
      return;
    }
    std::vector<std::string> bottoms = {Blob(x)};
    if (!IsConst(y)) {
      std::string factor = Blob(y);
      if (core != small) {  // drop the 1s around the block so Caffe's axes line up
        const std::string reshaped = node().output(0) + "/factor";
        LayerParameter* r = AddLayer("Reshape", {factor}, core, reshaped);
        for (int64_t d : core) r->mutable_reshape_param()->mutable_shape()->add_dim(d);
        factor = reshaped;
      }
      bottoms.push_back(factor);
    }
    LayerParameter* layer = AddLayer(add ? "Bias" : "Scale", bottoms, big);
    if (add) {
      layer->mutable_bias_param()->set_axis(axis);
      layer->mutable_bias_param()->set_num_axes(static_cast<int>(core.size()));
    } else {
      layer->mutable_scale_param()->set_axis(axis);
      layer->mutable_scale_param()->set_num_axes(static_cast<int>(core.size()));
    }
    if (IsConst(y)) FillBlob(layer->add_blobs(), core, Const(y).values);
  }

  // BatchNormalization -> BatchNorm (mean, var, factor 1) and, unless scale = 1 and B = 0, an
  // in-place Scale with bias.
  void BatchNormalization() {
    if (IntAttr(node(), "training_mode", 0) != 0)
      CREMA_THROW_CONFIG(Where(), "training_mode = 1 is not an inference graph");
    for (int j = 1; j < node().output_size(); ++j)
      if (!node().output(j).empty() && consumers_.count(node().output(j)))
        CREMA_THROW_CONFIG(Where(), "the running statistics outputs are used; not inference");
    const Constant &gamma = Const(1), &beta = Const(2), &mean = Const(3), &var = Const(4);
    const int64_t channels = InShape()[1];
    LayerParameter* bn = AddLayer("BatchNorm", {Blob()}, InShape());
    bn->mutable_batch_norm_param()->set_eps(FloatAttr(node(), "epsilon", 1e-5f));
    FillBlob(bn->add_blobs(), {channels}, mean.values);
    FillBlob(bn->add_blobs(), {channels}, var.values);
    FillBlob(bn->add_blobs(), {1}, {1.0});
    const bool identity =
        std::all_of(gamma.values.begin(), gamma.values.end(), [](double v) { return v == 1; }) &&
        std::all_of(beta.values.begin(), beta.values.end(), [](double v) { return v == 0; });
    if (identity) return;
    const std::string top = node().output(0);
    LayerParameter* scale = deploy_->add_layer();
    scale->set_name(UniqueLayerName(bn->name() + "/scale"));
    scale->set_type("Scale");
    scale->add_bottom(top);
    scale->add_top(top);
    scale->mutable_scale_param()->set_bias_term(true);
    FillBlob(scale->add_blobs(), {channels}, gamma.values);
    FillBlob(scale->add_blobs(), {channels}, beta.values);
  }

  void ReshapeLayer(const Shape& target, const Shape& shape) {
    LayerParameter* layer = AddLayer("Reshape", {Blob()}, shape);
    for (int64_t d : target) layer->mutable_reshape_param()->mutable_shape()->add_dim(d);
  }

  void Reshape() {
    const Constant& target = Const(1);
    const bool allow_zero = IntAttr(node(), "allowzero", 0) != 0;
    Shape dims, shape;
    int64_t known = 1, infer = -1;
    for (size_t i = 0; i < target.values.size(); ++i) {
      int64_t d = static_cast<int64_t>(target.values[i]);
      if (d == 0 && allow_zero)
        CREMA_THROW_CONFIG(Where(), "allowzero = 1 with a 0 in the shape has no Caffe form");
      dims.push_back(d);
      if (d == 0) d = InShape().at(i);
      if (d == -1) infer = static_cast<int64_t>(i);
      shape.push_back(d);
      if (d != -1) known *= d;
    }
    if (infer >= 0) shape[infer] = Count(InShape()) / known;
    ReshapeLayer(dims, shape);
  }

  void Resize() {
    const std::string mode = StringAttr(node(), "mode", "nearest");
    const std::string transform =
        StringAttr(node(), "coordinate_transformation_mode", "half_pixel");
    const Shape& in = InShape();
    if (in.size() != 4) CREMA_THROW_CONFIG(Where(), "only 4-D Resize is supported");
    Shape out = in;
    if (HasInput(3)) {
      for (size_t i = 0; i < 4; ++i) out[i] = static_cast<int64_t>(Const(3).values.at(i));
    } else {
      for (size_t i = 0; i < 4; ++i) out[i] = static_cast<int64_t>(in[i] * Const(2).values.at(i));
    }
    if (out[0] != in[0] || out[1] != in[1])
      CREMA_THROW_CONFIG(Where(), "only H and W may be resized");
    UpsampleParameter up;
    if (mode == "nearest") {
      if (transform != "asymmetric" ||
          StringAttr(node(), "nearest_mode", "round_prefer_floor") != "floor" ||
          out[2] % in[2] != 0 || out[3] % in[3] != 0)
        CREMA_THROW_CONFIG(Where(),
                           "nearest Resize maps to Caffe only with "
                           "coordinate_transformation_mode asymmetric, nearest_mode floor and "
                           "whole scale factors");
      up.set_mode(UpsampleParameter::NEAREST);
    } else if (mode == "linear" &&
               (transform == "align_corners" || transform == "pytorch_half_pixel" ||
                (transform == "half_pixel" && out[2] > 1 && out[3] > 1))) {
      up.set_mode(UpsampleParameter::BILINEAR);
      up.set_align_corners(transform == "align_corners");
    } else {
      CREMA_THROW_CONFIG(Where(), "Resize mode ", mode, " with ", transform,
                         " has no Caffe Upsample equivalent");
    }
    up.set_upsample_h(static_cast<uint32_t>(out[2]));
    up.set_upsample_w(static_cast<uint32_t>(out[3]));
    *AddLayer("Upsample", {Blob()}, out)->mutable_upsample_param() = up;
  }

  struct PendingPad {
    std::string input;
    int64_t pads[2];
  };

  const onnx::GraphProto& graph_;
  std::string source_;
  NetParameter* deploy_;
  int64_t opset_ = 17;
  const onnx::NodeProto* node_ = nullptr;
  std::map<std::string, Constant> constants_;
  std::map<std::string, std::string> blob_;  // ONNX tensor -> Caffe blob
  std::map<std::string, Shape> shape_;
  std::map<std::string, std::vector<const onnx::NodeProto*>> consumers_;
  std::map<std::string, PendingPad> pending_pad_;
  std::set<std::string> layer_names_;
};

}  // namespace

void ImportOnnx(const onnx::ModelProto& model, const std::string& source, NetParameter* deploy,
                NetParameter* weights) {
  deploy->Clear();
  weights->Clear();
  Importer(model, source, deploy).Run();
  weights->set_name(deploy->name());
  for (LayerParameter& layer : *deploy->mutable_layer()) {
    if (layer.blobs_size() == 0) continue;
    LayerParameter* w = weights->add_layer();
    w->set_name(layer.name());
    w->set_type(layer.type());
    w->mutable_blobs()->Swap(layer.mutable_blobs());
  }
}

void ImportOnnxFile(const std::string& onnx_path, const std::string& out_model,
                    const std::string& out_weights) {
  onnx::ModelProto model;
  ReadBinaryProto(onnx_path, &model);
  if (!model.has_graph()) CREMA_THROW_CONFIG(onnx_path, ": not an ONNX model (no graph)");
  NetParameter deploy, weights;
  ImportOnnx(model, onnx_path, &deploy, &weights);
  WriteTextProto(deploy, out_model);
  WriteBinaryProto(weights, out_weights);
}

}  // namespace crema
