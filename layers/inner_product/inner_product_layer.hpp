#pragma once
// Fully connected, as Caffe: the bottom is viewed as M x K with M = product of the axes before
// inner_product_param.axis and K = product of the rest; top (axes before axis..., num_output)
// = bottom * W^T + b. Weights (num_output, K), or (K, num_output) with transpose: true; bias
// (num_output). K is fixed at set-up: a later bottom with another K is an error.
// Params: inner_product_param { num_output, bias_term, axis, transpose, weight_filler,
// bias_filler }. Param diffs accumulate (+=). Not in-place.
// CPU engines (src/math/dnnl_engine.hpp): float32 passes may run oneDNN (dnnl_inner_product.hpp)
// instead of crema's GEMMs, per --cpu_engine.
#include <memory>

#include "crema/layer.hpp"
#include "math/dnnl_engine.hpp"

namespace crema {

class DnnlInnerProduct;

class InnerProductLayer final : public Layer {
 public:
  using Layer::Layer;
  const char* type() const override { return "InnerProduct"; }
  bool SupportsFusedReLU() const override { return true; }
  // The weights' step on the CPU, in crema's kernel for a few rows (GemmFewRowsBackward).
  bool SupportsFusedSgdStep(int param) const override { return param == 0; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 1; }
  int ExactNumTopBlobs() const override { return 1; }
  // The CPU engine of the last CPU pass: "crema", "oneDNN", or "" before the first.
  const char* cpu_engine() const { return cpu_engine_choice_.last(); }
  CpuEngineChoice* cpu_engine_choice() override { return &cpu_engine_choice_; }
  double ForwardFlops() const override { return 2.0 * M_ * N_ * K_; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override;

 private:
  template <typename T>
  void ForwardT(const BlobVec& bottom, const BlobVec& top);
  template <typename T>
  void BackwardT(const BlobVec& top, const std::vector<bool>& propagate_down,
                 const BlobVec& bottom);
  // The bottom's axis from inner_product_param.axis, with a ConfigError naming the field.
  int Axis(const Blob& bottom) const;

  // ---- oneDNN CPU engine (dnnl_inner_product.hpp) ----
  // The CPU engine policy for this pass (kCaffe where oneDNN does not apply); prepares oneDNN.
  CpuEngine DnnlPolicy();
  void BackwardDnnl(const BlobVec& top, const std::vector<bool>& propagate_down,
                    const BlobVec& bottom);
  std::shared_ptr<DnnlInnerProduct> dnnl_;
  CpuEngineChoice cpu_engine_choice_;
  // ---- end oneDNN CPU engine ----

  int M_ = 0;  // rows: the batch-like axes
  int K_ = 0;  // inner dimension
  int N_ = 0;  // num_output
  bool bias_term_ = true;
  bool transpose_ = false;
  Blob bias_multiplier_;

 public:
  // Its GPU path launches on the stream only, with the same arguments every iteration.
  bool SupportsGraphCapture() const override { return true; }

  CREMA_LAYER_GPU_KERNELS;
};

}  // namespace crema
