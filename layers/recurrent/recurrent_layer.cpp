#include "layers/recurrent/recurrent_layer.hpp"

#include <glog/logging.h>

#include <cmath>
#include <string>

#include "layers/recurrent/recurrent_ops.hpp"
#include "math/math.hpp"

namespace crema {

void RecurrentLayer::CheckBottoms(const BlobVec& bottom) const {
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() >= 2,
                    "bottom[0] (x) must have at least 2 axes (time steps, streams, ...), got ",
                    bottom[0]->shape_string());
  const int steps = bottom[0]->shape(0), streams = bottom[0]->shape(1);
  CREMA_CHECK_SHAPE(
      bottom[1]->num_axes() == 2 && bottom[1]->shape(0) == steps && bottom[1]->shape(1) == streams,
      "bottom[1] (cont) must be ", steps, " x ", streams, " (time steps x streams, as x ",
      bottom[0]->shape_string(), "), got ", bottom[1]->shape_string());
  if (static_input_)
    CREMA_CHECK_SHAPE(bottom[2]->num_axes() >= 1 && bottom[2]->shape(0) == streams,
                      "bottom[2] (x_static) must have ", streams,
                      " (streams) as its first axis, got ", bottom[2]->shape_string());
  for (size_t i = 0; i < bottom.size(); ++i)
    CREMA_CHECK_SHAPE(bottom[i]->dtype() == dtype(), "bottom[", i, "] is ",
                      DataTypeName(bottom[i]->dtype()), " but the layer runs in ",
                      DataTypeName(dtype()));
}

void RecurrentLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const RecurrentParameter& param = layer_param_.recurrent_param();
  CREMA_CHECK_PARAM(param.num_output() > 0, "recurrent_param.num_output", "must be > 0, got ",
                    param.num_output());
  hidden_ = static_cast<int>(param.num_output());
  static_input_ = static_cast<int>(bottom.size()) > 2 + NumExposed();
  CheckBottoms(bottom);
  T_ = bottom[0]->shape(0);
  N_ = bottom[0]->shape(1);
  const int64_t input_dim = bottom[0]->count(2);
  const int64_t static_dim = static_input_ ? bottom[2]->count(1) : 0;
  CREMA_CHECK_SHAPE(input_dim <= INT32_MAX && static_dim <= INT32_MAX,
                    "inputs too large for the input transform");
  input_dim_ = static_cast<int>(input_dim);
  static_dim_ = static_cast<int>(static_dim);

  std::vector<ParamSpec> specs = {{"W_x", {GateDim(), input_dim_}, false},
                                  {"b", {GateDim()}, true}};
  if (static_input_) specs.push_back({"W_x_static", {GateDim(), static_dim_}, false});
  for (const ParamSpec& spec : RecurrentParams()) specs.push_back(spec);
  // Weights that came with the parameter (a .caffemodel) are checked; else the fillers run.
  std::vector<ExpectedBlob> learned;
  for (const ParamSpec& spec : specs)
    learned.push_back(
        {spec.name, spec.shape, false, spec.bias ? &param.bias_filler() : &param.weight_filler(),
         spec.bias ? "recurrent_param.bias_filler" : "recurrent_param.weight_filler"});
  SetUpLearnableBlobs(learned, static_input_ ? "with the static input" : "");
  param_propagate_down_.assign(blobs_.size(), true);
  carried_.clear();
  for (int k = 0; k < NumStates(); ++k) carried_.push_back(std::make_unique<Blob>(dtype()));
}

void RecurrentLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CheckBottoms(bottom);
  T_ = bottom[0]->shape(0);
  N_ = bottom[0]->shape(1);
  CREMA_CHECK_SHAPE(bottom[0]->count(2) == input_dim_, "bottom[0] (x) ", bottom[0]->shape_string(),
                    " has ", bottom[0]->count(2),
                    " values per step and stream, but the layer was set up for ", input_dim_);
  if (static_input_)
    CREMA_CHECK_SHAPE(bottom[2]->count(1) == static_dim_, "bottom[2] (x_static) ",
                      bottom[2]->shape_string(), " has ", bottom[2]->count(1),
                      " values per stream, but the layer was set up for ", static_dim_);
  const std::vector<int> state_shape = {1, N_, hidden_};
  for (int k = 0; k < NumExposed(); ++k) {
    const Blob& state = *bottom[2 + static_input_ + k];
    CREMA_CHECK_SHAPE(state.shape() == state_shape, "bottom[", 2 + static_input_ + k,
                      "] (initial state) must be 1 x ", N_, " x ", hidden_, ", got ",
                      state.shape_string());
  }
  for (Blob* t : top)
    for (Blob* b : bottom) CREMA_CHECK_SHAPE(t != b, "does not support in-place computation");
  for (auto& state : carried_) {
    if (state->shape() == state_shape) continue;
    // A new number of streams starts every stream afresh.
    state->Reshape(state_shape);
    state->SetDataZero();
  }
  top[0]->Reshape(std::vector<int>{T_, N_, hidden_});
  for (int k = 0; k < NumExposed(); ++k) top[1 + k]->Reshape(state_shape);
}

template <typename T, typename Ops>
void RecurrentLayer::SetFinalState(const BlobVec& top, int k, const T* state) {
  Blob* target = NumExposed() > 0 ? top[1 + k] : carried_[k].get();
  Ops::Copy(target->count(), state, Ops::template MutableData<T>(target));
}

template <typename T, typename Ops>
void RecurrentLayer::InputTransform(const BlobVec& bottom, T* gx, T* gs) {
  const int rows = T_ * N_, gates = GateDim();
  Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kYes, rows, gates, input_dim_, T(1),
            Ops::template Data<T>(*bottom[0]), Ops::template Data<T>(*blobs_[0]), T(0), gx);
  Ops::AddToRows(rows, gates, Ops::template Data<T>(*blobs_[1]), gx);
  if (static_input_)
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kYes, N_, gates, static_dim_, T(1),
              Ops::template Data<T>(*bottom[2]), Ops::template Data<T>(*blobs_[2]), T(0), gs);
}

template <typename T, typename Ops>
void RecurrentLayer::InputTransformBackward(const BlobVec& bottom,
                                            const std::vector<bool>& propagate_down,
                                            const T* gx_diff, const T* gs_diff) {
  const int rows = T_ * N_, gates = GateDim();
  if (param_propagate_down(0))
    Ops::Gemm(cpu::Trans::kYes, cpu::Trans::kNo, gates, input_dim_, rows, T(1), gx_diff,
              Ops::template Data<T>(*bottom[0]), T(1),
              Ops::template MutableDiff<T>(blobs_[0].get()));
  if (param_propagate_down(1))
    Ops::SumRows(rows, gates, gx_diff, Ops::template MutableDiff<T>(blobs_[1].get()));
  if (propagate_down[0])
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kNo, rows, input_dim_, gates, T(1), gx_diff,
              Ops::template Data<T>(*blobs_[0]), T(0), Ops::template MutableDiff<T>(bottom[0]));
  if (!static_input_) return;
  if (param_propagate_down(2))
    Ops::Gemm(cpu::Trans::kYes, cpu::Trans::kNo, gates, static_dim_, N_, T(1), gs_diff,
              Ops::template Data<T>(*bottom[2]), T(1),
              Ops::template MutableDiff<T>(blobs_[2].get()));
  if (propagate_down[2])
    Ops::Gemm(cpu::Trans::kNo, cpu::Trans::kNo, N_, static_dim_, gates, T(1), gs_diff,
              Ops::template Data<T>(*blobs_[2]), T(0), Ops::template MutableDiff<T>(bottom[2]));
}

void RecurrentLayer::CheckPropagateDown(const std::vector<bool>& propagate_down) const {
  if (propagate_down[1])
    throw ConfigError(ErrorPrefix() +
                      "cannot backpropagate to the sequence indicators (bottom[1])");
}

template <typename T>
void RecurrentLayer::LogSteps(const char* what, const T* data, int64_t step_count) const {
  for (int t = 0; t < T_; ++t) {
    double sum = 0;
    for (int64_t i = 0; i < step_count; ++i) sum += std::abs(data[t * step_count + i]);
    LOG(INFO) << "    [" << type() << " " << name() << "] step " << t << ", " << what
              << ": mean |value| = " << (step_count ? sum / step_count : 0.0);
  }
}

#define CREMA_INSTANTIATE_RECURRENT_OPS(T, Ops)                                       \
  template void RecurrentLayer::SetFinalState<T, Ops>(const BlobVec&, int, const T*); \
  template void RecurrentLayer::InputTransform<T, Ops>(const BlobVec&, T*, T*);       \
  template void RecurrentLayer::InputTransformBackward<T, Ops>(                       \
      const BlobVec&, const std::vector<bool>&, const T*, const T*);
CREMA_INSTANTIATE_RECURRENT_OPS(float, recurrent::CpuOps)
CREMA_INSTANTIATE_RECURRENT_OPS(double, recurrent::CpuOps)
#ifdef CREMA_WITH_CUDA
CREMA_INSTANTIATE_RECURRENT_OPS(float, recurrent::GpuOps)
CREMA_INSTANTIATE_RECURRENT_OPS(double, recurrent::GpuOps)
#endif
#undef CREMA_INSTANTIATE_RECURRENT_OPS
template void RecurrentLayer::LogSteps<float>(const char*, const float*, int64_t) const;
template void RecurrentLayer::LogSteps<double>(const char*, const double*, int64_t) const;

}  // namespace crema
