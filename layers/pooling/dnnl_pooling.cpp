#include "layers/pooling/dnnl_pooling.hpp"

#include <glog/logging.h>

#include "crema/error.hpp"
#include "math/dnnl_engine.hpp"

namespace crema {

bool DnnlPoolGeometry::operator==(const DnnlPoolGeometry& o) const {
  return input == o.input && output == o.output && kernel_h == o.kernel_h &&
         kernel_w == o.kernel_w && stride_h == o.stride_h && stride_w == o.stride_w &&
         pad_h == o.pad_h && pad_w == o.pad_w && max == o.max && training == o.training;
}

#ifdef CREMA_WITH_DNNL

namespace {

using dnnl::memory;

// The right padding that makes oneDNN's (in + pad + right - kernel) / stride + 1 equal `out`, or
// -1 when none does or the last window would lie wholly outside the input.
int RightPad(int in, int out, int kernel, int stride, int pad) {
  if ((out - 1) * stride - pad >= in) return -1;
  int right = std::max((out - 1) * stride + kernel - in - pad, 0);
  return (in + pad + right - kernel) / stride + 1 == out ? right : -1;
}

}  // namespace

struct DnnlPooling::Impl {
  DnnlPoolGeometry geometry;
  bool prepared = false, supported = false;
  memory::desc src, dst;
  dnnl::pooling_forward::primitive_desc fwd_pd;
  dnnl::pooling_forward fwd;
  dnnl::pooling_backward::primitive_desc bwd_pd;
  dnnl::pooling_backward bwd;
  std::vector<float> workspace;  // MAX's argmax, from Forward to Backward
  // The passes on channel-blocked tensors, made at the first call for `block` (Backward: in
  // training only).
  int block = 0;
  dnnl::pooling_forward::primitive_desc blocked_pd;
  dnnl::pooling_forward blocked;
  dnnl::pooling_backward::primitive_desc blocked_bwd_pd;
  dnnl::pooling_backward blocked_bwd;
  bool ran_blocked = false;  // the last Forward's layout, which Backward takes
  dnnl::algorithm algorithm{};
  memory::dims pad_r;

  // The oneDNN algorithm equal to Caffe's pooling here, or false.
  bool Algorithm(const memory::dims& pad_r, dnnl::algorithm* algorithm) const;
  void Create(const DnnlPoolGeometry& g, const memory::dims& pad_r, dnnl::algorithm algorithm);
};

bool DnnlPooling::Impl::Algorithm(const memory::dims& pad_r, dnnl::algorithm* algorithm) const {
  const DnnlPoolGeometry& g = geometry;
  if (g.max) {
    *algorithm = dnnl::algorithm::pooling_max;
    return true;
  }
  if (g.pad_h == 0 && g.pad_w == 0) {
    *algorithm = dnnl::algorithm::pooling_avg_exclude_padding;
    return true;
  }
  *algorithm = dnnl::algorithm::pooling_avg_include_padding;
  return pad_r[0] <= g.pad_h && pad_r[1] <= g.pad_w;
}

void DnnlPooling::Impl::Create(const DnnlPoolGeometry& g, const memory::dims& pad_r,
                               dnnl::algorithm algorithm) {
  src = DnnlPlain(memory::dims(g.input.begin(), g.input.end()));
  dst = DnnlPlain(memory::dims(g.output.begin(), g.output.end()));
  const memory::dims strides = {g.stride_h, g.stride_w}, kernel = {g.kernel_h, g.kernel_w},
                     pad_l = {g.pad_h, g.pad_w};
  const dnnl::prop_kind kind =
      g.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  fwd_pd = dnnl::pooling_forward::primitive_desc(
      dnnl::pooling_forward::desc(kind, algorithm, src, dst, strides, kernel, pad_l, pad_r),
      DnnlUserScratchpad(), DnnlEngine());
  fwd = dnnl::pooling_forward(fwd_pd);
  workspace.assign((fwd_pd.workspace_desc().get_size() + 3) / 4, 0.0f);
  if (g.training) {
    bwd_pd = dnnl::pooling_backward::primitive_desc(
        dnnl::pooling_backward::desc(algorithm, src, dst, strides, kernel, pad_l, pad_r),
        DnnlUserScratchpad(), DnnlEngine(), fwd_pd);
    bwd = dnnl::pooling_backward(bwd_pd);
  }
}

DnnlPooling::DnnlPooling() : impl_(std::make_unique<Impl>()) {}
DnnlPooling::~DnnlPooling() = default;

bool DnnlPooling::Prepare(const DnnlPoolGeometry& geometry) {
  Impl& impl = *impl_;
  if (impl.prepared && impl.geometry == geometry) return impl.supported;
  impl.geometry = geometry;
  impl.prepared = true;
  impl.supported = false;
  const DnnlPoolGeometry& g = geometry;
  const memory::dims pad_r = {RightPad(g.input[2], g.output[2], g.kernel_h, g.stride_h, g.pad_h),
                              RightPad(g.input[3], g.output[3], g.kernel_w, g.stride_w, g.pad_w)};
  dnnl::algorithm algorithm{};
  if (pad_r[0] < 0 || pad_r[1] < 0 || !impl.Algorithm(pad_r, &algorithm)) return false;
  impl.block = 0;
  impl.algorithm = algorithm;
  impl.pad_r = pad_r;
  try {
    impl.Create(g, pad_r, algorithm);
    impl.supported = true;
    VLOG(1) << "oneDNN pooling " << ShapeText(g.input) << ": " << Describe();
  } catch (const dnnl::error& e) {
    LOG(INFO) << "oneDNN does not take the pooling of input " << ShapeText(g.input) << " ("
              << e.what() << "); crema's kernels run it";
  }
  return impl.supported;
}

void DnnlPooling::Forward(const float* x, float* y, Workspace* ws, int block, bool blocked_y) {
  Impl& impl = *impl_;
  CREMA_ASSERT(impl.supported, "DnnlPooling::Forward before a successful Prepare");
  const DnnlPoolGeometry& g = impl.geometry;
  impl.ran_blocked = block > 0;
  if (block > 0) {
    const memory::desc src = DnnlChannelBlocked(impl.src.dims(), block),
                       dst = DnnlChannelBlocked(impl.dst.dims(), block);
    if (impl.block != block) {
      const dnnl::prop_kind kind =
          g.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
      const memory::dims strides = {g.stride_h, g.stride_w}, kernel = {g.kernel_h, g.kernel_w},
                         pad_l = {g.pad_h, g.pad_w};
      impl.blocked_pd = dnnl::pooling_forward::primitive_desc(
          dnnl::pooling_forward::desc(kind, impl.algorithm, src, dst, strides, kernel, pad_l,
                                      impl.pad_r),
          DnnlUserScratchpad(), DnnlEngine());
      impl.blocked = dnnl::pooling_forward(impl.blocked_pd);
      if (g.training) {
        impl.blocked_bwd_pd = dnnl::pooling_backward::primitive_desc(
            dnnl::pooling_backward::desc(impl.algorithm, src, dst, strides, kernel, pad_l,
                                         impl.pad_r),
            DnnlUserScratchpad(), DnnlEngine(), impl.blocked_pd);
        impl.blocked_bwd = dnnl::pooling_backward(impl.blocked_bwd_pd);
        // (One argmax buffer for both layouts: Backward takes the last Forward's.)
        const size_t floats = (impl.blocked_pd.workspace_desc().get_size() + 3) / 4;
        if (impl.workspace.size() < floats) impl.workspace.resize(floats);
      }
      impl.block = block;
    }
    std::vector<DnnlOperand> ops = {{DNNL_ARG_SRC, src, src, const_cast<float*>(x)},
                                    {DNNL_ARG_DST, blocked_y ? dst : impl.dst, dst, y, true}};
    const memory::desc ws_desc = impl.blocked_pd.workspace_desc();
    if (g.training && ws_desc.get_size() > 0)
      ops.push_back({DNNL_ARG_WORKSPACE, ws_desc, ws_desc, impl.workspace.data(), true});
    DnnlExecute(impl.blocked, impl.blocked_pd.scratchpad_desc(), ops, ws);
    return;
  }
  std::vector<DnnlOperand> ops = {{DNNL_ARG_SRC, impl.src, impl.src, const_cast<float*>(x)},
                                  {DNNL_ARG_DST, impl.dst, impl.dst, y, true}};
  const memory::desc ws_desc = impl.fwd_pd.workspace_desc();
  if (ws_desc.get_size() > 0)
    ops.push_back({DNNL_ARG_WORKSPACE, ws_desc, ws_desc, impl.workspace.data(), true});
  DnnlExecute(impl.fwd, impl.fwd_pd.scratchpad_desc(), ops, ws);
}

void DnnlPooling::Backward(const float* dy, float* dx, Workspace* ws, int dy_block, int dx_block) {
  Impl& impl = *impl_;
  CREMA_ASSERT(impl.supported && impl.geometry.training,
               "DnnlPooling::Backward without a training Prepare");
  // The primitive of the Forward's layout; dy and dx as the caller holds them (reordered where
  // they differ).
  const bool blocked = impl.ran_blocked;
  const dnnl::pooling_backward& primitive = blocked ? impl.blocked_bwd : impl.bwd;
  const dnnl::pooling_backward::primitive_desc& pd = blocked ? impl.blocked_bwd_pd : impl.bwd_pd;
  const memory::desc dy_user = DnnlChannelBlocked(impl.dst.dims(), dy_block),
                     dx_user = DnnlChannelBlocked(impl.src.dims(), dx_block);
  std::vector<DnnlOperand> ops = {
      {DNNL_ARG_DIFF_DST, dy_user, pd.diff_dst_desc(), const_cast<float*>(dy)},
      {DNNL_ARG_DIFF_SRC, dx_user, pd.diff_src_desc(), dx, true}};
  const memory::desc ws_desc = pd.workspace_desc();
  if (ws_desc.get_size() > 0)
    ops.push_back({DNNL_ARG_WORKSPACE, ws_desc, ws_desc, impl.workspace.data()});
  DnnlExecute(primitive, pd.scratchpad_desc(), ops, ws);
}

bool DnnlPooling::ForwardRanBlocked() const { return impl_->ran_blocked; }

std::string DnnlPooling::Describe() const {
  const Impl& impl = *impl_;
  if (!impl.supported) return "none";
  std::string text = std::string("fwd ") + impl.fwd_pd.impl_info_str();
  if (impl.geometry.training) text += std::string(", bwd ") + impl.bwd_pd.impl_info_str();
  return text;
}

#else  // without oneDNN in the build: every geometry stays on crema's kernels

struct DnnlPooling::Impl {};
DnnlPooling::DnnlPooling() : impl_(std::make_unique<Impl>()) {}
DnnlPooling::~DnnlPooling() = default;
bool DnnlPooling::Prepare(const DnnlPoolGeometry&) { return false; }
void DnnlPooling::Forward(const float*, float*, Workspace*, int, bool) {
  CREMA_ASSERT(false, "oneDNN is not in this build");
}
void DnnlPooling::Backward(const float*, float*, Workspace*, int, int) {
  CREMA_ASSERT(false, "oneDNN is not in this build");
}
bool DnnlPooling::ForwardRanBlocked() const { return false; }
std::string DnnlPooling::Describe() const { return "none"; }

#endif  // CREMA_WITH_DNNL

}  // namespace crema
