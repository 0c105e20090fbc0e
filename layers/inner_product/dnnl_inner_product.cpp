#include "layers/inner_product/dnnl_inner_product.hpp"

#include <glog/logging.h>

#include "crema/error.hpp"
#include "math/dnnl_engine.hpp"

namespace crema {

bool DnnlInnerProductGeometry::operator==(const DnnlInnerProductGeometry& o) const {
  return m == o.m && k == o.k && n == o.n && transpose == o.transpose && bias == o.bias;
}

#ifdef CREMA_WITH_DNNL

using dnnl::memory;

// The plain layouts (DnnlWeightedLayout) are the caller's.
struct DnnlInnerProduct::Impl
    : DnnlWeightedPrimitives<dnnl::inner_product_forward, dnnl::inner_product_backward_data,
                             dnnl::inner_product_backward_weights> {
  DnnlInnerProductGeometry geometry;

  void Create(const DnnlInnerProductGeometry& g) {
    src = DnnlPlain({g.m, g.k});
    dst = DnnlPlain({g.m, g.n});
    // oneDNN's weights are (N, K); crema's transposed ones are (K, N) in memory, i.e. (N, K)
    // with the axes' strides swapped.
    weights = memory::desc({g.n, g.k}, memory::data_type::f32,
                           g.transpose ? memory::format_tag::ba : memory::format_tag::ab);
    bias = g.bias ? DnnlPlain({g.n}) : memory::desc();
    fwd_pd = dnnl::inner_product_forward::primitive_desc(
        dnnl::inner_product_forward::desc(dnnl::prop_kind::forward_training, src, weights, bias,
                                          dst),
        DnnlUserScratchpad(), DnnlEngine());
    fwd = dnnl::inner_product_forward(fwd_pd);
  }

  void CreateBackward() override {
    bwd_data_pd = dnnl::inner_product_backward_data::primitive_desc(
        dnnl::inner_product_backward_data::desc(src, weights, dst), DnnlUserScratchpad(),
        DnnlEngine(), fwd_pd);
    bwd_data = dnnl::inner_product_backward_data(bwd_data_pd);
    bwd_weights_pd = dnnl::inner_product_backward_weights::primitive_desc(
        dnnl::inner_product_backward_weights::desc(src, weights, bias, dst), DnnlUserScratchpad(),
        DnnlEngine(), fwd_pd);
    bwd_weights = dnnl::inner_product_backward_weights(bwd_weights_pd);
  }
};

DnnlInnerProduct::DnnlInnerProduct() : impl_(std::make_unique<Impl>()) {}
DnnlInnerProduct::~DnnlInnerProduct() = default;

bool DnnlInnerProduct::Prepare(const DnnlInnerProductGeometry& geometry) {
  Impl& impl = *impl_;
  if (impl.prepared && impl.geometry == geometry) return impl.supported;
  impl.geometry = geometry;
  impl.prepared = true;
  impl.supported = false;
  impl.backward_ready = false;
  try {
    impl.Create(geometry);
    impl.supported = true;
    VLOG(1) << "oneDNN inner product " << geometry.m << "x" << geometry.k << " -> " << geometry.n
            << ": fwd " << impl.fwd_pd.impl_info_str();
  } catch (const dnnl::error& e) {
    LOG(INFO) << "oneDNN does not take the inner product " << geometry.m << "x" << geometry.k
              << " -> " << geometry.n << " (" << e.what() << "); crema's kernels run it";
  }
  return impl.supported;
}

void DnnlInnerProduct::Forward(const float* x, const float* w, const float* bias, float* y,
                               Workspace* ws) {
  impl_->Forward(x, w, bias, y, ws);
}

void DnnlInnerProduct::Backward(const DnnlBackwardArgs& args, Workspace* ws) {
  impl_->Backward(args, ws);
}

#else  // without oneDNN in the build: every geometry stays on crema's kernels

struct DnnlInnerProduct::Impl {};
DnnlInnerProduct::DnnlInnerProduct() : impl_(std::make_unique<Impl>()) {}
DnnlInnerProduct::~DnnlInnerProduct() = default;
bool DnnlInnerProduct::Prepare(const DnnlInnerProductGeometry&) { return false; }
void DnnlInnerProduct::Forward(const float*, const float*, const float*, float*, Workspace*) {
  CREMA_ASSERT(false, "oneDNN is not in this build");
}
void DnnlInnerProduct::Backward(const DnnlBackwardArgs&, Workspace*) {
  CREMA_ASSERT(false, "oneDNN is not in this build");
}

#endif  // CREMA_WITH_DNNL

}  // namespace crema
