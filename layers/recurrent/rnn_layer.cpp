#include "layers/recurrent/rnn_layer.hpp"

#include "crema/layer_registry.hpp"
#include "layers/recurrent/recurrent_ops.hpp"
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

template <typename T, typename Ops>
void RNNLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const int H = hidden_, N = N_;
  const int64_t step = int64_t{N} * H;
  T* gx = Ops::template MutableData<T>(&gx_);
  T* gs = Ops::template MutableData<T>(&gs_);
  InputTransform<T, Ops>(bottom, gx, gs);
  T* h = Ops::template MutableData<T>(&h_);
  T* h_conted = Ops::template MutableData<T>(&h_conted_);
  T* o = Ops::template MutableData<T>(&o_);
  const T* cont = Ops::template Data<T>(*bottom[1]);
  const T* w_hh = Ops::template Data<T>(*blobs_[first_recurrent_param()]);
  const T* w_ho = Ops::template Data<T>(*blobs_[first_recurrent_param() + 1]);
  const T* b_o = Ops::template Data<T>(*blobs_[first_recurrent_param() + 2]);
  Ops::Copy(step, Ops::template Data<T>(InitialState(bottom, 0)), h);
  for (int t = 0; t < T_; ++t) {
    T* conted = h_conted + t * step;
    Ops::ScaleRows(N, H, h + t * step, cont + t * N, conted);
    // h_t = tanh(W_hh h_conted + gx_t [+ gs]), summed in Caffe's order.
    T* h_t = h + (t + 1) * step;
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kYes, N, H, H, T(1), conted, w_hh, T(0), h_t);
    Ops::Add(step, h_t, gx + t * step, h_t);
    if (static_input_) Ops::Add(step, h_t, gs, h_t);
    Ops::Tanh(step, h_t, h_t);
    // o_t = tanh(W_ho h_t + b_o).
    T* o_t = o + t * step;
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kYes, N, H, H, T(1), h_t, w_ho, T(0), o_t);
    Ops::AddToRows(N, H, b_o, o_t);
    Ops::Tanh(step, o_t, o_t);
  }
  Ops::Copy(T_ * step, o, Ops::template MutableData<T>(top[0]));
  SetFinalState<T, Ops>(top, 0, h + T_ * step);
  if (debug_info()) LogSteps<T>("h", h_.cpu_data<T>() + step, step);
}

template <typename T, typename Ops>
void RNNLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                        const BlobVec& bottom) {
  CheckPropagateDown(propagate_down);
  const int H = hidden_, N = N_;
  const int64_t step = int64_t{N} * H;
  const int p = first_recurrent_param();
  const T* h = Ops::template Data<T>(h_);
  const T* h_conted = Ops::template Data<T>(h_conted_);
  const T* o = Ops::template Data<T>(o_);
  const T* cont = Ops::template Data<T>(*bottom[1]);
  const T* top_diff = Ops::template Diff<T>(*top[0]);
  const T* w_hh = Ops::template Data<T>(*blobs_[p]);
  const T* w_ho = Ops::template Data<T>(*blobs_[p + 1]);
  T* w_hh_diff = param_propagate_down(p) ? Ops::template MutableDiff<T>(blobs_[p].get()) : nullptr;
  T* w_ho_diff =
      param_propagate_down(p + 1) ? Ops::template MutableDiff<T>(blobs_[p + 1].get()) : nullptr;
  T* b_o_diff =
      param_propagate_down(p + 2) ? Ops::template MutableDiff<T>(blobs_[p + 2].get()) : nullptr;
  T* pre_diff = Ops::template MutableDiff<T>(&gx_);  // gradient of h_t's pre-activation = of gx_t
  T* scratch = Ops::template MutableData<T>(&step_);
  T* o_in_diff = scratch;
  T* h_diff = scratch + step;
  T* h_next_diff = scratch + 2 * step;  // gradient reaching h_t from step t + 1
  if (NumExposed() > 0)
    Ops::Copy(step, Ops::template Diff<T>(*top[1]), h_next_diff);
  else
    Ops::Set(step, T(0), h_next_diff);
  for (int t = T_ - 1; t >= 0; --t) {
    const T* o_t = o + t * step;
    const T* h_t = h + (t + 1) * step;
    Ops::TanhBackward(step, top_diff + t * step, o_t, o_in_diff);
    if (w_ho_diff)
      Ops::Gemm(cpu::Trans::kYes, cpu::Trans::kNo, H, H, N, T(1), o_in_diff, h_t, T(1), w_ho_diff);
    if (b_o_diff) Ops::SumRows(N, H, o_in_diff, b_o_diff);
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kNo, N, H, H, T(1), o_in_diff, w_ho, T(0), h_diff);
    // Through h_t = tanh(...): the gradients from o_t and from step t + 1.
    T* pre_t = pre_diff + t * step;
    Ops::Add(step, h_diff, h_next_diff, h_diff);
    Ops::TanhBackward(step, h_diff, h_t, pre_t);
    if (w_hh_diff)
      Ops::Gemm(cpu::Trans::kYes, cpu::Trans::kNo, H, H, N, T(1), pre_t, h_conted + t * step, T(1),
                w_hh_diff);
    // Through h_conted = cont_t h_{t-1}.
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kNo, N, H, H, T(1), pre_t, w_hh, T(0), h_next_diff);
    Ops::ScaleRows(N, H, h_next_diff, cont + t * N, h_next_diff);
  }
  if (NumExposed() > 0 && propagate_down[2 + static_input_])
    Ops::Copy(step, h_next_diff, Ops::template MutableDiff<T>(bottom[2 + static_input_]));
  T* gs_diff = nullptr;
  if (static_input_) {
    gs_diff = Ops::template MutableDiff<T>(&gs_);
    Ops::Set(step, T(0), gs_diff);
    Ops::SumRows(T_, step, pre_diff, gs_diff);
  }
  InputTransformBackward<T, Ops>(bottom, propagate_down, pre_diff, gs_diff);
  if (debug_info()) LogSteps<T>("h pre-activation diff", gx_.cpu_diff<T>(), step);
}

#ifdef CREMA_WITH_CUDA
// The GPU path (rnn_layer.cu) runs the same steps on the device.
template void RNNLayer::Forward<float, recurrent::GpuOps>(const BlobVec&, const BlobVec&);
template void RNNLayer::Forward<double, recurrent::GpuOps>(const BlobVec&, const BlobVec&);
template void RNNLayer::Backward<float, recurrent::GpuOps>(const BlobVec&, const std::vector<bool>&,
                                                           const BlobVec&);
template void RNNLayer::Backward<double, recurrent::GpuOps>(const BlobVec&,
                                                            const std::vector<bool>&,
                                                            const BlobVec&);
#endif

void RNNLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Forward<T, recurrent::CpuOps>(bottom, top));
}

void RNNLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                           const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Backward<T, recurrent::CpuOps>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(RNN, RNNLayer);

}  // namespace crema
