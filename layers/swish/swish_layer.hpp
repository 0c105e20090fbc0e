#pragma once
#include "crema/layer.hpp"

namespace crema {

// Swish, as Caffe: y = x * sigmoid(beta * x) (sigmoid as in the Sigmoid layer); any shape;
// in-place safe. dy/dx = beta * y + s * (1 - beta * y), s = sigmoid(beta * x) kept from Forward.
// Params: swish_param { beta (default 1) }.
class SwishLayer final : public NeuronLayer {
 public:
  using NeuronLayer::NeuronLayer;
  const char* type() const override { return "Swish"; }
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const Blob& bottom, Blob* top);
  template <typename T>
  void BackwardT(const Blob& top, Blob* bottom);

  Blob sigmoid_output_;  // sigmoid(beta * x)

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
