#include "layers/memory_data/memory_data_layer.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "support/layer_test.hpp"

namespace crema::testing {
namespace {

constexpr const char* kParam =
    "type: 'MemoryData' memory_data_param { batch_size: 2 channels: 3 height: 2 width: 1 }";

MemoryDataLayer* AsMemory(Layer* layer) {
  auto* memory = dynamic_cast<MemoryDataLayer*>(layer);
  EXPECT_NE(memory, nullptr);
  return memory;
}

TEST(MemoryDataLayer, ShapesAndType) {
  auto layer = CreateLayer(kParam);
  EXPECT_STREQ(layer->type(), "MemoryData");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 3, 2, 1}));
  EXPECT_EQ(label.shape(), (std::vector<int>{2}));
}

template <typename In, typename Out>
void FeedsBatchesInOrder(DataType dtype) {
  auto layer = CreateLayer(kParam, dtype);
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  constexpr int n = 6, size = 6;
  std::vector<In> values(n * size), labels(n);
  for (int i = 0; i < n * size; ++i) values[i] = static_cast<In>(i * 0.5);
  for (int i = 0; i < n; ++i) labels[i] = static_cast<In>(100 + i);
  AsMemory(layer.get())->Reset(values.data(), labels.data(), n);
  for (int pass = 0; pass < 5; ++pass) {  // 3 batches, then around again
    layer->Forward({}, {&data, &label});
    const int first = (pass % 3) * 2;
    ASSERT_EQ(data.dtype(), dtype);
    const Out* d = data.cpu_data<Out>();
    for (int i = 0; i < 2 * size; ++i) EXPECT_EQ(d[i], static_cast<Out>((first * size + i) * 0.5));
    EXPECT_EQ(label.cpu_data<Out>()[0], 100 + first);
    EXPECT_EQ(label.cpu_data<Out>()[1], 101 + first);
  }
  // Reset starts from the first item again.
  AsMemory(layer.get())->Reset(values.data(), labels.data(), 4);
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(label.cpu_data<Out>()[0], 100);
}

TEST(MemoryDataLayer, FeedsBatchesInOrderFloat) {
  FeedsBatchesInOrder<float, float>(DataType::kFloat32);
}
TEST(MemoryDataLayer, FeedsBatchesInOrderDouble) {
  FeedsBatchesInOrder<float, double>(DataType::kFloat64);
  FeedsBatchesInOrder<double, double>(DataType::kFloat64);
}

TEST(MemoryDataLayer, SetBatchSize) {
  auto layer = CreateLayer(kParam);
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  std::vector<float> values(4 * 6, 1.0f), labels = {0, 1, 2, 3};
  auto* memory = AsMemory(layer.get());
  memory->Reset(values.data(), labels.data(), 4);
  memory->set_batch_size(4);
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{4, 3, 2, 1}));
  EXPECT_EQ(DataOf(label), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_THROW(memory->set_batch_size(3), RuntimeError);
}

TEST(MemoryDataLayer, Errors) {
  Blob data, label;
  auto missing = CreateLayer("type: 'MemoryData' memory_data_param { batch_size: 2 channels: 1 }");
  EXPECT_THROW(missing->SetUp({}, {&data, &label}), ConfigError);
  auto layer = CreateLayer(kParam);
  layer->SetUp({}, {&data, &label});
  EXPECT_THROW(layer->Forward({}, {&data, &label}), RuntimeError);  // no Reset yet
  std::vector<float> values(3 * 6), labels(3);
  EXPECT_THROW(AsMemory(layer.get())->Reset(values.data(), labels.data(), 3), RuntimeError);
  EXPECT_THROW(AsMemory(layer.get())->Reset(nullptr, labels.data(), 2), RuntimeError);
  Blob only;
  auto one_top = CreateLayer(kParam);
  EXPECT_THROW(one_top->SetUp({}, {&only}), ConfigError);
}

}  // namespace
}  // namespace crema::testing
