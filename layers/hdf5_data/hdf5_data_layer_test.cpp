#include "layers/hdf5_data/hdf5_data_layer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/rng.hpp"
#include "io/hdf5.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

namespace crema::testing {
namespace {

// A file with `rows` rows: data (rows x 2 x 3, value = 1000 * id + 10 * row + k) and
// label (rows, value = 100 * id + row); data stored as `dtype`.
std::string WriteH5(const std::string& dir, int id, int rows, DataType dtype = DataType::kFloat32) {
  const std::string path = dir + "/file" + std::to_string(id) + ".h5";
  Blob data(std::vector<int>{rows, 2, 3}, dtype), label(std::vector<int>{rows}, dtype);
  CREMA_DISPATCH_FLOAT(dtype, T, {
    T* d = data.mutable_cpu_data<T>();
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < 6; ++k) d[r * 6 + k] = static_cast<T>(1000 * id + 10 * r + k);
    T* l = label.mutable_cpu_data<T>();
    for (int r = 0; r < rows; ++r) l[r] = static_cast<T>(100 * id + r);
  });
  Hdf5File file(path, Hdf5File::Mode::kCreate);
  WriteBlobToHDF5(file.id(), "data", data, false);
  WriteBlobToHDF5(file.id(), "label", label, false);
  file.Close();
  return path;
}

std::string WriteList(const std::string& dir, const std::vector<std::string>& files) {
  const std::string path = dir + "/list.txt";
  std::ofstream out(path);
  for (const std::string& f : files) out << f << "\n";
  return path;
}

std::unique_ptr<Layer> Make(const std::string& source, int batch, bool shuffle = false,
                            DataType dtype = DataType::kFloat64) {
  return CreateLayer("type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" +
                         source + "' batch_size: " + std::to_string(batch) +
                         (shuffle ? " shuffle: true" : "") + " }",
                     dtype);
}

std::vector<double> Rows(int id, std::vector<int> rows) {
  std::vector<double> values;
  for (int r : rows)
    for (int k = 0; k < 6; ++k) values.push_back(1000 * id + 10 * r + k);
  return values;
}

TEST(HDF5DataLayer, ReadsBatchesAndCyclesThroughFiles) {
  const std::string dir = TempDir();
  const std::string a = WriteH5(dir, 1, 3), b = WriteH5(dir, 2, 2, DataType::kFloat64);
  auto layer = Make(WriteList(dir, {a, b}), 2);
  EXPECT_STREQ(layer->type(), "HDF5Data");
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  EXPECT_EQ(data.shape(), (std::vector<int>{2, 2, 3}));
  EXPECT_EQ(label.shape(), (std::vector<int>{2}));
  // file1 rows 0 1 | 2, file2 row 0 | file2 row 1, file1 row 0 | file1 rows 1 2
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(DataOf(label), (std::vector<double>{100, 101}));
  EXPECT_EQ(DataOf(data), Rows(1, {0, 1}));
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(DataOf(label), (std::vector<double>{102, 200}));
  std::vector<double> expected = Rows(1, {2});
  for (double v : Rows(2, {0})) expected.push_back(v);
  EXPECT_EQ(DataOf(data), expected);
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(DataOf(label), (std::vector<double>{201, 100}));
  layer->Forward({}, {&data, &label});
  EXPECT_EQ(DataOf(label), (std::vector<double>{101, 102}));
  EXPECT_EQ(DataOf(data), Rows(1, {1, 2}));
}

TEST(HDF5DataLayer, SingleFileWrapsAndFloat32) {
  const std::string dir = TempDir();
  auto layer = Make(WriteList(dir, {WriteH5(dir, 3, 3)}), 2, false, DataType::kFloat32);
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  std::vector<double> labels;
  for (int pass = 0; pass < 3; ++pass) {
    layer->Forward({}, {&data, &label});
    EXPECT_EQ(label.dtype(), DataType::kFloat32);
    for (double v : DataOf(label)) labels.push_back(v);
  }
  EXPECT_EQ(labels, (std::vector<double>{300, 301, 302, 300, 301, 302}));
}

TEST(HDF5DataLayer, ShuffleVisitsEveryRowOncePerPass) {
  const std::string dir = TempDir();
  const std::string a = WriteH5(dir, 1, 4), b = WriteH5(dir, 2, 4);
  SetRandomSeed(3);
  auto layer = Make(WriteList(dir, {a, b}), 4, true);
  Blob data, label;
  layer->SetUp({}, {&data, &label});
  std::multiset<double> seen;
  for (int pass = 0; pass < 2; ++pass) {
    layer->Forward({}, {&data, &label});
    const std::vector<double> labels = DataOf(label), values = DataOf(data);
    for (int i = 0; i < 4; ++i) {
      seen.insert(labels[i]);
      // each data row belongs to its label
      const int id = static_cast<int>(labels[i]) / 100, row = static_cast<int>(labels[i]) % 100;
      EXPECT_EQ(values[i * 6], 1000 * id + 10 * row);
    }
  }
  EXPECT_EQ(seen, (std::multiset<double>{100, 101, 102, 103, 200, 201, 202, 203}));
}

TEST(HDF5DataLayer, OneTopReadsItsDataset) {
  const std::string dir = TempDir();
  auto layer = CreateLayer("type: 'HDF5Data' top: 'label' hdf5_data_param { source: '" +
                           WriteList(dir, {WriteH5(dir, 4, 2)}) + "' batch_size: 1 }");
  Blob label;
  layer->SetUp({}, {&label});
  EXPECT_EQ(label.shape(), (std::vector<int>{1}));
  layer->Forward({}, {&label});
  layer->Forward({}, {&label});
  EXPECT_EQ(DataOf(label), std::vector<double>{401});
}

void ExpectRuntimeError(Layer* layer, const BlobVec& top, const std::string& needle) {
  try {
    layer->SetUp({}, top);
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(HDF5DataLayer, Errors) {
  const std::string dir = TempDir();
  Blob data, label;
  ExpectRuntimeError(Make(dir + "/no_list.txt", 2).get(), {&data, &label}, "no_list.txt");
  ExpectRuntimeError(Make(WriteList(dir, {dir + "/missing.h5"}), 2).get(), {&data, &label},
                     "missing.h5");
  const std::string good = WriteH5(dir, 1, 2);
  auto wrong_top = CreateLayer(
      "type: 'HDF5Data' top: 'data' top: 'weights' "
      "hdf5_data_param { source: '" +
      WriteList(dir, {good}) + "' batch_size: 1 }");
  ExpectRuntimeError(wrong_top.get(), {&data, &label}, "weights");
  ExpectRuntimeError(Make(WriteList(dir, {}), 2).get(), {&data, &label}, "lists no");
  EXPECT_THROW(Make(WriteList(dir, {good}), 0)->SetUp({}, {&data, &label}), ConfigError);
  auto transform = CreateLayer(
      "type: 'HDF5Data' top: 'data' transform_param { scale: 2 } "
      "hdf5_data_param { source: '" +
      WriteList(dir, {good}) + "' batch_size: 1 }");
  EXPECT_THROW(transform->SetUp({}, {&data}), ConfigError);
}

TEST(HDF5DataLayer, ShardsReadEveryNthRowOverAllFiles) {
  // Rows over the files in list order: 0-2 file1, 3-4 file2, 5-8 file3; shard r of N reads the
  // rows i with i % N == r (file2 holds none of shard 1 of 4: it is passed over).
  const std::string dir = TempDir();
  const std::string list =
      WriteList(dir, {WriteH5(dir, 1, 3), WriteH5(dir, 2, 2), WriteH5(dir, 3, 4)});
  std::vector<double> all = {100, 101, 102, 200, 201, 300, 301, 302, 303};  // labels, in order
  auto make = [&](int shard, int shards, int batch, bool shuffle) {
    return CreateLayer(
        "type: 'HDF5Data' top: 'data' top: 'label' hdf5_data_param { source: '" + list +
            "' batch_size: " + std::to_string(batch) + (shuffle ? " shuffle: true" : "") +
            " shard_id: " + std::to_string(shard) + " num_shards: " + std::to_string(shards) + " }",
        DataType::kFloat64);
  };
  for (int shards : {1, 2, 3, 4}) {
    std::vector<int> seen(all.size(), 0);
    for (int shard = 0; shard < shards; ++shard) {
      std::vector<double> mine;
      for (size_t i = shard; i < all.size(); i += shards) {
        mine.push_back(all[i]);
        ++seen[i];
      }
      auto layer = make(shard, shards, 1, false);
      Blob data, label;
      layer->SetUp({}, {&data, &label});
      EXPECT_EQ(layer->NumRecords(), static_cast<int64_t>(mine.size()));
      for (size_t n = 0; n < 2 * mine.size(); ++n) {  // two passes
        layer->Forward({}, {&data, &label});
        const double expected = mine[n % mine.size()];
        ASSERT_EQ(DataOf(label)[0], expected) << shards << " " << shard << " " << n;
        const int id = static_cast<int>(expected) / 100, row = static_cast<int>(expected) % 100;
        EXPECT_EQ(DataOf(data), Rows(id, {row}));
      }
      SetRandomSeed(5);
      auto shuffled = make(shard, shards, static_cast<int>(mine.size()), true);
      shuffled->SetUp({}, {&data, &label});
      shuffled->Forward({}, {&data, &label});
      std::vector<double> labels = DataOf(label);
      std::sort(labels.begin(), labels.end());
      EXPECT_EQ(labels, mine) << shards << " " << shard;
    }
    EXPECT_EQ(seen, std::vector<int>(all.size(), 1));
  }
  Blob data, label;
  EXPECT_THROW(make(3, 3, 1, false)->SetUp({}, {&data, &label}), ConfigError);
  EXPECT_THROW(make(0, 0, 1, false)->SetUp({}, {&data, &label}), ConfigError);
  EXPECT_THROW(make(9, 10, 1, false)->SetUp({}, {&data, &label}), RuntimeError);  // no rows
}

}  // namespace
}  // namespace crema::testing
