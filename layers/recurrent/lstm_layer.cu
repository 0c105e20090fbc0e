#include "layers/recurrent/lstm_layer.hpp"
#include "layers/recurrent/recurrent_ops.hpp"

namespace crema {
namespace recurrent {

// The LSTM unit of layers/lstm_unit, one thread per cell.
template <typename T>
void GpuOps::LSTMUnitForward(int num, int dim, const T* c_prev, const T* x, const T* cont, T* c,
                             T* h) {
  lstm_unit::ForwardGpu(num, dim, c_prev, x, cont, c, h);
}

template <typename T>
void GpuOps::LSTMUnitBackward(int num, int dim, const T* c_prev, const T* x, const T* cont,
                              const T* c, const T* c_diff, const T* h_diff, T* c_prev_diff,
                              T* x_diff) {
  lstm_unit::BackwardGpu(num, dim, c_prev, x, cont, c, c_diff, h_diff, c_prev_diff, x_diff);
}

#define CREMA_INSTANTIATE_LSTM_UNIT(T)                                                        \
  template void GpuOps::LSTMUnitForward<T>(int, int, const T*, const T*, const T*, T*, T*);   \
  template void GpuOps::LSTMUnitBackward<T>(int, int, const T*, const T*, const T*, const T*, \
                                            const T*, const T*, T*, T*);
CREMA_INSTANTIATE_LSTM_UNIT(float)
CREMA_INSTANTIATE_LSTM_UNIT(double)
#undef CREMA_INSTANTIATE_LSTM_UNIT

}  // namespace recurrent

// The steps of ForwardCpu/BackwardCpu (lstm_layer.cpp) with the device policy.
void LSTMLayer::ForwardGpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Forward<T, recurrent::GpuOps>(bottom, top));
}

void LSTMLayer::BackwardGpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  CREMA_DISPATCH_FLOAT(dtype(), T, Backward<T, recurrent::GpuOps>(top, propagate_down, bottom));
}

}  // namespace crema
