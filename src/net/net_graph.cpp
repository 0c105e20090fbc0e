// What a CUDA graph of a net's iteration needs from the net (src/net/iteration_graph.hpp): which
// layers run outside it, whether the rest may be captured, what the graph's addresses depend on,
// and the host-side work around a replay.
#include <memory>
#include <string>
#include <vector>

#include "crema/net.hpp"

#ifdef CREMA_WITH_CUDA
#include "math/math_gpu.hpp"
#endif

namespace crema {

int Net::num_input_layers() const {
  int i = 0;
  while (i < num_layers() && bottom_vecs_[i].empty()) ++i;
  return i;
}

std::string Net::GraphCaptureBlocker() const {
  if (!device_.is_cuda()) return "the net runs on the CPU";
  if (debug_info_) return "debug_info reads every blob on the host";
  if (check_finite_) return "--check-nan reads every blob on the host";
  if (amp_ != Amp::kOff) return "--amp converts blobs around the layers outside a graph";
  if (num_input_layers() == num_layers()) return "the net has only data layers";
  for (int i = num_input_layers(); i < num_layers(); ++i) {
    if (folded_into_[i] >= 0) continue;
    const Layer& layer = *layers_[i];
    if (layer.SupportsGraphCapture()) continue;
    return StrCat("layer \"", layer_names_[i], "\" (", layer.type(), ") ",
                  layer.HasGpuKernels()
                      ? "has no GPU path that can be captured (it reads device values on the host "
                        "or changes its kernels' arguments between iterations)"
                      : "has no GPU kernels and runs on the host");
  }
  return "";
}

namespace {

// Calls fn on every blob a graph of the net reads or writes: the net's blobs, its params and, with
// `folded`, the weights of the folded convolutions.
template <typename Fn>
void ForEachGraphBlob(const std::vector<BlobPtr>& blobs, const std::vector<BlobPtr>& params,
                      const std::vector<std::unique_ptr<Layer>>* folded, Fn fn) {
  for (const BlobPtr& blob : blobs) fn(*blob);
  for (const BlobPtr& param : params) fn(*param);
  if (folded == nullptr) return;
  for (const auto& conv : *folded)
    if (conv)
      for (const BlobPtr& weight : conv->blobs()) fn(*weight);
}

}  // namespace

std::vector<uintptr_t> Net::GraphSignature() const {
  std::vector<uintptr_t> signature;
  ForEachGraphBlob(blobs_, params_, &folded_convs_, [&signature](const Blob& blob) {
    signature.push_back(reinterpret_cast<uintptr_t>(blob.data().get()));
    signature.push_back(reinterpret_cast<uintptr_t>(blob.diff().get()));
    signature.push_back(static_cast<uintptr_t>(blob.num_axes()));
    for (int dim : blob.shape()) signature.push_back(static_cast<uintptr_t>(dim));
  });
  return signature;
}

void Net::BeforeGraphReplay() {
  // Folded weights included: the data layers' pass refolds them on the host when the weights
  // changed.
  ForEachGraphBlob(blobs_, params_, &folded_convs_, [](const Blob& blob) {
    if (blob.data()) blob.data()->PushToDevice();
    if (blob.diff()) blob.diff()->PushToDevice();
  });
}

void Net::AfterGraphReplay(int start) {
  // The graph does not write the folded weights.
  ForEachGraphBlob(blobs_, params_, nullptr, [](const Blob& blob) {
    if (blob.data()) blob.data()->DeviceWritten();
    if (blob.diff()) blob.diff()->DeviceWritten();
  });
  for (int i = start; i < num_layers(); ++i)
    if (folded_into_[i] < 0) layers_[i]->CheckForward(bottom_vecs_[i], top_vecs_[i]);
}

double Net::WeightedLoss(int start, int end) const {
  double loss = 0;
  for (int i = start; i <= end; ++i) loss += layers_[i]->WeightedLoss(top_vecs_[i]);
  return loss;
}

void Net::DeviceWeightedLoss(double* out) const {
#ifdef CREMA_WITH_CUDA
  gpu::Set<double>(1, 0.0, out);
  for (int i = 0; i < num_layers(); ++i) {
    for (size_t j = 0; j < top_vecs_[i].size(); ++j) {
      if (layers_[i]->loss(static_cast<int>(j)) == 0) continue;
      const Blob& top = *top_vecs_[i][j];
      CREMA_DISPATCH_FLOAT(top.dtype(), T,
                           gpu::AddDot<T>(top.count(), top.gpu_data<T>(), top.gpu_diff<T>(), out));
    }
  }
#else
  (void)out;
  CREMA_THROW_RUNTIME("this crema was built without CUDA");
#endif
}

}  // namespace crema
