#include "net/iteration_graph.hpp"

#include <glog/logging.h>

#include <exception>

#include "core/cuda_allocator.hpp"
#include "core/cuda_context.hpp"
#include "crema/error.hpp"

namespace crema {

#ifdef CREMA_WITH_CUDA
struct IterationGraph::Graph {
  cudaGraphExec_t exec = nullptr;
  // Device blocks freed while the graph was captured: the graph may still use them.
  std::vector<void*> held;
  ~Graph() {
    if (exec != nullptr) cudaGraphExecDestroy(exec);
    for (void* block : held) gpu::DeviceFree(block);
  }
};
#else
struct IterationGraph::Graph {};
#endif

IterationGraph::IterationGraph(Net* net, bool enabled) : net_(net), enabled_(enabled) {}

IterationGraph::~IterationGraph() = default;

void IterationGraph::Reset() {
  graph_.reset();
  clean_iterations_ = 0;
}

double IterationGraph::Run(const std::function<void()>& body) {
  const int start = net_->num_input_layers();
  const int end = net_->num_layers() - 1;
  double loss = net_->ForwardFromTo(0, start - 1);
  replayed_ = false;
  reason_ = !enabled_ ? "off (--cuda-graph=false)" : net_->GraphCaptureBlocker();
  if (reason_.empty() && failed_) reason_ = logged_reason_;
  if (!reason_.empty()) {
    if (enabled_ && reason_ != logged_reason_ && net_->device().is_cuda()) {
      LOG(INFO) << "Net \"" << net_->name() << "\" runs without a CUDA graph: " << reason_;
      logged_reason_ = reason_;
    }
    body();
    return loss + net_->WeightedLoss(start, end);
  }
#ifdef CREMA_WITH_CUDA
  const int device = net_->device().id;
  const std::vector<uintptr_t> signature = net_->GraphSignature();
  if (graph_ && (signature != signature_ || gpu::FreeGeneration(device) != free_generation_))
    Reset();
  if (!graph_ && clean_iterations_ >= 1) {
    // Host-side changes reach the device first, so that the capture records no copies.
    net_->BeforeGraphReplay();
    signature_ = signature;
    if (!Capture(body)) {
      body();
      return loss + net_->WeightedLoss(start, end);
    }
  }
  if (graph_) {
    net_->BeforeGraphReplay();
    Launch();
    net_->AfterGraphReplay(start);
    return loss + net_->WeightedLoss(start, end);
  }
  // Warming up: an iteration that neither allocates nor frees device memory, and leaves the
  // memory and shapes as they were, may be captured next time.
  const int64_t mallocs = gpu::GetMemoryStats(device).cuda_mallocs;
  const uint64_t generation = gpu::FreeGeneration(device);
  body();
  free_generation_ = gpu::FreeGeneration(device);
  const bool clean = gpu::GetMemoryStats(device).cuda_mallocs == mallocs &&
                     free_generation_ == generation && net_->GraphSignature() == signature;
  clean_iterations_ = clean ? clean_iterations_ + 1 : 0;
  return loss + net_->WeightedLoss(start, end);
#else
  body();
  return loss + net_->WeightedLoss(start, end);
#endif
}

#ifdef CREMA_WITH_CUDA
bool IterationGraph::Capture(const std::function<void()>& body) {
  cudaStream_t stream = gpu::Stream();
  auto graph = std::make_unique<Graph>();
  std::string error;
  gpu::BeginCapture();
  // Thread-local: an unsafe call of this thread (a synchronous copy, cudaMalloc) fails the
  // capture instead of running out of order; the prefetch threads are not affected.
  cudaError_t status = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (status == cudaSuccess) {
    gpu::SetCapturing(true);
    try {
      body();
    } catch (const std::exception& e) {
      error = e.what();
    }
    gpu::SetCapturing(false);
  } else {
    error = StrCat("cudaStreamBeginCapture failed: ", cudaGetErrorString(status));
  }
  const int layer = net_->running_layer();
  cudaGraph_t captured = nullptr;
  if (status == cudaSuccess) {
    status = cudaStreamEndCapture(stream, &captured);
    if (status != cudaSuccess && error.empty())
      error = StrCat("the capture was invalidated: ", cudaGetErrorString(status));
  }
  graph->held = gpu::EndCapture();
  if (error.empty()) {
    status = cudaGraphInstantiate(&graph->exec, captured, 0);
    if (status != cudaSuccess) error = StrCat("cudaGraphInstantiate: ", cudaGetErrorString(status));
  }
  if (captured != nullptr) cudaGraphDestroy(captured);
  if (!error.empty()) {
    cudaGetLastError();  // capture errors are not sticky; clear the last one
    failed_ = true;
    reason_ = logged_reason_ =
        StrCat("the capture failed",
               layer >= 0 ? StrCat(" in layer \"", net_->layer_names()[layer], "\" (",
                                   net_->layers()[layer]->type(), ")")
                          : std::string(" outside the net's layers (the update)"),
               ": ", error);
    LOG(WARNING) << "Net \"" << net_->name() << "\" runs without a CUDA graph: " << reason_;
    return false;
  }
  graph_ = std::move(graph);
  ++captures_;
  free_generation_ = gpu::FreeGeneration(net_->device().id);
  if (captures_ == 1)
    LOG(INFO) << "Net \"" << net_->name() << "\": the iteration from layer \""
              << net_->layer_names()[net_->num_input_layers()]
              << "\" on runs as one CUDA graph (--cuda-graph=false turns it off)";
  return true;
}

void IterationGraph::Launch() {
  gpu::Check(cudaGraphLaunch(graph_->exec, gpu::Stream()), "cudaGraphLaunch");
  replayed_ = true;
}
#endif  // CREMA_WITH_CUDA

}  // namespace crema
