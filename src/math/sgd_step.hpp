#pragma once
// Plain SGD's whole step on the CPU (L2 or no weight decay), one pass over a param where Caffe's
// calls take four: Regularize's axpy, ComputeUpdateValue's axpby and copy, Blob::Update's
// subtraction (eleven streams of the param's size against six):
//   history = momentum * history + rate * (diff + decay * w); diff = history; w -= diff.
// The bits of those four calls one by one (w - h is what w -= diff computes). Used by the SGD
// solver's update and, for the same bits, by a layer that applies the step where it writes the
// gradient (Layer::SgdStep: InnerProduct through cpu::GemmFewRowsBackward).
#include <cstdint>

namespace crema::cpu {

// Element-wise, in parallel with OpenMP for long params: the same bits for any thread count.
template <typename T>
void SgdL2Step(int64_t n, T rate, T momentum, T decay, T* weights, T* diff, T* history);

// The same on one thread, for a caller already splitting the work (a block of a param). Never
// inlined: compiled for the baseline instruction set, it keeps its multiplies and adds apart
// (no FMA contraction) wherever it is called from, so the bits are those of SgdL2Step.
template <typename T>
void SgdL2StepSerial(int64_t n, T rate, T momentum, T decay, T* weights, T* diff, T* history);

}  // namespace crema::cpu
