#pragma once
#include "layers/recurrent/recurrent_layer.hpp"

namespace crema {

// LSTM (Caffe's LSTM layer), for each step t and stream n:
//   [i', f', o', g'] = W_hc (cont_t h_{t-1}) + W_xc x_t + b_c [+ W_xc_static x_static],
//   then one LSTMUnit step: c_t = cont_t sigmoid(f') c_{t-1} + sigmoid(i') tanh(g'),
//   h_t = sigmoid(o') tanh(c_t).
// top[0] = h (T x N x num_output); with expose_hidden, bottoms h0, c0 and tops hT, cT
// (1 x N x num_output each).
// Learnable blobs, in Caffe's order: W_xc (4H x I), b_c (4H), [W_xc_static (4H x S)],
// W_hc (4H x H), with H = num_output and gate rows ordered i, f, o, g. Inputs, params and the
// carried state: see RecurrentLayer.
class LSTMLayer final : public RecurrentLayer {
 public:
  using RecurrentLayer::RecurrentLayer;
  const char* type() const override { return "LSTM"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  int NumStates() const override { return 2; }
  int GateDim() const override { return 4 * hidden_; }
  std::vector<ParamSpec> RecurrentParams() const override {
    return {{"W_hc", {4 * hidden_, hidden_}, false}};
  }
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  // The steps, over a device policy (recurrent_ops.hpp): CpuOps for ForwardCpu/BackwardCpu,
  // GpuOps for ForwardGpu/BackwardGpu (lstm_layer.cu).
  template <typename T, typename Ops>
  void Forward(const BlobVec& bottom, const BlobVec& top);
  template <typename T, typename Ops>
  void Backward(const BlobVec& top, const std::vector<bool>& propagate_down, const BlobVec& bottom);

  Blob gx_;        // T x N x 4H: W_xc x_t + b_c; its diff holds the gate gradients
  Blob gs_;        // N x 4H: W_xc_static x_static, then its gradient
  Blob gates_;     // T x N x 4H: the gate pre-activations
  Blob h_;         // (T + 1) x N x H: h_0 .. h_T
  Blob c_;         // (T + 1) x N x H: c_0 .. c_T
  Blob h_conted_;  // T x N x H: cont_t h_{t-1}
  Blob step_;      // scratch: 4 x N x H

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
