#include "layers/hdf5_output/hdf5_output_layer.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "io/hdf5.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"

namespace crema::testing {
namespace {

std::vector<double> Iota(int n, double start) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = start + i * 0.25;
  return v;
}

TEST(HDF5OutputLayer, WritesDataAndLabelAsCaffe) {
  const std::string path = TempDir() + "/out.h5";
  auto data = MakeBlob({2, 3, 2}, Iota(12, 1));
  auto label = MakeBlob({2}, {7, 8});
  {
    auto layer = CreateLayer("type: 'HDF5Output' hdf5_output_param { file_name: '" + path + "' }",
                             DataType::kFloat32);
    EXPECT_STREQ(layer->type(), "HDF5Output");
    layer->SetUp({data.get(), label.get()}, {});
    layer->Forward({data.get(), label.get()}, {});
  }
  Hdf5File file(path, Hdf5File::Mode::kRead);
  EXPECT_EQ(Hdf5DatasetShape(file.id(), "data"), (std::vector<int>{2, 3, 2, 1}));
  EXPECT_EQ(Hdf5DatasetShape(file.id(), "label"), (std::vector<int>{2, 1, 1, 1}));
  Blob read_data(DataType::kFloat64), read_label(DataType::kFloat64);
  ReadBlobFromHDF5(file.id(), "data", &read_data, true);
  ReadBlobFromHDF5(file.id(), "label", &read_label, true);
  EXPECT_EQ(DataOf(read_data), Iota(12, 1));
  EXPECT_EQ(DataOf(read_label), (std::vector<double>{7, 8}));
}

TEST(HDF5OutputLayer, HDF5DataReadsBackWhatItWrote) {
  const std::string dir = TempDir();
  const std::string path = dir + "/out.h5";
  auto data = MakeBlob({3, 4}, Iota(12, -2));
  auto label = MakeBlob({3}, {0, 1, 2});
  auto later = MakeBlob({3, 4}, Iota(12, 5));
  {
    auto layer = CreateLayer("type: 'HDF5Output' hdf5_output_param { file_name: '" + path + "' }");
    layer->SetUp({data.get(), label.get()}, {});
    layer->Forward({data.get(), label.get()}, {});
    layer->Forward({later.get(), label.get()}, {});  // the file holds the last batch
  }
  const std::string list = dir + "/list.txt";
  std::ofstream(list) << path << "\n";
  auto reader = CreateLayer(
      "type: 'HDF5Data' top: 'data' top: 'label' "
      "hdf5_data_param { source: '" +
      list + "' batch_size: 3 }");
  Blob out_data, out_label;
  reader->SetUp({}, {&out_data, &out_label});
  reader->Forward({}, {&out_data, &out_label});
  EXPECT_EQ(out_data.shape(), (std::vector<int>{3, 4, 1, 1}));
  EXPECT_EQ(DataOf(out_data), Iota(12, 5));
  EXPECT_EQ(DataOf(out_label), (std::vector<double>{0, 1, 2}));
}

TEST(HDF5OutputLayer, Errors) {
  auto data = MakeBlob({2, 3}, {});
  auto label = MakeBlob({3}, {});
  auto bad_dir = CreateLayer(
      "type: 'HDF5Output' hdf5_output_param { file_name: '/nonexistent_dir/x/out.h5' }");
  try {
    bad_dir->SetUp({data.get(), label.get()}, {});
    FAIL() << "expected RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent_dir/x/out.h5"), std::string::npos)
        << e.what();
  }
  auto mismatch =
      CreateLayer("type: 'HDF5Output' hdf5_output_param { file_name: '" + TempDir() + "/m.h5' }");
  EXPECT_THROW(mismatch->SetUp({data.get(), label.get()}, {}), ConfigError);
  auto no_name = CreateLayer("type: 'HDF5Output'");
  auto good_label = MakeBlob({2}, {});
  EXPECT_THROW(no_name->SetUp({data.get(), good_label.get()}, {}), ConfigError);
}

}  // namespace
}  // namespace crema::testing
