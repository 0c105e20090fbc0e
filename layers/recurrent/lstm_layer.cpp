#include "layers/recurrent/lstm_layer.hpp"

#include <utility>

#include "crema/layer_registry.hpp"
#include "layers/recurrent/recurrent_ops.hpp"
#include "math/math.hpp"

namespace crema {

void LSTMLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  RecurrentLayer::Reshape(bottom, top);
  for (Blob* b : {&gx_, &gs_, &gates_, &h_, &c_, &h_conted_, &step_})
    if (b->dtype() != dtype()) b->set_dtype(dtype());
  gx_.Reshape(std::vector<int>{T_, N_, 4 * hidden_});
  gs_.Reshape(std::vector<int>{N_, 4 * hidden_});
  gates_.Reshape(std::vector<int>{T_, N_, 4 * hidden_});
  h_.Reshape(std::vector<int>{T_ + 1, N_, hidden_});
  c_.Reshape(std::vector<int>{T_ + 1, N_, hidden_});
  h_conted_.Reshape(std::vector<int>{T_, N_, hidden_});
  step_.Reshape(std::vector<int>{4, N_, hidden_});
}

template <typename T, typename Ops>
void LSTMLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const int H = hidden_, N = N_, G = 4 * hidden_;
  const int64_t step = int64_t{N} * H, gate_step = int64_t{N} * G;
  T* gx = Ops::template MutableData<T>(&gx_);
  T* gs = Ops::template MutableData<T>(&gs_);
  InputTransform<T, Ops>(bottom, gx, gs);
  T* gates = Ops::template MutableData<T>(&gates_);
  T* h = Ops::template MutableData<T>(&h_);
  T* c = Ops::template MutableData<T>(&c_);
  T* h_conted = Ops::template MutableData<T>(&h_conted_);
  const T* cont = Ops::template Data<T>(*bottom[1]);
  const T* w_hc = Ops::template Data<T>(*blobs_[first_recurrent_param()]);
  Ops::Copy(step, Ops::template Data<T>(InitialState(bottom, 0)), h);
  Ops::Copy(step, Ops::template Data<T>(InitialState(bottom, 1)), c);
  for (int t = 0; t < T_; ++t) {
    T* conted = h_conted + t * step;
    Ops::ScaleRows(N, H, h + t * step, cont + t * N, conted);
    T* gates_t = gates + t * gate_step;
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kYes, N, G, H, T(1), conted, w_hc, T(0), gates_t);
    Ops::Add(gate_step, gates_t, gx + t * gate_step, gates_t);
    if (static_input_) Ops::Add(gate_step, gates_t, gs, gates_t);
    Ops::LSTMUnitForward(N, H, c + t * step, gates_t, cont + t * N, c + (t + 1) * step,
                         h + (t + 1) * step);
  }
  Ops::Copy(T_ * step, h + step, Ops::template MutableData<T>(top[0]));
  SetFinalState<T, Ops>(top, 0, h + T_ * step);
  SetFinalState<T, Ops>(top, 1, c + T_ * step);
  if (debug_info()) {
    LogSteps<T>("h", h_.cpu_data<T>() + step, step);
    LogSteps<T>("c", c_.cpu_data<T>() + step, step);
  }
}

template <typename T, typename Ops>
void LSTMLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) {
  CheckPropagateDown(propagate_down);
  const int H = hidden_, N = N_, G = 4 * hidden_;
  const int64_t step = int64_t{N} * H, gate_step = int64_t{N} * G;
  const int p = first_recurrent_param();
  const T* gates = Ops::template Data<T>(gates_);
  const T* c = Ops::template Data<T>(c_);
  const T* h_conted = Ops::template Data<T>(h_conted_);
  const T* cont = Ops::template Data<T>(*bottom[1]);
  const T* top_diff = Ops::template Diff<T>(*top[0]);
  const T* w_hc = Ops::template Data<T>(*blobs_[p]);
  T* w_hc_diff = param_propagate_down(p) ? Ops::template MutableDiff<T>(blobs_[p].get()) : nullptr;
  T* gates_diff = Ops::template MutableDiff<T>(&gx_);
  T* scratch = Ops::template MutableData<T>(&step_);
  T* h_diff = scratch;                  // gradient of h_t
  T* h_next_diff = scratch + step;      // gradient reaching h_t from step t + 1
  T* c_diff = scratch + 2 * step;       // gradient of c_t
  T* c_prev_diff = scratch + 3 * step;  // gradient of c_{t-1}
  if (NumExposed() > 0) {
    Ops::Copy(step, Ops::template Diff<T>(*top[1]), h_next_diff);
    Ops::Copy(step, Ops::template Diff<T>(*top[2]), c_diff);
  } else {
    Ops::Set(step, T(0), h_next_diff);
    Ops::Set(step, T(0), c_diff);
  }
  for (int t = T_ - 1; t >= 0; --t) {
    Ops::Add(step, top_diff + t * step, h_next_diff, h_diff);
    T* gates_diff_t = gates_diff + t * gate_step;
    Ops::LSTMUnitBackward(N, H, c + t * step, gates + t * gate_step, cont + t * N,
                          c + (t + 1) * step, c_diff, h_diff, c_prev_diff, gates_diff_t);
    std::swap(c_diff, c_prev_diff);
    if (w_hc_diff)
      Ops::Gemm(cpu::Trans::kYes, cpu::Trans::kNo, G, H, N, T(1), gates_diff_t, h_conted + t * step,
                T(1), w_hc_diff);
    // Through h_conted = cont_t h_{t-1}.
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kNo, N, H, G, T(1), gates_diff_t, w_hc, T(0),
              h_next_diff);
    Ops::ScaleRows(N, H, h_next_diff, cont + t * N, h_next_diff);
  }
  if (NumExposed() > 0) {
    const int h0 = 2 + static_input_;
    if (propagate_down[h0]) Ops::Copy(step, h_next_diff, Ops::template MutableDiff<T>(bottom[h0]));
    if (propagate_down[h0 + 1])
      Ops::Copy(step, c_diff, Ops::template MutableDiff<T>(bottom[h0 + 1]));
  }
  T* gs_diff = nullptr;
  if (static_input_) {
    gs_diff = Ops::template MutableDiff<T>(&gs_);
    Ops::Set(gate_step, T(0), gs_diff);
    Ops::SumRows(T_, gate_step, gates_diff, gs_diff);
  }
  InputTransformBackward<T, Ops>(bottom, propagate_down, gates_diff, gs_diff);
  if (debug_info()) LogSteps<T>("gate diff", gx_.cpu_diff<T>(), gate_step);
}

#ifdef CREMA_WITH_CUDA
// The GPU path (lstm_layer.cu) runs the same steps on the device.
template void LSTMLayer::Forward<float, recurrent::GpuOps>(const BlobVec&, const BlobVec&);
template void LSTMLayer::Forward<double, recurrent::GpuOps>(const BlobVec&, const BlobVec&);
template void LSTMLayer::Backward<float, recurrent::GpuOps>(const BlobVec&,
                                                            const std::vector<bool>&,
                                                            const BlobVec&);
template void LSTMLayer::Backward<double, recurrent::GpuOps>(const BlobVec&,
                                                             const std::vector<bool>&,
                                                             const BlobVec&);
#endif

void LSTMLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Forward<T, recurrent::CpuOps>(bottom, top));
}

void LSTMLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Backward<T, recurrent::CpuOps>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(LSTM, LSTMLayer);

}  // namespace crema
