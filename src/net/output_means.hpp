#pragma once
// The means of a net's outputs over several forward passes, as `crema test` and the solver's
// test phase report them: each output summed element by element, then divided by the passes.
// An output whose size changes between passes (DetectionOutput's detections, Filter's kept
// items) has no element-wise mean: it is reported by its sizes instead, never averaged.
#include <cstdint>
#include <string>
#include <vector>

#include "crema/net.hpp"

namespace crema {

class OutputMeans {
 public:
  // Adds the net's outputs after one Forward.
  void Add(const Net& net);
  int passes() const { return passes_; }

  struct Mean {
    std::string name;  // the output blob
    int output;        // its index in net.output_blobs()
    double value;      // the mean of one element over the passes
  };
  // One per element of the outputs whose size never changed, in output order.
  std::vector<Mean> Means() const;

  struct Varying {
    std::string name;
    int output;
    int64_t min_count, max_count, total_count;  // values per pass; all passes together
  };
  // The outputs whose size changed.
  std::vector<Varying> VaryingOutputs() const;

 private:
  struct Output {
    std::string name;
    int64_t first_count = 0, min_count = 0, max_count = 0, total_count = 0;
    bool varies = false;
    std::vector<double> sums;
  };
  std::vector<Output> outputs_;
  int passes_ = 0;
};

}  // namespace crema
