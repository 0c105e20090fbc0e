#include "layers/recurrent/rnn_layer.hpp"

#include <cmath>

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void RNNLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  RecurrentLayer::Reshape(bottom, top);
  for (Blob* b : {&gx_, &gs_, &h_, &h_conted_, &o_, &step_})
    if (b->dtype() != dtype()) b->set_dtype(dtype());
  gx_.Reshape(std::vector<int>{T_, N_, hidden_});
  gs_.Reshape(std::vector<int>{N_, hidden_});
  h_.Reshape(std::vector<int>{T_ + 1, N_, hidden_});
  h_conted_.Reshape(std::vector<int>{T_, N_, hidden_});
  o_.Reshape(std::vector<int>{T_, N_, hidden_});
  step_.Reshape(std::vector<int>{3, N_, hidden_});
}

template <typename T>
void RNNLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const int H = hidden_, N = N_;
  const int64_t step = int64_t{N} * H;
  T* gx = gx_.mutable_cpu_data<T>();
  T* gs = gs_.mutable_cpu_data<T>();
  InputTransform<T>(bottom, gx, gs);
  T* h = h_.mutable_cpu_data<T>();
  T* h_conted = h_conted_.mutable_cpu_data<T>();
  T* o = o_.mutable_cpu_data<T>();
  const T* cont = bottom[1]->cpu_data<T>();
  const T* w_hh = blobs_[first_recurrent_param()]->cpu_data<T>();
  const T* w_ho = blobs_[first_recurrent_param() + 1]->cpu_data<T>();
  const T* b_o = blobs_[first_recurrent_param() + 2]->cpu_data<T>();
  cpu::Copy<T>(step, InitialState(bottom, 0).cpu_data<T>(), h);
  for (int t = 0; t < T_; ++t) {
    const T* h_prev = h + t * step;
    T* conted = h_conted + t * step;
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < H; ++d) conted[n * H + d] = h_prev[n * H + d] * cont[t * N + n];
    // h_t = tanh(W_hh h_conted + gx_t [+ gs]), summed in Caffe's order.
    T* h_t = h + (t + 1) * step;
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kYes, N, H, H, T(1), conted, w_hh, T(0), h_t);
    for (int64_t i = 0; i < step; ++i) {
      T sum = h_t[i] + gx[t * step + i];
      if (static_input_) sum += gs[i];
      h_t[i] = std::tanh(sum);
    }
    T* o_t = o + t * step;
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kYes, N, H, H, T(1), h_t, w_ho, T(0), o_t);
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < H; ++d) o_t[n * H + d] = std::tanh(o_t[n * H + d] + b_o[d]);
  }
  cpu::Copy<T>(T_ * step, o, top[0]->mutable_cpu_data<T>());
  SetFinalState<T>(top, 0, h + T_ * step);
  if (debug_info()) LogSteps<T>("h", h + step, step);
}

template <typename T>
void RNNLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                        const BlobVec& bottom) {
  const int H = hidden_, N = N_;
  const int64_t step = int64_t{N} * H;
  const int p = first_recurrent_param();
  const T* h = h_.cpu_data<T>();
  const T* h_conted = h_conted_.cpu_data<T>();
  const T* o = o_.cpu_data<T>();
  const T* cont = bottom[1]->cpu_data<T>();
  const T* top_diff = top[0]->cpu_diff<T>();
  const T* w_hh = blobs_[p]->cpu_data<T>();
  const T* w_ho = blobs_[p + 1]->cpu_data<T>();
  T* w_hh_diff = param_propagate_down(p) ? blobs_[p]->mutable_cpu_diff<T>() : nullptr;
  T* w_ho_diff = param_propagate_down(p + 1) ? blobs_[p + 1]->mutable_cpu_diff<T>() : nullptr;
  T* b_o_diff = param_propagate_down(p + 2) ? blobs_[p + 2]->mutable_cpu_diff<T>() : nullptr;
  T* pre_diff = gx_.mutable_cpu_diff<T>();  // gradient of h_t's pre-activation = of gx_t
  T* scratch = step_.mutable_cpu_data<T>();
  T* o_in_diff = scratch;
  T* h_diff = scratch + step;
  T* h_next_diff = scratch + 2 * step;  // gradient reaching h_t from step t + 1
  if (NumExposed() > 0)
    cpu::Copy<T>(step, top[1]->cpu_diff<T>(), h_next_diff);
  else
    cpu::Set<T>(step, T(0), h_next_diff);
  for (int t = T_ - 1; t >= 0; --t) {
    const T* o_t = o + t * step;
    const T* h_t = h + (t + 1) * step;
    for (int64_t i = 0; i < step; ++i)
      o_in_diff[i] = top_diff[t * step + i] * (1 - o_t[i] * o_t[i]);
    if (w_ho_diff)
      cpu::Gemm<T>(cpu::Trans::kYes, cpu::Trans::kNo, H, H, N, T(1), o_in_diff, h_t, T(1),
                   w_ho_diff);
    if (b_o_diff)
      for (int n = 0; n < N; ++n)
        for (int d = 0; d < H; ++d) b_o_diff[d] += o_in_diff[n * H + d];
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kNo, N, H, H, T(1), o_in_diff, w_ho, T(0), h_diff);
    T* pre_t = pre_diff + t * step;
    for (int64_t i = 0; i < step; ++i)
      pre_t[i] = (h_diff[i] + h_next_diff[i]) * (1 - h_t[i] * h_t[i]);
    if (w_hh_diff)
      cpu::Gemm<T>(cpu::Trans::kYes, cpu::Trans::kNo, H, H, N, T(1), pre_t, h_conted + t * step,
                   T(1), w_hh_diff);
    // Through h_conted = cont_t h_{t-1}.
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kNo, N, H, H, T(1), pre_t, w_hh, T(0), h_next_diff);
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < H; ++d) h_next_diff[n * H + d] *= cont[t * N + n];
  }
  if (NumExposed() > 0 && propagate_down[2 + static_input_])
    cpu::Copy<T>(step, h_next_diff, bottom[2 + static_input_]->mutable_cpu_diff<T>());
  T* gs_diff = nullptr;
  if (static_input_) {
    gs_diff = gs_.mutable_cpu_diff<T>();
    cpu::Set<T>(step, T(0), gs_diff);
    for (int t = 0; t < T_; ++t) cpu::Axpy<T>(step, T(1), pre_diff + t * step, gs_diff);
  }
  InputTransformBackward<T>(bottom, propagate_down, pre_diff, gs_diff);
  if (debug_info()) LogSteps<T>("h pre-activation diff", pre_diff, step);
}

void RNNLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Forward<T>(bottom, top));
}

void RNNLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() +
                      "cannot backpropagate to the sequence indicators (bottom[1])");
  CREMA_DISPATCH_FLOAT(dtype(), T, Backward<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(RNN, RNNLayer);

}  // namespace crema
