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
  // The copy itself, for GPU kernels (valid when in place).
  Blob& copy() { return copy_; }

 private:
  Blob copy_;
};

}  // namespace crema
