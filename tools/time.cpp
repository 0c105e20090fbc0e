// crema time: benchmarks a net layer by layer (Caffe's `caffe time`).
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cuda_allocator.hpp"
#include "crema/net.hpp"
#include "flags.hpp"
#include "io/prefetch_pool.hpp"
#include "verb.hpp"

namespace crema::cli {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Waits for the device's queued work so that wall-clock times mean something on a GPU: a
// 4-byte device-to-host copy (a synchronous cudaMemcpy) waits for all earlier work. No-op on
// the CPU.
class DeviceSync {
 public:
  explicit DeviceSync(const Device& device) : gpu_(device.is_cuda()), probe_(std::vector<int>{1}) {
    if (gpu_) probe_.mutable_gpu_data<float>();
  }
  void Wait() {
    if (!gpu_) return;
    probe_.mutable_gpu_data<float>();  // head at the GPU, so the read below copies
    (void)probe_.cpu_data<float>();
  }

 private:
  bool gpu_;
  Blob probe_;
};

int RunTime(const std::vector<std::string>& args) {
  RequireFlag("model", FLAGS_model);
  if (FLAGS_iterations <= 0) CREMA_THROW_CONFIG("--iterations must be > 0, got ", FLAGS_iterations);
  const Device device = DeviceFromFlags();
  const Phase phase = PhaseFromFlag(TRAIN);
  std::unique_ptr<Net> net =
      Net::FromFile(FLAGS_model, phase, FLAGS_level, StagesFromFlag(), device);
  DeviceSync sync(device);

  // A warm-up pass (allocations, algorithm choice), as Caffe does.
  LOG(INFO) << "Performing Forward";
  const double initial_loss = net->Forward();
  LOG(INFO) << "Initial loss: " << initial_loss;
  LOG(INFO) << "Performing Backward";
  net->Backward();
  sync.Wait();

  const auto& layers = net->layers();
  const auto& bottom_vecs = net->bottom_vecs();
  const auto& top_vecs = net->top_vecs();
  const auto& bottom_need_backward = net->bottom_need_backward();
  const int n = net->num_layers();
  std::vector<double> forward_ms(n, 0.0), backward_ms(n, 0.0);
  double forward_total = 0, backward_total = 0;
  LOG(INFO) << "*** Benchmark begins ***";
  LOG(INFO) << "Testing for " << FLAGS_iterations << " iterations.";
  const Clock::time_point total_start = Clock::now();
  for (int j = 0; j < FLAGS_iterations; ++j) {
    const Clock::time_point iter_start = Clock::now();
    for (int i = 0; i < n; ++i) {
      const Clock::time_point start = Clock::now();
      layers[i]->Forward(bottom_vecs[i], top_vecs[i]);
      sync.Wait();
      forward_ms[i] += MsSince(start);
    }
    forward_total += MsSince(iter_start);
    const Clock::time_point backward_start = Clock::now();
    // Every layer's Backward runs, with propagate_down saying which bottoms need a gradient
    // (as Caffe's tool does; param gradients are computed regardless).
    for (int i = n - 1; i >= 0; --i) {
      const Clock::time_point start = Clock::now();
      layers[i]->Backward(top_vecs[i], bottom_need_backward[i], bottom_vecs[i]);
      sync.Wait();
      backward_ms[i] += MsSince(start);
    }
    backward_total += MsSince(backward_start);
    LOG(INFO) << "Iteration: " << j + 1 << " forward-backward time: " << MsSince(iter_start)
              << " ms.";
  }
  const double total = MsSince(total_start);
  const double iters = FLAGS_iterations;

  size_t width = 10;
  for (int i = 0; i < n; ++i) width = std::max(width, net->layer_names()[i].size());
  const int w = static_cast<int>(width);
  std::printf("Average time per layer over %d iterations (%s, %s):\n", FLAGS_iterations,
              phase == TRAIN ? "TRAIN" : "TEST", device.ToString().c_str());
  std::printf("  %-*s  %-16s  %12s  %12s\n", w, "layer", "type", "forward ms", "backward ms");
  for (int i = 0; i < n; ++i) {
    std::printf("  %-*s  %-16s  %12.5f  %12.5f\n", w, net->layer_names()[i].c_str(),
                layers[i]->type(), forward_ms[i] / iters, backward_ms[i] / iters);
  }
  std::printf("Average Forward pass: %.5f ms.\n", forward_total / iters);
  std::printf("Average Backward pass: %.5f ms.\n", backward_total / iters);
  std::printf("Average Forward-Backward: %.5f ms.\n", total / iters);
  std::printf("Total Time: %.5f ms.\n", total);

  // Whole iterations as training runs them: no waits between layers, the parameter update
  // (data -= diff) included; the host reads the loss once per iteration, as the solver does.
  const PrefetchWait wait_before = TotalPrefetchWait();
  const Clock::time_point train_start = Clock::now();
  for (int j = 0; j < FLAGS_iterations; ++j) {
    net->ClearParamDiffs();
    net->Forward();
    net->Backward();
    net->Update();
  }
  sync.Wait();
  const double train_ms = MsSince(train_start) / iters;
  const PrefetchWait wait_after = TotalPrefetchWait();
  int batch = 0;
  for (const Blob* top : top_vecs.empty() ? std::vector<Blob*>{} : top_vecs[0])
    if (top->num_axes() > 0) batch = std::max(batch, top->shape(0));
  std::printf("Average training iteration (forward, backward, update): %.5f ms", train_ms);
  if (batch > 0) std::printf(" = %.1f images/s (batch %d)", batch * 1000.0 / train_ms, batch);
  std::printf(".\n");
  // Time the data layers' Forward spent waiting for their prefetch threads in those iterations:
  // near 0 when loading keeps up with the net.
  if (wait_after.batches > wait_before.batches)
    std::printf("Data layers waited for data: %.1f ms over %lld batches (%.1f%% of the time).\n",
                wait_after.ms - wait_before.ms,
                static_cast<long long>(wait_after.batches - wait_before.batches),
                100.0 * (wait_after.ms - wait_before.ms) / (train_ms * iters));
  if (device.is_cuda())
    std::printf("Peak GPU memory held by crema's allocator: %.1f MiB.\n",
                gpu::GetMemoryStats(device.id).peak_in_use / 1048576.0);
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(time, "time", "benchmark a net: per-layer forward and backward times",
                    "crema time --model NET.prototxt [--iterations N] [--gpu ID] "
                    "[--phase TRAIN|TEST] [--stage S] [--level L]\n\n"
                    "Builds the net (phase TRAIN unless --phase says otherwise), runs one warm-up "
                    "forward/backward, then N timed iterations of every layer's Forward and "
                    "Backward, and prints the average milliseconds per layer and per pass, as "
                    "Caffe's `caffe time`. On a GPU each layer is followed by a device "
                    "synchronisation so that per-layer times are exact.",
                    {"model", "iterations", "gpu", "math", "cudnn_workspace_mb", "deterministic",
                     "phase", "stage", "level"},
                    &crema::cli::RunTime);
