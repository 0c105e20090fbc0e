// crema time: benchmarks a net layer by layer (Caffe's `caffe time`), then whole training
// iterations (forward, backward, update) or, in phase TEST, whole inference passes.
#include <glog/logging.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/cuda_allocator.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "flags.hpp"
#include "io/prefetch_pool.hpp"
#include "math/blas_setup.hpp"
#include "math/dnnl_engine.hpp"
#include "math/math.hpp"
#include "net/iteration_graph.hpp"
#include "verb.hpp"

DEFINE_double(seconds, 0,
              "crema time: keep timing whole iterations until this many seconds have passed "
              "(at least --iterations of them, after one untimed warm-up iteration); 0 = exactly "
              "--iterations.");
DEFINE_int32(threads, 0,
             "CPU threads for crema's loops and OpenBLAS (0 = OMP_NUM_THREADS, else all "
             "cores).");

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

// The peak resident set size of this process so far, in MiB.
double PeakRssMib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // KiB on Linux
}

// "12.3" for a precision of 1.
std::string Fixed(double value, int precision) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", precision, value);
  return text;
}

// What the BLAS reaches with the current threads on a 2048^3 float product: the best of three
// after a warm-up (an achievable peak, the yardstick of crema time's efficiency figure).
double MeasuredCpuPeakGflops() {
  constexpr int kSize = 2048;
  std::vector<float> a(static_cast<size_t>(kSize) * kSize, 0.5f), b(a), c(a.size());
  double best_ms = 0;
  for (int rep = 0; rep < 4; ++rep) {
    const Clock::time_point start = Clock::now();
    cpu::Gemm<float>(cpu::Trans::kNo, cpu::Trans::kNo, kSize, kSize, kSize, 1.0f, a.data(),
                     b.data(), 0.0f, c.data());
    const double ms = MsSince(start);
    if (rep == 1 || (rep > 1 && ms < best_ms)) best_ms = ms;
  }
  return 2.0 * kSize * kSize * kSize / best_ms / 1e6;
}

// The batch size: the largest first dimension among the first layer's tops (0 when unknown).
int BatchSize(const Net& net) {
  int batch = 0;
  if (net.top_vecs().empty()) return batch;
  for (const Blob* top : net.top_vecs()[0])
    if (top->num_axes() > 0) batch = std::max(batch, top->shape(0));
  return batch;
}

// A solver for --solver: its train net, no display, tests or snapshots while timing.
std::unique_ptr<Solver> TimingSolver(const Device& device) {
#ifdef CREMA_INFERENCE_ONLY
  (void)device;
  CREMA_THROW_CONFIG("--solver: training is not in this inference-only build; time a --model");
#else
  SolverParameter param;
  std::shared_ptr<ProtoSource> source = ReadSolverParamsFromTextFile(FLAGS_solver, &param);
  param.mutable_train_state()->set_level(FLAGS_level);
  for (const std::string& stage : StagesFromFlag()) param.mutable_train_state()->add_stage(stage);
  param.set_display(0);
  param.set_test_interval(0);
  // No test nets: test_iter alone would leave the ones named by test_net (SSD's solvers) without
  // their counts.
  param.clear_test_iter();
  param.clear_test_net();
  param.clear_test_net_param();
  param.clear_test_state();
  param.set_test_initialization(false);
  param.set_snapshot(0);
  param.set_snapshot_after_train(false);
  param.clear_snapshot_prefix();
  ApplyAmpFlag(&param);
  SolverOptions options;
  options.device = device;
  options.source = source;
  options.train_net_memory_plan = MemoryPlanFromFlag(MemoryPlan::kTraining);
  options.cuda_graph = FLAGS_cuda_graph;
  return Solver::Create(param, options);
#endif
}

int RunTime(const std::vector<std::string>& args) {
  if (FLAGS_solver.empty()) RequireFlag("model", FLAGS_model);
  if (!FLAGS_solver.empty() && !FLAGS_model.empty())
    CREMA_THROW_CONFIG("give --model (a net) or --solver (its train net and update), not both");
  if (FLAGS_iterations <= 0) CREMA_THROW_CONFIG("--iterations must be > 0, got ", FLAGS_iterations);
  if (FLAGS_seconds < 0) CREMA_THROW_CONFIG("--seconds must be >= 0, got ", FLAGS_seconds);
  if (FLAGS_threads < 0) CREMA_THROW_CONFIG("--threads must be >= 0, got ", FLAGS_threads);
  SetCpuThreads(FLAGS_threads);
  const Device device = DeviceFromFlags();
  const Phase phase = PhaseFromFlag(TRAIN);
  if (!FLAGS_solver.empty() && phase == TEST)
    CREMA_THROW_CONFIG("--phase TEST times inference of a --model; --solver times training");
  std::unique_ptr<Solver> solver;
  std::unique_ptr<Net> own_net;
  if (!FLAGS_solver.empty()) {
    solver = TimingSolver(device);
  } else {
    own_net = Net::FromFile(
        FLAGS_model, phase, FLAGS_level, StagesFromFlag(), device,
        MemoryPlanFromFlag(phase == TEST ? MemoryPlan::kInference : MemoryPlan::kTraining));
    own_net->SetFoldBatchNorm(FLAGS_fold_bn && phase == TEST);
  }
  Net* net = solver ? solver->net() : own_net.get();
  const bool train = phase == TRAIN;
  DeviceSync sync(device);

  // The CPU engines decided first (--cpu_engine auto), so that every timed pass runs them.
  net->PrepareCpuEngines();
  // A warm-up pass (allocations, algorithm choice), as Caffe does.
  LOG(INFO) << "Performing Forward";
  const double initial_loss = net->Forward();
  LOG(INFO) << "Initial loss: " << initial_loss;
  if (train) {
    LOG(INFO) << "Performing Backward";
    net->Backward();
  }
  sync.Wait();

  const auto& layers = net->layers();
  const auto& bottom_need_backward = net->bottom_need_backward();
  const int n = net->num_layers();
  // Steps as the net runs them, each timed as a whole on its first layer's row: a layer with
  // what the net fuses into it (a BatchNorm group's Scale and ReLU; a BatchNorm or Scale folded
  // into a convolution; a ReLU, an Eltwise SUM or a depthwise convolution its producer computes).
  // Timed alone, a fused layer would run a second time (a ReLU pass over memory, a depthwise
  // convolution, that the whole pass never makes).
  std::vector<int> step_last(n), step_of(n);
  std::vector<std::string> step_type(n);
  const auto at = [n](const std::vector<int>& plan, int j) {
    return static_cast<int>(plan.size()) == n ? plan[j] : -1;
  };
  const auto fused_into = [&](int j) {
    for (const auto* plan :
         {&net->fused_into_batch_norm(), &net->folded_into(), &net->relu_fused_into(),
          &net->sum_fused_into(), &net->depthwise_fused_into()})
      if (at(*plan, j) >= 0) return at(*plan, j);
    return -1;
  };
  for (int b = 0; b < n;) {
    int last = b;
    while (last + 1 < n && fused_into(last + 1) >= b) ++last;
    step_type[b] = layers[b]->type();
    for (int j = b; j <= last; ++j) {
      step_of[j] = b;
      step_last[j] = last;
      if (j > b && at(net->folded_into(), j) < 0)
        step_type[b] += std::string("+") + layers[j]->type();
    }
    b = last + 1;
  }
  std::vector<double> forward_ms(n, 0.0), backward_ms(n, 0.0);
  double forward_total = 0, backward_total = 0;
  LOG(INFO) << "*** Benchmark begins ***";
  LOG(INFO) << "Testing for " << FLAGS_iterations << " iterations.";
  const Clock::time_point total_start = Clock::now();
  for (int j = 0; j < FLAGS_iterations; ++j) {
    const Clock::time_point iter_start = Clock::now();
    for (int i = 0; i < n; i = step_last[i] + 1) {
      const Clock::time_point start = Clock::now();
      net->ForwardFromTo(i, step_last[i]);  // as the net runs it (folded layers skipped)
      sync.Wait();
      forward_ms[i] += MsSince(start);
    }
    forward_total += MsSince(iter_start);
    if (!train) continue;
    const Clock::time_point backward_start = Clock::now();
    // Every layer's Backward runs, with propagate_down saying which bottoms need a gradient
    // (as Caffe's tool does; param gradients are computed regardless); a group's as the net
    // runs it.
    for (int i = n - 1; i >= 0; i = step_of[i] - 1) {
      const Clock::time_point start = Clock::now();
      if (step_of[i] != i)
        net->BackwardFromTo(i, step_of[i]);
      else
        net->BackwardLayer(i);
      sync.Wait();
      backward_ms[step_of[i]] += MsSince(start);
    }
    backward_total += MsSince(backward_start);
    LOG(INFO) << "Iteration: " << j + 1 << " forward-backward time: " << MsSince(iter_start)
              << " ms.";
  }
  const double total = MsSince(total_start);
  const double iters = FLAGS_iterations;

  size_t width = 10, type_width = 16;
  for (int i = 0; i < n; ++i) {
    width = std::max(width, net->layer_names()[i].size());
    type_width = std::max(type_width, step_type[i].size());
  }
  const int w = static_cast<int>(width), tw = static_cast<int>(type_width);
  std::printf("Average time per layer over %d iterations (%s, %s, %d threads):\n", FLAGS_iterations,
              train ? "TRAIN" : "TEST", device.ToString().c_str(), CpuThreads());
  // The arithmetic of each layer in one pass (Layer::ForwardFlops; backward: the weight gradient
  // and, where a bottom takes one, the input gradient).
  std::vector<double> forward_flops(n, 0.0), backward_flops(n, 0.0);
  double iteration_flops = 0;
  for (int i = 0; i < n; ++i) {
    forward_flops[i] = layers[i]->ForwardFlops();
    if (train)
      backward_flops[i] =
          forward_flops[i] *
          ((layers[i]->blobs().empty() ? 0 : 1) +
           (!bottom_need_backward[i].empty() && bottom_need_backward[i][0] ? 1 : 0));
    iteration_flops += forward_flops[i] + backward_flops[i];
  }
  std::printf("  %-*s  %-*s  %12s  %12s  %9s  %s\n", w, "layer", tw, "type", "forward ms",
              "backward ms", "GFLOP/s", device.is_cpu() ? "engine" : "");
  for (int i = 0; i < n; ++i) {
    if (step_of[i] != i) {
      std::printf("  %-*s  %-*s  %12s  %12s\n", w, net->layer_names()[i].c_str(), tw,
                  layers[i]->type(), "(with", (net->layer_names()[step_of[i]] + ")").c_str());
      continue;
    }
    const double ms = (forward_ms[i] + backward_ms[i]) / iters;
    double flops = 0;
    // The engine of the step's first layer that ran one (the folded copy where BatchNorm was
    // folded into a convolution; a depthwise convolution its 1x1 one computes runs none).
    const char* engine = "";
    for (int j = i; j <= step_last[i]; ++j) {
      flops += forward_flops[j] + backward_flops[j];
      const CpuEngineChoice* c = net->forward_layer(j)->cpu_engine_choice();
      if (*engine == '\0' && c != nullptr) engine = c->last();
    }
    const std::string gflops = flops > 0 && ms > 0 ? Fixed(flops / ms / 1e6, 1) : "";
    std::printf("  %-*s  %-*s  %12.5f  %12.5f  %9s  %s\n", w, net->layer_names()[i].c_str(), tw,
                step_type[i].c_str(), forward_ms[i] / iters, backward_ms[i] / iters, gflops.c_str(),
                device.is_cpu() ? engine : "");
  }
  // The same times summed per layer type (a BatchNorm group under its joined types), largest
  // first: where an iteration goes.
  std::map<std::string, std::pair<double, double>> by_type;
  double layers_total = 0;
  for (int i = 0; i < n; ++i) {
    if (step_of[i] != i) continue;
    by_type[step_type[i]].first += forward_ms[i] / iters;
    by_type[step_type[i]].second += backward_ms[i] / iters;
    layers_total += (forward_ms[i] + backward_ms[i]) / iters;
  }
  std::vector<std::pair<std::string, std::pair<double, double>>> types(by_type.begin(),
                                                                       by_type.end());
  std::sort(types.begin(), types.end(), [](const auto& a, const auto& b) {
    return a.second.first + a.second.second > b.second.first + b.second.second;
  });
  std::printf("Time per layer type:\n  %-*s  %12s  %12s  %12s  %7s\n", tw, "type", "forward ms",
              "backward ms", "total ms", "share");
  for (const auto& [type, ms] : types)
    std::printf("  %-*s  %12.5f  %12.5f  %12.5f  %6.1f%%\n", tw, type.c_str(), ms.first, ms.second,
                ms.first + ms.second,
                layers_total > 0 ? 100 * (ms.first + ms.second) / layers_total : 0.0);
  std::printf("Average Forward pass: %.5f ms.\n", forward_total / iters);
  if (train) {
    std::printf("Average Backward pass: %.5f ms.\n", backward_total / iters);
    std::printf("Average Forward-Backward: %.5f ms.\n", total / iters);
  }
  std::printf("Total Time: %.5f ms.\n", total);

  // Whole iterations as training or inference runs them: no waits between layers. Training
  // includes the update: the solver's (lr, momentum, weight decay) with --solver, else the
  // plain data -= diff; the host reads the loss once per iteration, as the solver does.
  // On a GPU the iteration after the data layers runs as one CUDA graph where it can
  // (net/iteration_graph.hpp): timed uncaptured first, then captured, side by side.
  const int start = net->num_input_layers();
  auto graph = std::make_unique<IterationGraph>(net, FLAGS_cuda_graph);
  const auto run_once = [&] {
    if (solver) {
#ifndef CREMA_INFERENCE_ONLY  // no solver there (TimingSolver refuses --solver)
      solver->Step(1);
#endif
      return;
    }
    graph->Run([&] {
      if (train) net->ClearParamDiffs(/*lazily=*/true);
      net->ForwardFrom(start);
      if (!train) return;
      net->BackwardTo(start);
      net->Update();
    });
  };
  // With --solver the solver's own graph (no solver in an inference-only build).
  const auto set_graph = [&](bool on) {
#ifndef CREMA_INFERENCE_ONLY
    if (solver) solver->set_cuda_graph(on);
#endif
    graph = std::make_unique<IterationGraph>(net, on);
  };
  const auto replayed = [&] {
#ifndef CREMA_INFERENCE_ONLY
    if (solver) return solver->graph_replayed();
#endif
    return graph->replayed();
  };
  const auto graph_reason = [&] {
#ifndef CREMA_INFERENCE_ONLY
    if (solver) return solver->graph_reason();
#endif
    return graph->reason();
  };
  // Average ms of whole iterations: at least --iterations, and --seconds.
  int whole = 0;
  const auto time_whole = [&] {
    whole = 0;
    const Clock::time_point whole_start = Clock::now();
    while (whole < FLAGS_iterations || MsSince(whole_start) < FLAGS_seconds * 1000) {
      run_once();
      ++whole;
      if (device.is_cuda() && whole >= FLAGS_iterations) sync.Wait();
    }
    sync.Wait();
    return MsSince(whole_start) / whole;
  };
  const PrefetchWait wait_before = TotalPrefetchWait();
  double uncaptured_ms = 0, captured_ms = 0;
  std::string reason;
  if (device.is_cuda() && FLAGS_cuda_graph) {
    set_graph(false);
    uncaptured_ms = time_whole();
    set_graph(true);
    // Warm-up: an iteration without allocations, then the capture.
    for (int i = 0; i < 3 && !replayed(); ++i) run_once();
    sync.Wait();
    if (replayed())
      captured_ms = time_whole();
    else
      reason = graph_reason();
  } else {
    // Warm-up: the first iteration allocates (the solver's history, the gradients written lazily)
    // and faults in those pages; training runs the steady state after it.
    run_once();
    sync.Wait();
    uncaptured_ms = time_whole();
    reason = device.is_cuda() ? "--cuda-graph=false" : "";
  }
  const double whole_ms = captured_ms > 0 ? captured_ms : uncaptured_ms;
  const int batch = BatchSize(*net);
  if (!train)
    std::printf("Average inference pass (forward) over %d iterations: %.5f ms", whole, whole_ms);
  else if (solver)
    std::printf(
        "Average training iteration (forward, backward, %s update) over %d iterations: "
        "%.5f ms",
        solver->type(), whole, whole_ms);
  else
    std::printf(
        "Average training iteration (forward, backward, update) over %d iterations: "
        "%.5f ms",
        whole, whole_ms);
  if (batch > 0) std::printf(" = %.1f images/s (batch %d)", batch * 1000.0 / whole_ms, batch);
  std::printf(".\n");
  if (device.is_cuda() && captured_ms > 0)
    std::printf("CUDA graph: captured %.5f ms, uncaptured %.5f ms per iteration (%.2fx).\n",
                captured_ms, uncaptured_ms, uncaptured_ms / captured_ms);
  else if (device.is_cuda())
    std::printf("CUDA graph: off (%s).\n", reason.c_str());
  if (iteration_flops > 0) {
    // Efficiency against what this machine's BLAS reaches on a large square product with the
    // same threads.
    const double gflops = iteration_flops / whole_ms / 1e6;
    std::printf("Arithmetic: %.4g GFLOP per %s (convolutions and inner products) = %.1f GFLOP/s",
                iteration_flops / 1e9, train ? "iteration" : "pass", gflops);
    if (device.is_cpu()) {
      const double peak = MeasuredCpuPeakGflops();
      std::printf(", %.0f%% of the measured FP32 peak (sgemm 2048^3, %d threads: %.1f GFLOP/s)",
                  100 * gflops / peak, CpuThreads(), peak);
    }
    std::printf(".\n");
  }
  // Time the data layers' Forward spent waiting for their prefetch threads in those iterations:
  // near 0 when loading keeps up with the net.
  const PrefetchWait wait_after = TotalPrefetchWait();
  if (wait_after.batches > wait_before.batches)
    std::printf("Data layers waited for data: %.1f ms over %lld batches (%.1f%% of the time).\n",
                wait_after.ms - wait_before.ms,
                static_cast<long long>(wait_after.batches - wait_before.batches),
                100.0 * (wait_after.ms - wait_before.ms) / (whole_ms * whole));
  if (device.is_cpu())
    std::printf("CPU threads: %d (OpenMP), %d (OpenBLAS, %s kernels).\n", CpuThreads(),
                BlasThreads(), OpenBlasCoreName().c_str());
  std::printf("Peak resident memory: %.1f MiB.\n", PeakRssMib());
  if (device.is_cuda())
    std::printf("Peak GPU memory held by crema's allocator: %.1f MiB.\n",
                gpu::GetMemoryStats(device.id).peak_in_use / 1048576.0);
  return 0;
}

}  // namespace
}  // namespace crema::cli

CREMA_REGISTER_VERB(
    time, "time", "benchmark a net: per-layer times, then training or inference throughput",
    "crema time (--model NET.prototxt | --solver SOLVER.prototxt) [--iterations N] [--seconds S] "
    "[--threads T] [--gpu ID] [--phase TRAIN|TEST] [--stage S] [--level L]\n\n"
    "Builds the net (phase TRAIN unless --phase says otherwise; with --solver, the solver's "
    "train net), runs one warm-up pass, then N timed iterations of every layer's Forward and, "
    "in phase TRAIN, Backward, and prints the average milliseconds per layer and per pass, as "
    "Caffe's `caffe time`. On a GPU each layer is followed by a device synchronisation so that "
    "per-layer times are exact. Then it times whole iterations (at least N, and at least S "
    "seconds with --seconds) without those waits and prints images/s: in phase TRAIN a "
    "training iteration (forward, backward and the update: the solver's with --solver, with "
    "its lr, momentum and weight decay; else data -= diff), in phase TEST an inference pass "
    "(forward only). On a GPU those iterations are timed uncaptured and then replayed as one "
    "CUDA graph (--cuda-graph), and both times are printed, or why the net cannot be captured. "
    "Last come the CPU threads (--threads, else OMP_NUM_THREADS, sets both "
    "crema's and OpenBLAS's) and the peak resident memory of the process.",
    {"memory_plan", "fold_bn", "model", "solver", "iterations", "seconds", "threads", "gpu", "math",
     "cudnn_workspace_mb", "deterministic", "cuda_graph", "amp", "phase", "stage", "level"},
    &crema::cli::RunTime);
