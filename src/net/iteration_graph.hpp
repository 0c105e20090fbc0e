#pragma once
// Whole-iteration CUDA graphs. A net's shapes are fixed, so every iteration launches the same
// kernels: after the data layers (which fill their tops from the host, and run uncaptured each
// iteration), the rest of the net's Forward and Backward and what the caller adds (the solver's
// update) is captured into one CUDA graph, once an iteration has run without allocating or
// freeing device memory, and replayed from then on: one launch instead of hundreds.
//
// Legal only when every captured layer SupportsGraphCapture (Net::GraphCaptureBlocker); else the
// iteration runs uncaptured and the reason is logged once. A graph keeps the addresses it was
// recorded with: when the net's memory or shapes change (Net::GraphSignature: a new batch size,
// a re-plan) or device memory is freed (a block the graph used may be someone else's now), it is
// dropped and captured again after a clean uncaptured iteration. A capture that fails (a layer
// that synchronises after all) is abandoned, the iteration runs uncaptured, and graphs stay off
// for this net, with the layer named. Captured and uncaptured iterations launch the same kernels
// with the same arguments, so they compute the same values, bit for bit.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "crema/net.hpp"

namespace crema {

class IterationGraph {
 public:
  // `enabled` false: every iteration runs uncaptured (crema --cuda-graph=false).
  IterationGraph(Net* net, bool enabled);
  ~IterationGraph();
  IterationGraph(const IterationGraph&) = delete;
  IterationGraph& operator=(const IterationGraph&) = delete;

  // One iteration: the data layers, then `body`, which runs the net's layers from
  // net->num_input_layers() on (Forward, Backward) and whatever else the iteration does on the
  // device, launching only on gpu::Stream(). Returns the net's weighted loss.
  double Run(const std::function<void()>& body);

  // Whether the last Run replayed a graph.
  bool replayed() const { return replayed_; }
  // Why the last Run did not replay ("" when it did, or is warming up to capture).
  const std::string& reason() const { return reason_; }
  int captures() const { return captures_; }

 private:
  void Reset();
  // Captures `body` into a graph; false (reason_ set, graphs off) when the capture failed.
  bool Capture(const std::function<void()>& body);
  void Launch();

  Net* net_;
  bool enabled_;
  bool failed_ = false;
  bool replayed_ = false;
  std::string reason_;
  std::string logged_reason_;
  int clean_iterations_ = 0;
  int captures_ = 0;
  struct Graph;
  std::unique_ptr<Graph> graph_;
  std::vector<uintptr_t> signature_;
  uint64_t free_generation_ = 0;
};

}  // namespace crema
