#include "layers/memory_data/memory_data_layer.hpp"

#include "crema/layer_registry.hpp"

namespace crema {

void MemoryDataLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  const MemoryDataParameter& param = layer_param_.memory_data_param();
  const std::pair<const char*, uint32_t> dims[] = {
      {"memory_data_param.batch_size", param.batch_size()},
      {"memory_data_param.channels", param.channels()},
      {"memory_data_param.height", param.height()},
      {"memory_data_param.width", param.width()}};
  for (const auto& [field, value] : dims)
    CREMA_CHECK_PARAM(value > 0 && value <= INT32_MAX, field, "must be > 0, got ", value);
  batch_size_ = static_cast<int>(param.batch_size());
  channels_ = static_cast<int>(param.channels());
  height_ = static_cast<int>(param.height());
  width_ = static_cast<int>(param.width());
  size_ = static_cast<int64_t>(channels_) * height_ * width_;
  CREMA_CHECK_PARAM(size_ <= INT32_MAX, "memory_data_param",
                    "channels * height * width must be < 2^31, got ", size_);
}

void MemoryDataLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (Blob* t : top)
    if (t->dtype() != dtype_) t->set_dtype(dtype_);
  top[0]->Reshape(batch_size_, channels_, height_, width_);
  top[1]->Reshape(std::vector<int>{batch_size_});
}

void MemoryDataLayer::CheckReset(const void* data, const void* labels, int n) const {
  if (data == nullptr || labels == nullptr)
    throw RuntimeError(ErrorPrefix() +
                       "MemoryData Reset needs data and labels, got a null pointer");
  if (n <= 0 || n % batch_size_ != 0)
    throw RuntimeError(ErrorPrefix() + StrCat("MemoryData Reset: n (", n,
                                              ") must be a positive multiple of batch_size (",
                                              batch_size_, ")"));
}

void MemoryDataLayer::Reset(const float* data, const float* labels, int n) {
  CheckReset(data, labels, n);
  data_f_ = data, labels_f_ = labels;
  data_d_ = nullptr, labels_d_ = nullptr;
  n_ = n;
  pos_ = 0;
}

void MemoryDataLayer::Reset(const double* data, const double* labels, int n) {
  CheckReset(data, labels, n);
  data_d_ = data, labels_d_ = labels;
  data_f_ = nullptr, labels_f_ = nullptr;
  n_ = n;
  pos_ = 0;
}

void MemoryDataLayer::set_batch_size(int batch_size) {
  if (batch_size <= 0)
    throw RuntimeError(ErrorPrefix() +
                       StrCat("MemoryData batch_size must be > 0, got ", batch_size));
  if (n_ > 0 && n_ % batch_size != 0)
    throw RuntimeError(ErrorPrefix() + StrCat("MemoryData batch_size ", batch_size,
                                              " does not divide the ", n_, " items fed by Reset"));
  batch_size_ = batch_size;
}

void MemoryDataLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  if (n_ == 0)
    throw RuntimeError(ErrorPrefix() +
                       "MemoryData has no data: call Reset(data, labels, n) before Forward");
  const int64_t offset = static_cast<int64_t>(pos_) * size_;
  const int64_t count = static_cast<int64_t>(batch_size_) * size_;
  CREMA_DISPATCH_FLOAT(dtype_, T, {
    T* out = top[0]->mutable_cpu_data<T>();
    T* label = top[1]->mutable_cpu_data<T>();
    for (int64_t i = 0; i < count; ++i)
      out[i] = static_cast<T>(data_f_ ? data_f_[offset + i] : data_d_[offset + i]);
    for (int i = 0; i < batch_size_; ++i)
      label[i] = static_cast<T>(labels_f_ ? labels_f_[pos_ + i] : labels_d_[pos_ + i]);
  });
  pos_ = (pos_ + batch_size_) % n_;
}

CREMA_REGISTER_LAYER(MemoryData, MemoryDataLayer);

}  // namespace crema
