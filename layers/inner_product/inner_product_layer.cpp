#include "layers/inner_product/inner_product_layer.hpp"

#include <memory>
#include <string>
#include <type_traits>

#include "crema/layer_registry.hpp"
#include "layers/inner_product/dnnl_inner_product.hpp"
#include "math/activation.hpp"
#include "math/few_rows_gemm.hpp"
#include "math/math.hpp"

namespace crema {

int InnerProductLayer::Axis(const Blob& bottom) const {
  const int axis = layer_param_.inner_product_param().axis();
  const int num_axes = bottom.num_axes();
  CREMA_CHECK_PARAM(axis >= -num_axes && axis < num_axes, "inner_product_param.axis",
                    "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                    bottom.shape_string(), ", got ", axis);
  return bottom.CanonicalAxisIndex(axis);
}

void InnerProductLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const InnerProductParameter& param = layer_param_.inner_product_param();
  N_ = static_cast<int>(param.num_output());
  CREMA_CHECK_PARAM(N_ > 0, "inner_product_param.num_output", "must be > 0, got ", N_);
  bias_term_ = param.bias_term();
  transpose_ = param.transpose();
  const int64_t k = bottom[0]->count(Axis(*bottom[0]));
  CREMA_CHECK_SHAPE(k > 0 && k <= INT32_MAX, "the inner dimension of bottom ",
                    bottom[0]->shape_string(), " must be in [1, 2^31), got ", k);
  K_ = static_cast<int>(k);
  const std::vector<int> weight_shape =
      transpose_ ? std::vector<int>{K_, N_} : std::vector<int>{N_, K_};
  const std::vector<int> bias_shape = {N_};
  // Weights that came with the parameter (a .caffemodel) are checked; else the fillers run.
  SetUpLearnableBlobs(WeightAndBias("inner_product_param", weight_shape, param.weight_filler(),
                                    bias_term_, bias_shape, param.bias_filler()));
  param_propagate_down_.assign(blobs_.size(), true);
  bias_multiplier_.set_dtype(dtype());
}

void InnerProductLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0], "does not support in-place computation");
  const int axis = Axis(*bottom[0]);
  const int64_t new_k = bottom[0]->count(axis);
  CREMA_CHECK_SHAPE(new_k == K_, "bottom ", bottom[0]->shape_string(), " has inner dimension ",
                    new_k, " (axes ", axis, " on), but the layer was set up for ", K_,
                    " (inner_product_param.num_output ", N_, ")");
  const int64_t m = bottom[0]->count(0, axis);
  CREMA_CHECK_SHAPE(m <= INT32_MAX, "bottom ", bottom[0]->shape_string(),
                    " has too many rows for the inner product: ", m);
  M_ = static_cast<int>(m);
  std::vector<int> top_shape(bottom[0]->shape().begin(), bottom[0]->shape().begin() + axis);
  top_shape.push_back(N_);
  top[0]->Reshape(top_shape);
  if (bias_term_ && bias_multiplier_.count() != M_) {
    bias_multiplier_.Reshape({M_});
    CREMA_DISPATCH_FLOAT(dtype(), T, cpu::Set<T>(M_, T(1), bias_multiplier_.mutable_cpu_data<T>()));
  }
}

template <typename T>
void InnerProductLayer::ForwardT(const BlobVec& bottom, const BlobVec& top) {
  const T* bottom_data = bottom[0]->cpu_data<T>();
  T* top_data = top[0]->mutable_cpu_data<T>();
  const T* weight = blobs_[0]->cpu_data<T>();
  bool done = false;
  if constexpr (std::is_same_v<T, float>) {
    if (!transpose_) {  // Caffe's n x k weights, streamed once for a few rows (a small batch)
      cpu::GemmFewRows(M_, N_, K_, bottom_data, weight, top_data);
      done = true;
    }
  }
  if (!done) {
    cpu::Gemm<T>(cpu::Trans::kNo, transpose_ ? cpu::Trans::kNo : cpu::Trans::kYes, M_, N_, K_, T(1),
                 bottom_data, weight, T(0), top_data);
  }
  if (bias_term_) {
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kNo, M_, N_, 1, T(1), bias_multiplier_.cpu_data<T>(),
                 blobs_[1]->cpu_data<T>(), T(1), top_data);
  }
  if (fused_relu())
    ReLUInPlace(static_cast<int64_t>(M_) * N_, static_cast<T>(fused_relu_slope()), top_data);
}

template <typename T>
void InnerProductLayer::BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                                  const BlobVec& bottom) {
  const T* top_diff = top[0]->cpu_diff<T>();
  bool weight_done = false, bottom_done = false;
  if constexpr (std::is_same_v<T, float>) {
    // Caffe's n x k weights at a small batch: one pass over the weights and their gradient (and
    // the solver's step on the weights, where it handed it over).
    if (!transpose_ && cpu::FewRowsGemmApplies(M_) &&
        (param_propagate_down(0) || propagate_down[0])) {
      bool zero = true;
      float* weight_diff =
          param_propagate_down(0) ? blobs_[0]->mutable_cpu_diff_to_add<float>(&zero) : nullptr;
      const SgdStep* step = weight_diff && zero ? TakeFusedSgdStep(0) : nullptr;
      cpu::FewRowsSgdStep kernel_step{};
      if (step) {
        kernel_step = {step->rate, step->momentum, step->decay,
                       blobs_[0]->mutable_cpu_data<float>(),
                       step->history->mutable_cpu_data<float>()};
      }
      cpu::GemmFewRowsBackward(M_, N_, K_, top_diff, bottom[0]->cpu_data<float>(),
                               blobs_[0]->cpu_data<float>(), weight_diff, !zero,
                               propagate_down[0] ? bottom[0]->mutable_cpu_diff<float>() : nullptr,
                               step ? &kernel_step : nullptr);
      weight_done = bottom_done = true;
    }
  }
  if (param_propagate_down(0) && !weight_done) {
    const T* bottom_data = bottom[0]->cpu_data<T>();
    bool zero = false;
    T* weight_diff = blobs_[0]->mutable_cpu_diff_to_add<T>(&zero);
    const T beta = zero ? T(0) : T(1);
    if (transpose_) {
      cpu::Gemm<T>(cpu::Trans::kYes, cpu::Trans::kNo, K_, N_, M_, T(1), bottom_data, top_diff, beta,
                   weight_diff);
    } else {
      cpu::Gemm<T>(cpu::Trans::kYes, cpu::Trans::kNo, N_, K_, M_, T(1), top_diff, bottom_data, beta,
                   weight_diff);
    }
  }
  if (bias_term_ && param_propagate_down(1)) {
    bool zero = false;
    T* bias_diff = blobs_[1]->mutable_cpu_diff_to_add<T>(&zero);
    cpu::Gemv<T>(cpu::Trans::kYes, M_, N_, T(1), top_diff, bias_multiplier_.cpu_data<T>(),
                 zero ? T(0) : T(1), bias_diff);
  }
  if (propagate_down[0] && !bottom_done) {
    cpu::Gemm<T>(cpu::Trans::kNo, transpose_ ? cpu::Trans::kYes : cpu::Trans::kNo, M_, K_, N_, T(1),
                 top_diff, blobs_[0]->cpu_data<T>(), T(0), bottom[0]->mutable_cpu_diff<T>());
  }
}

// ---- oneDNN CPU engine ----
CpuEngine InnerProductLayer::DnnlPolicy() {
  const CpuEngine policy = LayerCpuEngine();
  if (policy == CpuEngine::kCaffe || dtype() != DataType::kFloat32) return CpuEngine::kCaffe;
  if (!dnnl_) dnnl_ = std::make_shared<DnnlInnerProduct>();
  return dnnl_->Prepare({M_, K_, N_, transpose_, bias_term_}) ? policy : CpuEngine::kCaffe;
}

void InnerProductLayer::BackwardDnnl(const BlobVec& top, const std::vector<bool>& propagate_down,
                                     const BlobVec& bottom) {
  const bool weight_down = param_propagate_down(0);
  const bool bias_down = bias_term_ && param_propagate_down(1);
  DnnlBackwardArgs args;
  args.x = bottom[0]->cpu_data<float>();
  args.dy = top[0]->cpu_diff<float>();
  args.w = blobs_[0]->cpu_data<float>();
  if (weight_down) args.dw = blobs_[0]->mutable_cpu_diff_to_add<float>(&args.overwrite_dw);
  if (bias_down) args.db = blobs_[1]->mutable_cpu_diff_to_add<float>(&args.overwrite_db);
  if (propagate_down[0]) args.dx = bottom[0]->mutable_cpu_diff<float>();
  dnnl_->Backward(args, &workspace());
}
// ---- end oneDNN CPU engine ----

void InnerProductLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  const auto crema = [&] { CREMA_DISPATCH_FLOAT(dtype(), T, ForwardT<T>(bottom, top)); };
  const auto dnnl = [&] {
    float* y = top[0]->mutable_cpu_data<float>();
    dnnl_->Forward(bottom[0]->cpu_data<float>(), blobs_[0]->cpu_data<float>(),
                   bias_term_ ? blobs_[1]->cpu_data<float>() : nullptr, y, &workspace());
    if (fused_relu()) ReLUInPlace(top[0]->count(), fused_relu_slope(), y);
  };
  cpu_engine_choice_.Run(DnnlPolicy(), name(), "forward", bottom[0]->shape(), crema, dnnl);
}

void InnerProductLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                                    const BlobVec& bottom) {
  const auto crema = [&] {
    CREMA_DISPATCH_FLOAT(dtype(), T, BackwardT<T>(top, propagate_down, bottom));
  };
  cpu_engine_choice_.Run(DnnlPolicy(), name(), "backward", bottom[0]->shape(), crema,
                         [&] { BackwardDnnl(top, propagate_down, bottom); });
}

CREMA_REGISTER_LAYER(InnerProduct, InnerProductLayer);

}  // namespace crema
