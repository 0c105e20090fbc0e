#pragma once
// HDF5Output: writes its two bottoms to an HDF5 file, as Caffe's HDF5OutputLayer.
// Set-up creates (truncates) hdf5_output_param.file_name; each Forward writes bottom 0 as the
// dataset "data" and bottom 1 as "label", each shaped as Caffe's legacy 4-D view
// (num x channels x height x width, so a {N, D} blob is written N x D x 1 x 1) in the net's
// element type, and flushes the file. Both bottoms must have the same num and at most 4 axes.
// A later Forward replaces the datasets (Caffe fails there: it cannot re-create them), so the
// file holds the last batch. The file is closed when the layer is destroyed.
// Errors: the file can't be created -> RuntimeError naming it. No tops, no backward.
// Params: hdf5_output_param { file_name }.
#include <memory>
#include <string>
#include <vector>

#include "crema/layer.hpp"

namespace crema {

class Hdf5File;

class HDF5OutputLayer final : public Layer {
 public:
  // Device-neutral: it writes its bottoms to a file, which needs them on the host anyway.
  bool HasGpuKernels() const override { return true; }
  explicit HDF5OutputLayer(const LayerParameter& param);
  ~HDF5OutputLayer() override;
  const char* type() const override { return "HDF5Output"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 2; }
  int ExactNumTopBlobs() const override { return 0; }

  const std::string& file_name() const { return file_name_; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  std::string file_name_;
  std::unique_ptr<Hdf5File> file_;
};

}  // namespace crema
