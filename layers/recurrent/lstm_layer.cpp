#include "layers/recurrent/lstm_layer.hpp"

#include <utility>

#include "crema/layer_registry.hpp"
#include "layers/lstm_unit/lstm_unit_layer.hpp"
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

template <typename T>
void LSTMLayer::Forward(const BlobVec& bottom, const BlobVec& top) {
  const int H = hidden_, N = N_, G = 4 * hidden_;
  const int64_t step = int64_t{N} * H, gate_step = int64_t{N} * G;
  T* gx = gx_.mutable_cpu_data<T>();
  T* gs = gs_.mutable_cpu_data<T>();
  InputTransform<T>(bottom, gx, gs);
  T* gates = gates_.mutable_cpu_data<T>();
  T* h = h_.mutable_cpu_data<T>();
  T* c = c_.mutable_cpu_data<T>();
  T* h_conted = h_conted_.mutable_cpu_data<T>();
  const T* cont = bottom[1]->cpu_data<T>();
  const T* w_hc = blobs_[first_recurrent_param()]->cpu_data<T>();
  cpu::Copy<T>(step, InitialState(bottom, 0).cpu_data<T>(), h);
  cpu::Copy<T>(step, InitialState(bottom, 1).cpu_data<T>(), c);
  for (int t = 0; t < T_; ++t) {
    const T* h_prev = h + t * step;
    T* conted = h_conted + t * step;
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < H; ++d) conted[n * H + d] = h_prev[n * H + d] * cont[t * N + n];
    T* gates_t = gates + t * gate_step;
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kYes, N, G, H, T(1), conted, w_hc, T(0), gates_t);
    for (int64_t i = 0; i < gate_step; ++i) {
      gates_t[i] += gx[t * gate_step + i];
      if (static_input_) gates_t[i] += gs[i];
    }
    lstm_unit::Forward<T>(N, H, c + t * step, gates_t, cont + t * N, c + (t + 1) * step,
                          h + (t + 1) * step);
  }
  cpu::Copy<T>(T_ * step, h + step, top[0]->mutable_cpu_data<T>());
  SetFinalState<T>(top, 0, h + T_ * step);
  SetFinalState<T>(top, 1, c + T_ * step);
  if (debug_info()) {
    LogSteps<T>("h", h + step, step);
    LogSteps<T>("c", c + step, step);
  }
}

template <typename T>
void LSTMLayer::Backward(const BlobVec& top, const std::vector<bool>& propagate_down,
                         const BlobVec& bottom) {
  const int H = hidden_, N = N_, G = 4 * hidden_;
  const int64_t step = int64_t{N} * H, gate_step = int64_t{N} * G;
  const int p = first_recurrent_param();
  const T* gates = gates_.cpu_data<T>();
  const T* c = c_.cpu_data<T>();
  const T* h_conted = h_conted_.cpu_data<T>();
  const T* cont = bottom[1]->cpu_data<T>();
  const T* top_diff = top[0]->cpu_diff<T>();
  const T* w_hc = blobs_[p]->cpu_data<T>();
  T* w_hc_diff = param_propagate_down(p) ? blobs_[p]->mutable_cpu_diff<T>() : nullptr;
  T* gates_diff = gx_.mutable_cpu_diff<T>();
  T* scratch = step_.mutable_cpu_data<T>();
  T* h_diff = scratch;                  // gradient of h_t
  T* h_next_diff = scratch + step;      // gradient reaching h_t from step t + 1
  T* c_diff = scratch + 2 * step;       // gradient of c_t
  T* c_prev_diff = scratch + 3 * step;  // gradient of c_{t-1}
  if (NumExposed() > 0) {
    cpu::Copy<T>(step, top[1]->cpu_diff<T>(), h_next_diff);
    cpu::Copy<T>(step, top[2]->cpu_diff<T>(), c_diff);
  } else {
    cpu::Set<T>(step, T(0), h_next_diff);
    cpu::Set<T>(step, T(0), c_diff);
  }
  for (int t = T_ - 1; t >= 0; --t) {
    for (int64_t i = 0; i < step; ++i) h_diff[i] = top_diff[t * step + i] + h_next_diff[i];
    T* gates_diff_t = gates_diff + t * gate_step;
    lstm_unit::Backward<T>(N, H, c + t * step, gates + t * gate_step, cont + t * N,
                           c + (t + 1) * step, c_diff, h_diff, c_prev_diff, gates_diff_t);
    std::swap(c_diff, c_prev_diff);
    if (w_hc_diff)
      cpu::Gemm<T>(cpu::Trans::kYes, cpu::Trans::kNo, G, H, N, T(1), gates_diff_t,
                   h_conted + t * step, T(1), w_hc_diff);
    // Through h_conted = cont_t h_{t-1}.
    cpu::Gemm<T>(cpu::Trans::kNo, cpu::Trans::kNo, N, H, G, T(1), gates_diff_t, w_hc, T(0),
                 h_next_diff);
    for (int n = 0; n < N; ++n)
      for (int d = 0; d < H; ++d) h_next_diff[n * H + d] *= cont[t * N + n];
  }
  if (NumExposed() > 0) {
    const int h0 = 2 + static_input_;
    if (propagate_down[h0]) cpu::Copy<T>(step, h_next_diff, bottom[h0]->mutable_cpu_diff<T>());
    if (propagate_down[h0 + 1]) cpu::Copy<T>(step, c_diff, bottom[h0 + 1]->mutable_cpu_diff<T>());
  }
  T* gs_diff = nullptr;
  if (static_input_) {
    gs_diff = gs_.mutable_cpu_diff<T>();
    cpu::Set<T>(gate_step, T(0), gs_diff);
    for (int t = 0; t < T_; ++t) cpu::Axpy<T>(gate_step, T(1), gates_diff + t * gate_step, gs_diff);
  }
  InputTransformBackward<T>(bottom, propagate_down, gates_diff, gs_diff);
  if (debug_info()) LogSteps<T>("gate diff", gates_diff, gate_step);
}

void LSTMLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Forward<T>(bottom, top));
}

void LSTMLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() +
                      "cannot backpropagate to the sequence indicators (bottom[1])");
  CREMA_DISPATCH_FLOAT(dtype(), T, Backward<T>(top, propagate_down, bottom));
}

CREMA_REGISTER_LAYER(LSTM, LSTMLayer);

}  // namespace crema
