#pragma once
// SavedInput: for layers that may run in place (top == bottom) and whose Backward needs their
// input x. Forward overwrites the shared blob with y, so x is copied aside first; when the layer
// is not in place nothing is copied and the bottom itself is read.
#include <algorithm>

#include "crema/blob.hpp"

namespace crema {

class SavedInput {
 public:
  // From Reshape: sizes the copy when bottom and top are one blob.
  void Reshape(const Blob& bottom, const Blob& top) {
    if (&bottom != &top) return;
    if (copy_.dtype() != bottom.dtype()) copy_.set_dtype(bottom.dtype());
    copy_.ReshapeLike(bottom);
  }
  // From Forward, before top is written: the input values, copied aside when in place.
  template <typename T>
  const T* Save(const Blob& bottom, const Blob& top) {
    const T* data = bottom.cpu_data<T>();
    if (&bottom != &top) return data;
    T* copy = copy_.mutable_cpu_data<T>();
    std::copy(data, data + bottom.count(), copy);
    return copy;
  }
  // From Backward: the input values Forward saw.
  template <typename T>
  const T* Get(const Blob& bottom, const Blob& top) const {
    return &bottom == &top ? copy_.cpu_data<T>() : bottom.cpu_data<T>();
  }
  // The same for GPU kernels: the blob to read x from (the bottom, or the copy, made on the
  // device when the bottom's freshest data is there: Blob::CopyFrom).
  const Blob& SaveGpu(const Blob& bottom, const Blob& top) {
    if (&bottom != &top) return bottom;
    copy_.CopyFrom(bottom);
    return copy_;
  }
  const Blob& GetGpu(const Blob& bottom, const Blob& top) const {
    return &bottom == &top ? copy_ : bottom;
  }

 private:
  Blob copy_;
};

}  // namespace crema
