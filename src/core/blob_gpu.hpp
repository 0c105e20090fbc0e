#pragma once
// Device versions of Blob's whole-buffer operations (built when CREMA_WITH_CUDA); Blob calls them
// when the buffer's freshest copy is on the GPU, as Caffe's Blob does.
#ifdef CREMA_WITH_CUDA
#include <cstdint>

namespace crema::gpu {

template <typename T>
void BlobUpdate(int64_t n, const T* diff, T* data);  // data -= diff
template <typename T>
void BlobScale(int64_t n, double factor, T* x);
// Sum of |x| (or x^2) accumulated in double; waits for the stream.
template <typename T>
double BlobAsum(int64_t n, const T* x);
template <typename T>
double BlobSumsq(int64_t n, const T* x);

}  // namespace crema::gpu
#endif
