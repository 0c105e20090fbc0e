#include "layers/convolution/dnnl_convolution.hpp"

#include <glog/logging.h>

#include <map>
#include <tuple>
#include <unordered_map>

#include "core/workspace.hpp"
#include "crema/error.hpp"
#include "math/dnnl_engine.hpp"

namespace crema {

bool DnnlConvGeometry::operator==(const DnnlConvGeometry& o) const {
  return input == o.input && output == o.output && filter == o.filter && pad == o.pad &&
         stride == o.stride && dilation == o.dilation && group == o.group && bias == o.bias &&
         forward_only == o.forward_only;
}

#ifdef CREMA_WITH_DNNL

namespace {

using dnnl::memory;

memory::dims Dims(const std::vector<int>& v) { return memory::dims(v.begin(), v.end()); }

std::string ImplName(const dnnl::primitive_desc_base& pd) { return pd.impl_info_str(); }

}  // namespace

// The plain layouts (DnnlWeightedLayout) are the caller's.
struct DnnlConvolution::Impl
    : DnnlWeightedPrimitives<dnnl::convolution_forward, dnnl::convolution_backward_data,
                             dnnl::convolution_backward_weights> {
  DnnlConvGeometry geometry;
  dnnl::algorithm algorithm = dnnl::algorithm::convolution_direct;
  memory::dims strides, dilates, pad_l, pad_r;
  std::unique_ptr<dnnl::convolution_forward::desc> fwd_desc;
  // Forward primitives with post-ops, by (sum, ReLU, slope), made at their first call; not
  // `taken` where oneDNN has none (Winograd's may not take them).
  struct PostOps {
    bool taken = false;
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward primitive;
  };
  std::map<std::tuple<bool, bool, float>, PostOps> post_ops;

  // The Winograd primitive of a forward-only layer is oneDNN's inference one (its weights in
  // oneDNN's Winograd format, transformed once and kept).
  bool Inference() const {
    return algorithm == dnnl::algorithm::convolution_winograd && geometry.forward_only;
  }
  void Create(const DnnlConvGeometry& g);
  PostOps& WithPostOps(bool sum, const float* relu);
  void CreateBackward() override;
};

void DnnlConvolution::Impl::Create(const DnnlConvGeometry& g) {
  const size_t spatial = g.input.size() - 2;
  strides.clear();
  dilates.clear();
  pad_l.clear();
  for (size_t i = 0; i < spatial; ++i) {
    strides.push_back(g.stride[i]);
    dilates.push_back(g.dilation[i] - 1);
    pad_l.push_back(g.pad[i]);
  }
  // Caffe's output size floors; oneDNN checks (in + pad_l + pad_r - extent) / stride + 1 == out
  // with the same integer division, so the right pad is Caffe's pad too.
  pad_r = pad_l;
  src = DnnlPlain(Dims(g.input));
  dst = DnnlPlain(Dims(g.output));
  memory::dims weight_dims = Dims(g.filter);
  if (g.group > 1) {
    weight_dims[0] /= g.group;
    weight_dims.insert(weight_dims.begin(), g.group);
  }
  weights = DnnlPlain(weight_dims);
  bias = g.bias ? DnnlPlain({g.output[1]}) : memory::desc();
  fwd_desc = std::make_unique<dnnl::convolution_forward::desc>(
      Inference() ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training,
      algorithm, DnnlAny(src.dims()), DnnlAny(weight_dims), bias, DnnlAny(dst.dims()), strides,
      dilates, pad_l, pad_r);
  fwd_pd = dnnl::convolution_forward::primitive_desc(*fwd_desc, DnnlUserScratchpad(), DnnlEngine());
  fwd = dnnl::convolution_forward(fwd_pd);
}

// The sum post-op adds y's old value to the convolution's (with scale 1, as crema's Eltwise SUM of
// ones: float addition either way round gives the same bits). ReLU as crema's ReLU computes it
// (math/activation.hpp: max(x, 0) + slope * min(x, 0)): oneDNN's ReLU gives x * slope below zero,
// which is -0 for slope 0 where crema's gives +0; the linear post-op after it (1 * y + 0) makes
// that +0 and changes nothing else. NaN stays NaN.
DnnlConvolution::Impl::PostOps& DnnlConvolution::Impl::WithPostOps(bool sum, const float* relu) {
  const auto key = std::make_tuple(sum, relu != nullptr, relu != nullptr ? *relu : 0.f);
  if (const auto it = post_ops.find(key); it != post_ops.end()) return it->second;
  dnnl::post_ops ops;
  if (sum) ops.append_sum(1.f);
  if (relu != nullptr) {
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, *relu, 0.f);
    // (Winograd takes no linear post-op; its results are not crema's bits anyway.)
    if (algorithm == dnnl::algorithm::convolution_direct)
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f, 0.f);
  }
  dnnl::primitive_attr attr = DnnlUserScratchpad();
  attr.set_post_ops(ops);
  PostOps& made = post_ops[key];
  try {
    made.pd = dnnl::convolution_forward::primitive_desc(*fwd_desc, attr, DnnlEngine());
  } catch (const dnnl::error&) {
    return made;  // not taken
  }
  made.primitive = dnnl::convolution_forward(made.pd);
  made.taken = true;
  return made;
}

void DnnlConvolution::Impl::CreateBackward() {
  // The backward primitives take a training forward one as their hint.
  dnnl::convolution_forward::primitive_desc hint = fwd_pd;
  if (Inference())
    hint = dnnl::convolution_forward::primitive_desc(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm,
                                        DnnlAny(src.dims()), DnnlAny(weights.dims()), bias,
                                        DnnlAny(dst.dims()), strides, dilates, pad_l, pad_r),
        DnnlUserScratchpad(), DnnlEngine());
  const dnnl::convolution_backward_data::desc data_desc(
      algorithm, DnnlAny(src.dims()), DnnlAny(weights.dims()), DnnlAny(dst.dims()), strides,
      dilates, pad_l, pad_r);
  bwd_data_pd = dnnl::convolution_backward_data::primitive_desc(data_desc, DnnlUserScratchpad(),
                                                                DnnlEngine(), hint);
  bwd_data = dnnl::convolution_backward_data(bwd_data_pd);
  const dnnl::convolution_backward_weights::desc weights_desc(
      algorithm, DnnlAny(src.dims()), DnnlAny(weights.dims()), bias, DnnlAny(dst.dims()), strides,
      dilates, pad_l, pad_r);
  bwd_weights_pd = dnnl::convolution_backward_weights::primitive_desc(
      weights_desc, DnnlUserScratchpad(), DnnlEngine(), hint);
  bwd_weights = dnnl::convolution_backward_weights(bwd_weights_pd);
  VLOG(1) << "oneDNN convolution " << ShapeText(geometry.input) << ": bwd data "
          << ImplName(bwd_data_pd) << ", bwd weights " << ImplName(bwd_weights_pd);
}

DnnlConvolution::DnnlConvolution() : impl_(std::make_unique<Impl>()) {}
DnnlConvolution::~DnnlConvolution() = default;

namespace {

// The geometries oneDNN's Winograd convolution may take (it decides the rest: AVX-512, channels).
// Groups run one by one, each on its channels of the whole tensors: a group's channels are then
// whole 16-channel blocks, so that they keep their place in a channel-blocked tensor too.
bool WinogradShape(const DnnlConvGeometry& g) {
  if (g.input.size() != 4 || g.filter[2] != 3 || g.filter[3] != 3) return false;
  if (g.group > 1 && (g.input[1] / g.group % 16 != 0 || g.output[1] / g.group % 16 != 0))
    return false;
  for (size_t i = 0; i < 2; ++i)
    if (g.stride[i] != 1 || g.dilation[i] != 1) return false;
  return true;
}

int64_t Count(const std::vector<int>& dims, size_t from) {
  int64_t n = 1;
  for (size_t i = from; i < dims.size(); ++i) n *= dims[i];
  return n;
}

}  // namespace

bool DnnlConvolution::Prepare(const DnnlConvGeometry& geometry) {
  Impl& impl = *impl_;
  if (impl.prepared && impl.geometry == geometry) return impl.supported;
  impl.geometry = geometry;
  impl.prepared = true;
  impl.supported = false;
  impl.backward_ready = false;
  impl.post_ops.clear();
  winograd_.clear();
  try {
    impl.Create(geometry);
    impl.supported = true;
    VLOG(1) << "oneDNN convolution " << ShapeText(geometry.input) << ": fwd "
            << ImplName(impl.fwd_pd);
  } catch (const dnnl::error& e) {
    LOG(INFO) << "oneDNN does not take the convolution of input " << ShapeText(geometry.input)
              << " (" << e.what() << "); crema's kernels run it";
    return false;
  }
  const int groups = geometry.group;
  group_step_ = {Count(geometry.input, 1) / groups, Count(geometry.output, 1) / groups,
                 Count(geometry.filter, 0) / groups, geometry.output[1] / groups};
  if (WinogradShape(geometry)) {
    DnnlConvGeometry one = geometry;  // one group's convolution
    one.input[1] /= groups;
    one.output[1] /= groups;
    one.filter[0] /= groups;
    one.group = 1;
    std::vector<std::unique_ptr<Impl>> made;
    try {
      // One per group (each keeps its own group's weights when forward-only).
      for (int g = 0; g < groups; ++g) {
        auto winograd = std::make_unique<Impl>();
        winograd->algorithm = dnnl::algorithm::convolution_winograd;
        winograd->geometry = one;
        winograd->Create(one);
        if (groups > 1) {
          winograd->src_whole = Dims(geometry.input);
          winograd->dst_whole = Dims(geometry.output);
        }
        winograd->prepared = winograd->supported = true;
        made.push_back(std::move(winograd));
      }
      VLOG(1) << "oneDNN convolution " << ShapeText(geometry.input) << ": Winograd fwd "
              << ImplName(made[0]->fwd_pd) << (groups > 1 ? " per group" : "");
      winograd_ = std::move(made);
    } catch (const dnnl::error&) {
      // None on this CPU or for these channels: the direct convolution only.
    }
  }
  return true;
}

void DnnlConvolution::Forward(const float* x, const float* w, const float* bias, float* y,
                              Workspace* ws, const Io& io) {
  const Impl::ForwardIo forward_io{io.weights_generation, io.src_block, io.dst_block, io.sum};
  const bool post_ops = io.sum || io.relu != nullptr;
  // Winograd where it takes the post-ops (else the direct convolution, which has them).
  if (io.winograd && HasWinograd() &&
      (!post_ops || winograd_[0]->WithPostOps(io.sum, io.relu).taken)) {
    for (size_t g = 0; g < winograd_.size(); ++g) {
      Impl& impl = *winograd_[g];
      const float* group_bias = bias != nullptr ? bias + g * group_step_.bias : nullptr;
      const float* group_x = x + g * group_step_.input;
      const float* group_w = w + g * group_step_.weights;
      float* group_y = y + g * group_step_.output;
      if (!post_ops) {
        impl.Forward(group_x, group_w, group_bias, group_y, ws, forward_io);
      } else {
        Impl::PostOps& with = impl.WithPostOps(io.sum, io.relu);
        impl.ForwardWith(with.primitive, with.pd, group_x, group_w, group_bias, group_y, ws,
                         forward_io);
      }
    }
    return;
  }
  if (!post_ops) return impl_->Forward(x, w, bias, y, ws, forward_io);
  Impl::PostOps& with = impl_->WithPostOps(io.sum, io.relu);
  CREMA_ASSERT(with.taken, "oneDNN's convolution does not take the post-ops");
  impl_->ForwardWith(with.primitive, with.pd, x, w, bias, y, ws, forward_io);
}

void DnnlConvolution::Backward(const DnnlBackwardArgs& args, Workspace* ws, bool winograd) {
  if (!winograd || !HasWinograd()) return impl_->Backward(args, ws);
  const auto at = [](auto* p, int64_t offset) { return p != nullptr ? p + offset : nullptr; };
  for (size_t g = 0; g < winograd_.size(); ++g) {
    DnnlBackwardArgs group = args;
    group.x = at(args.x, g * group_step_.input);
    group.dy = at(args.dy, g * group_step_.output);
    group.w = at(args.w, g * group_step_.weights);
    group.dw = at(args.dw, g * group_step_.weights);
    group.db = at(args.db, g * group_step_.bias);
    group.dx = at(args.dx, g * group_step_.input);
    winograd_[g]->Backward(group, ws);
  }
}

#else  // without oneDNN in the build: every geometry stays on crema's kernels

struct DnnlConvolution::Impl {};
DnnlConvolution::DnnlConvolution() : impl_(std::make_unique<Impl>()) {}
DnnlConvolution::~DnnlConvolution() = default;
bool DnnlConvolution::Prepare(const DnnlConvGeometry&) { return false; }
void DnnlConvolution::Forward(const float*, const float*, const float*, float*, Workspace*,
                              const Io&) {
  CREMA_ASSERT(false, "oneDNN is not in this build");
}
void DnnlConvolution::Backward(const DnnlBackwardArgs&, Workspace*, bool) {
  CREMA_ASSERT(false, "oneDNN is not in this build");
}

#endif  // CREMA_WITH_DNNL

}  // namespace crema
