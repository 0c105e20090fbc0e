#pragma once
// MemoryData: hands out batches from arrays the caller owns, as Caffe's MemoryDataLayer.
// Tops: data (batch_size x channels x height x width) and label (batch_size). Feed it with
// Reset(data, labels, n): n items (n a multiple of batch_size) of channels*height*width values
// and one label each; each Forward copies the next batch_size items, going back to the first
// after the last. The arrays are read at Forward (not copied by Reset), so they must outlive the
// passes, as in Caffe. No transformation (Caffe's AddDatumVector/AddMatVector are not offered).
// Forward before Reset -> RuntimeError. No bottoms, no backward.
// Params: memory_data_param { batch_size, channels, height, width } (all > 0).
#include <vector>

#include "crema/layer.hpp"

namespace crema {

class MemoryDataLayer final : public Layer {
 public:
  // Device-neutral: the arrays are in host memory, so the batch is copied on the host (as Caffe).
  bool HasGpuKernels() const override { return true; }
  using Layer::Layer;
  const char* type() const override { return "MemoryData"; }
  void LayerSetUp(const BlobVec& bottom, const BlobVec& top) override;
  void Reshape(const BlobVec& bottom, const BlobVec& top) override;
  int ExactNumBottomBlobs() const override { return 0; }
  int ExactNumTopBlobs() const override { return 2; }

  // Points the layer at n items; RuntimeError when a pointer is null or n is not a positive
  // multiple of batch_size. The next Forward starts from the first item.
  void Reset(const float* data, const float* labels, int n);
  void Reset(const double* data, const double* labels, int n);
  // Changes the batch size; RuntimeError when the fed n is not a multiple of it.
  void set_batch_size(int batch_size);

  int batch_size() const { return batch_size_; }
  int channels() const { return channels_; }
  int height() const { return height_; }
  int width() const { return width_; }

 protected:
  void ForwardCpu(const BlobVec& bottom, const BlobVec& top) override;
  void BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                   const BlobVec& bottom) override {}

 private:
  void CheckReset(const void* data, const void* labels, int n) const;

  int batch_size_ = 0, channels_ = 0, height_ = 0, width_ = 0;
  int64_t size_ = 0;  // values per item
  const float* data_f_ = nullptr;
  const float* labels_f_ = nullptr;
  const double* data_d_ = nullptr;
  const double* labels_d_ = nullptr;
  int n_ = 0;
  int pos_ = 0;
};

}  // namespace crema
