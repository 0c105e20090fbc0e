#pragma once
// DummyData: tops filled by fillers, no bottoms, as Caffe's DummyDataLayer.
// Shapes: dummy_data_param.shape given once (every top) or once per top; or the legacy
// num/channels/height/width, each given once or once per top (not both forms).
// Fillers: none (constant 0), one for every top, or one per top. A constant filler fills its tops
// once at set-up; any other filler refills its tops on every Forward (and leaves them untouched
// at set-up), as Caffe. Reshape does nothing after set-up. No backward.
// Params: dummy_data_param { repeated data_filler, repeated shape, repeated num, channels,
// height, width }.
#include <vector>

#include "crema/layer.hpp"

namespace crema {

class DummyDataLayer final : public Layer {
 public:
  // Device-neutral: constant fillers fill once at set-up; the random ones refill on the host
  // each Forward (the host generator, as the CPU path, so CPU and GPU nets see the same values).
  bool HasGpuKernels() const override { return true; }
  using Layer::Layer;
  const char* type() const override { return "DummyData"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override {}
  int ExactNumBottomBlobs() const override { return 0; }
  int MinTopBlobs() const override { return 1; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  std::vector<FillerParameter> fillers_;  // one, or one per top
  std::vector<bool> refill_;              // per filler: refill on every Forward
};

}  // namespace crema
