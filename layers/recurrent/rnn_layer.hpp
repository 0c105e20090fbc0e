#pragma once
#include "layers/recurrent/recurrent_layer.hpp"

namespace crema {

// Elman RNN (Caffe's RNN layer), for each step t and stream n:
//   h_t = tanh(W_hh (cont_t h_{t-1}) + W_xh x_t + b_h [+ W_xh_static x_static]),
//   o_t = tanh(W_ho h_t + b_o),
// top[0] = o (T x N x num_output); with expose_hidden, bottom h0 and top hT (1 x N x num_output).
// Learnable blobs, in Caffe's order: W_xh (H x I), b_h (H), [W_xh_static (H x S)], W_hh (H x H),
// W_ho (H x H), b_o (H), with H = num_output. Inputs, params and the carried state: see
// RecurrentLayer.
class RNNLayer final : public RecurrentLayer {
 public:
  using RecurrentLayer::RecurrentLayer;
  const char* type() const override { return "RNN"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  int NumStates() const override { return 1; }
  int GateDim() const override { return hidden_; }
  std::vector<ParamSpec> RecurrentParams() const override {
    return {{"W_hh", {hidden_, hidden_}, false},
            {"W_ho", {hidden_, hidden_}, false},
            {"b_o", {hidden_}, true}};
  }
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // The steps, over a device policy (recurrent_ops.hpp): CpuOps for ForwardCpu/BackwardCpu,
  // GpuOps for ForwardGpu/BackwardGpu (rnn_layer.cu).
  template <typename T, typename Ops>
  void Forward(const BlobVec& bottom, const BlobVec& top);
  template <typename T, typename Ops>
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  Blob gx_;        // T x N x H: W_xh x_t + b_h, then its gradient
  Blob gs_;        // N x H: W_xh_static x_static, then its gradient
  Blob h_;         // (T + 1) x N x H: h_0 .. h_T
  Blob h_conted_;  // T x N x H: cont_t h_{t-1}
  Blob o_;         // T x N x H
  Blob step_;      // scratch: 3 x N x H

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
