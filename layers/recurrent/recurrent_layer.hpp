#pragma once
// The shared part of RNN and LSTM (Caffe's RecurrentLayer): input checks, the learnable blobs,
// the input transforms and the hidden state carried between batches.
#include <memory>
#include <vector>

#include "crema/layer.hpp"

namespace crema {

// Bottoms: x (T x N x ...; the input of step t is x[t], flattened to I = count(2) values),
// cont (T x N; cont[t][n] = 0 starts a new sequence in stream n: the previous hidden state is
// multiplied by cont), optional x_static (N x ...; S = count(1) values seen at every step), and
// with recurrent_param.expose_hidden the initial states (1 x N x num_output each; h0 for RNN,
// h0 and c0 for LSTM). Tops: the per-step outputs (T x N x num_output) and, with expose_hidden,
// the final states (hT, and cT for LSTM).
// Without expose_hidden the final states of one Forward are the initial states of the next
// (zero at first), as in Caffe, so a sequence may span batches; gradients never cross batches.
// Params: recurrent_param { num_output (> 0), weight_filler, bias_filler, debug_info (logs
// per-step activation and gradient norms), expose_hidden }. The learnable blobs have Caffe's
// order and shapes, so .caffemodel files are interchangeable.
// Unlike Caffe (which unrolls into an internal net of InnerProduct/Scale/Eltwise/... layers),
// the steps are computed directly; the results are the same. Deviations: T may change between
// batches; with expose_hidden the gradients of hT/cT reach the steps and h0/c0 receive their
// gradients (Caffe drops both).
class RecurrentLayer : public Layer {
 public:
  using Layer::Layer;
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int MinBottomBlobs() const override { return 2 + NumExposed(); }
  int MaxBottomBlobs() const override { return 3 + NumExposed(); }
  int ExactNumTopBlobs() const override { return 1 + NumExposed(); }
  // The sequence indicators get no gradient.
  bool AllowForceBackward(int bottom_index) const override { return bottom_index != 1; }

 protected:
  struct ParamSpec {
    const char* name;  // Caffe's name inside the unrolled net (W_xh, b_h, ...)
    std::vector<int> shape;
    bool bias;
  };
  // Number of recurrent states: 1 (h) for RNN, 2 (h, c) for LSTM.
  virtual int NumStates() const = 0;
  // Rows of the input transforms: num_output (RNN) or 4 * num_output (LSTM).
  virtual int GateDim() const = 0;
  // The recurrent (hidden-to-hidden and output) blobs that follow W_x, b and W_x_static.
  virtual std::vector<ParamSpec> RecurrentParams() const = 0;

  int NumExposed() const {
    return layer_param_.recurrent_param().expose_hidden() ? NumStates() : 0;
  }
  bool debug_info() const { return layer_param_.recurrent_param().debug_info(); }
  // Index in blobs_ of the first RecurrentParams() blob.
  int first_recurrent_param() const { return static_input_ ? 3 : 2; }
  // The initial state k: the exposed bottom, or the state carried from the last Forward.
  const Blob& InitialState(const BlobVec& bottom, int k) const {
    return NumExposed() > 0 ? *bottom[2 + static_input_ + k] : *carried_[k];
  }
  // The steps below are templates over a device policy (recurrent_ops.hpp: CpuOps, GpuOps),
  // instantiated for both in recurrent_layer.cpp.
  // Stores the final state k (1 x N x H values): into the exposed top, or carried to the next
  // Forward.
  template <typename T, typename Ops>
  void SetFinalState(const BlobVec& top, int k, const T* state);
  // gx (T*N x G) = x W_x^T + b; gs (N x G) = x_static W_x_static^T when there is a static input.
  template <typename T, typename Ops>
  void InputTransform(const BlobVec& bottom, T* gx, T* gs);
  // Given the gradients of gx and gs, accumulates the param diffs and writes the x (and x_static)
  // diffs where propagate_down asks.
  template <typename T, typename Ops>
  void InputTransformBackward(const BlobVec& bottom, const std::vector<bool>& propagate_down,
                              const T* gx_diff, const T* gs_diff);
  // Throws when Backward is asked for the gradient of the sequence indicators.
  void CheckPropagateDown(const std::vector<bool>& propagate_down) const;
  // Logs the mean |value| of each step of a (T x N x ...) host buffer (recurrent_param.debug_info;
  // GPU runs pass the blob's cpu_data, copied back for the log).
  template <typename T>
  void LogSteps(const char* what, const T* data, int64_t step_count) const;

  int T_ = 0;           // time steps
  int N_ = 0;           // streams
  int hidden_ = 0;      // num_output
  int input_dim_ = 0;   // I
  int static_dim_ = 0;  // S
  bool static_input_ = false;

 private:
  void CheckBottoms(const BlobVec& bottom) const;
  std::vector<std::unique_ptr<Blob>> carried_;
};

}  // namespace crema
