// crema-embed: crema used as a library. Trains a net for a few iterations through the C++ Solver
// API, then copies the trained weights into the deploy net and classifies one test batch with a
// plain forward, as a program embedding crema would.
//
//   crema-embed SOLVER.prototxt DEPLOY.prototxt [ITERATIONS (default 100)]
//   e.g. from crema's checkout, after data/fashion_mnist/get_fashion_mnist.sh:
//   crema-embed models/lenet/lenet_solver.prototxt models/lenet/lenet.prototxt 100
//
// Relative paths in the solver (its net, the nets' data sources) are relative to the current
// folder, as in Caffe. The solver's first test net gives the batch: its "data" and "label"
// blobs. Prints the loss every 10 iterations and the deploy net's accuracy on that batch.
// Exit 0 on success, 2 on a configuration error, 1 on any other error.
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "crema/error.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "crema/solver.hpp"
#include "crema/version.hpp"

namespace {

// The fraction of rows of `prob` (N x classes) whose largest entry is at `label`.
double Accuracy(const crema::Blob& prob, const crema::Blob& label) {
  const int n = prob.shape()[0];
  const int classes = static_cast<int>(prob.count() / n);
  const float* p = prob.cpu_data<float>();
  const float* l = label.cpu_data<float>();
  int right = 0;
  for (int i = 0; i < n; ++i) {
    int best = 0;
    for (int c = 1; c < classes; ++c)
      if (p[i * classes + c] > p[i * classes + best]) best = c;
    right += best == static_cast<int>(l[i]);
  }
  return static_cast<double>(right) / n;
}

int Run(const std::string& solver_file, const std::string& deploy_file, int iterations) {
  crema::SolverParameter param;
  crema::SolverOptions options;  // on the CPU; options.device = crema::Device::Cuda(0) for a GPU
  options.source = crema::ReadSolverParamsFromTextFile(solver_file, &param);
  param.set_test_initialization(false);                    // no test pass before the first step
  options.test_net_memory_plan = crema::MemoryPlan::kOff;  // keep every test blob readable
  std::unique_ptr<crema::Solver> solver = crema::Solver::Create(param, options);

  for (int done = 0; done < iterations; done += 10) {
    solver->Step(std::min(10, iterations - done));
    std::printf("iteration %d, loss %.4f\n", solver->iter(), solver->smoothed_loss());
  }
  if (solver->test_nets().empty())
    throw crema::ConfigError(solver_file + ": the solver has no test net to take a batch from");

  // One batch of the test set: the test net's data layer reads it.
  crema::Net& test_net = *solver->test_nets()[0];
  test_net.Forward();
  const crema::BlobPtr data = test_net.blob_by_name("data");
  const crema::BlobPtr label = test_net.blob_by_name("label");

  // The deploy net, with the trained weights, on that batch.
  std::unique_ptr<crema::Net> deploy = crema::Net::FromFile(deploy_file, crema::TEST);
  crema::NetParameter trained;
  solver->net()->ToProto(&trained);
  deploy->CopyTrainedLayersFrom(trained);
  crema::Blob& input = *deploy->input_blobs()[0];
  input.Reshape(data->shape());
  deploy->Reshape();
  std::copy(data->cpu_data<float>(), data->cpu_data<float>() + data->count(),
            input.mutable_cpu_data<float>());
  deploy->Forward();
  const crema::Blob& prob = *deploy->output_blobs()[0];
  std::printf("deploy net: %d test images, accuracy %.4f\n", prob.shape()[0],
              Accuracy(prob, *label));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s SOLVER.prototxt DEPLOY.prototxt [ITERATIONS]\n", argv[0]);
    return 2;
  }
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = google::GLOG_WARNING;  // the nets' set-up log: set 0 to see it
  google::InitGoogleLogging(argv[0]);
  std::printf("crema %s (git %s)\n", crema::VersionString(), crema::GitCommit());
  const int iterations = argc > 3 ? std::atoi(argv[3]) : 100;
  if (iterations <= 0) {
    std::fprintf(stderr, "error: ITERATIONS must be a positive number, got \"%s\"\n", argv[3]);
    return 2;
  }
  try {
    return Run(argv[1], argv[2], iterations);
  } catch (const crema::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
