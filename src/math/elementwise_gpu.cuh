#pragma once
// Element-wise kernels from a device functor, for .cu files: y[i] = f(a[i], b[i], ...) for
// i < n, on the current device's crema stream. Neuron layers write their per-element math as a
// functor with a templated operator() (float and double) and launch it through NeuronForward /
// NeuronBackward. y may be one of the inputs (each element is read before it is written).
#include <cstdint>

#include "crema/blob.hpp"
#include "math/math_gpu.hpp"

namespace crema::gpu {

template <typename T, typename F, typename... In>
__global__ void ElementwiseKernel(int64_t n, F f, T* y, const In*... in) {
  CREMA_CUDA_KERNEL_LOOP(i, n) { y[i] = f(in[i]...); }
}

// `what` names the kernel in the error thrown when the launch fails.
template <typename T, typename F, typename... In>
void Elementwise(const char* what, int64_t n, F f, T* y, const In*... in) {
  if (n == 0) return;
  ElementwiseKernel<<<Blocks(n), kThreads, 0, Stream()>>>(n, f, y, in...);
  CheckLaunch(what);
}

// top data = f(x data), x being the bottom or a saved copy of it.
template <typename F>
void NeuronForward(const char* what, F f, const Blob& x, Blob* top) {
  CREMA_DISPATCH_FLOAT(x.dtype(), T, {
    Elementwise(what, x.count(), f, top->mutable_gpu_data<T>(), x.gpu_data<T>());
  });
}

// bottom diff = f(top diff, data of each of `in`...), e.g. `in` the top (y) or the input (x).
template <typename F, typename... In>
void NeuronBackward(const char* what, F f, const Blob& top, Blob* bottom, const In&... in) {
  CREMA_DISPATCH_FLOAT(bottom->dtype(), T, {
    Elementwise(what, bottom->count(), f, bottom->mutable_gpu_diff<T>(), top.gpu_diff<T>(),
                in.template gpu_data<T>()...);
  });
}

}  // namespace crema::gpu
