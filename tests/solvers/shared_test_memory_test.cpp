// The test nets draw their planned buffers from the train net's (SolverOptions::share_test_memory):
// training with a test every iteration gives bit-identical weights and test scores with and
// without the sharing, and the activation memory allocated by all nets together drops.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "crema/proto_io.hpp"
#include "crema/solver.hpp"

namespace crema {
namespace {

// Data layers become DummyData: Gaussian images and labels drawn uniformly from [0, classes)
// (the loss and accuracy layers truncate them to integers), new values every Forward.
NetParameter WithDummyData(const std::string& model, int channels, int size, int classes) {
  NetParameter param;
  ReadNetParamsFromTextFile(std::string(CREMA_SOURCE_DIR) + "/models/" + model, &param);
  for (LayerParameter& layer : *param.mutable_layer()) {
    if (layer.type() != "Data") continue;
    const bool test = layer.include_size() > 0 && layer.include(0).phase() == TEST;
    const int batch = test ? 10 : 8;  // test batches larger than training ones, as in lenet
    LayerParameter dummy;
    dummy.set_name(layer.name());
    dummy.set_type("DummyData");
    *dummy.mutable_top() = layer.top();
    *dummy.mutable_include() = layer.include();
    DummyDataParameter* p = dummy.mutable_dummy_data_param();
    BlobShape* image = p->add_shape();
    for (int d : {batch, channels, size, size}) image->add_dim(d);
    p->add_shape()->add_dim(batch);
    p->add_data_filler()->set_type("gaussian");
    FillerParameter* label = p->add_data_filler();
    label->set_type("uniform");
    label->set_min(0);
    label->set_max(classes - 0.001f);
    layer = dummy;
  }
  return param;
}

// Bytes of the distinct memory allocated for the blobs (data and diff) of all the solver's nets
// (a planned arena once, whatever number of views its blobs use).
size_t AllocatedActivationBytes(const Solver& solver) {
  std::set<const SyncedMemory*> seen;
  size_t bytes = 0;
  const auto count = [&](const Net& net) {
    for (const BlobPtr& blob : net.blobs())
      for (const SyncedMemory* memory : {blob->data().get(), blob->diff().get()}) {
        if (!memory || memory->head() == SyncedMemory::Head::kUninitialized) continue;
        const SyncedMemory* allocation = memory->arena() ? memory->arena() : memory;
        if (seen.insert(allocation).second) bytes += allocation->size();
      }
  };
  count(*solver.net());
  for (const auto& net : solver.test_nets()) count(*net);
  return bytes;
}

struct Run {
  std::vector<std::vector<std::vector<std::pair<std::string, double>>>> scores;
  std::vector<std::vector<float>> weights;
  size_t bytes = 0;
};

Run Train(const NetParameter& net, bool share) {
  SolverParameter param;
  *param.mutable_net_param() = net;
  param.add_test_iter(2);
  param.set_test_interval(1);
  param.set_base_lr(0.01f);
  param.set_momentum(0.9f);
  param.set_lr_policy("fixed");
  param.set_display(0);
  param.set_max_iter(4);
  param.set_random_seed(3);
  param.set_snapshot_after_train(false);
  SolverOptions options;
  options.train_net_memory_plan = MemoryPlan::kTraining;
  options.test_net_memory_plan = MemoryPlan::kInference;
  options.share_test_memory = share;
  auto solver = Solver::Create(param, options);
  Run run;
  for (int it = 0; it < 4; ++it) {
    solver->Step(1);
    run.scores.push_back(solver->last_test_scores());
  }
  run.bytes = AllocatedActivationBytes(*solver);
  for (const Blob* p : solver->net()->learnable_params())
    run.weights.emplace_back(p->cpu_data<float>(), p->cpu_data<float>() + p->count());
  return run;
}

void ExpectSameTraining(const NetParameter& net) {
  const Run plain = Train(net, false);
  const Run shared = Train(net, true);
  ASSERT_EQ(plain.scores.size(), shared.scores.size());
  for (size_t it = 0; it < plain.scores.size(); ++it) {
    ASSERT_FALSE(plain.scores[it].empty()) << "no test at iteration " << it;
    EXPECT_EQ(plain.scores[it], shared.scores[it]) << "test scores at iteration " << it;
  }
  ASSERT_EQ(plain.weights.size(), shared.weights.size());
  for (size_t j = 0; j < plain.weights.size(); ++j)
    EXPECT_EQ(plain.weights[j], shared.weights[j]) << "param " << j;
  EXPECT_LT(shared.bytes, plain.bytes);
  std::printf("allocated activation bytes: %zu without sharing, %zu with\n", plain.bytes,
              shared.bytes);
}

TEST(SharedTestMemory, LeNetTrainsIdentically) {
  ExpectSameTraining(WithDummyData("lenet/lenet_train_test.prototxt", 1, 28, 10));
}

TEST(SharedTestMemory, Cifar10QuickTrainsIdentically) {
  ExpectSameTraining(WithDummyData("cifar10_quick/train_val.prototxt", 3, 32, 10));
}

}  // namespace
}  // namespace crema
