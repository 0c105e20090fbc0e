// What a CUDA graph of a net's iteration needs from the net (src/net/iteration_graph.hpp): which
// layers run outside it, whether the rest may be captured, what the graph's addresses depend on,
// and the host-side work around a replay.
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

std::vector<uintptr_t> Net::GraphSignature() const {
  std::vector<uintptr_t> signature;
  const auto add = [&signature](const Blob& blob) {
    signature.push_back(reinterpret_cast<uintptr_t>(blob.data().get()));
    signature.push_back(reinterpret_cast<uintptr_t>(blob.diff().get()));
    signature.push_back(static_cast<uintptr_t>(blob.num_axes()));
    for (int dim : blob.shape()) signature.push_back(static_cast<uintptr_t>(dim));
  };
  for (const BlobPtr& blob : blobs_) add(*blob);
  for (const BlobPtr& param : params_) add(*param);
  for (const auto& conv : folded_convs_)
    if (conv)
      for (const BlobPtr& weight : conv->blobs()) add(*weight);
  return signature;
}

void Net::BeforeGraphReplay() {
  const auto push = [](const Blob& blob) {
    if (blob.data()) blob.data()->PushToDevice();
    if (blob.diff()) blob.diff()->PushToDevice();
  };
  for (const BlobPtr& blob : blobs_) push(*blob);
  for (const BlobPtr& param : params_) push(*param);
  // Refolded on the host (the data layers' pass runs ApplyFold when the weights changed).
  for (const auto& conv : folded_convs_)
    if (conv)
      for (const BlobPtr& weight : conv->blobs()) push(*weight);
}

void Net::AfterGraphReplay(int start) {
  const auto written = [](const Blob& blob) {
    if (blob.data()) blob.data()->DeviceWritten();
    if (blob.diff()) blob.diff()->DeviceWritten();
  };
  for (const BlobPtr& blob : blobs_) written(*blob);
  for (const BlobPtr& param : params_) written(*param);
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
