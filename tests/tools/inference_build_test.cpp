// The inference-only build (scripts/build_inference.sh, in build-inference/ beside build/): its
// library and programs link no LMDB, LevelDB or HDF5, a Data layer gets the inference-only
// error, and examples/inference's crema-classify prints the classes crema's own forward ranks
// first. Skipped when build-inference/ has not been built.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "tools/onnx_test_util.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using onnx_test::RunCommand;

fs::path InferenceBuild() { return fs::path(CREMA_SOURCE_DIR) / "build-inference"; }

#define CREMA_REQUIRE_INFERENCE_BUILD()                                    \
  if (!fs::exists(InferenceBuild() / "crema-infer") ||                     \
      !fs::exists(InferenceBuild() / "examples/inference/crema-classify")) \
  GTEST_SKIP() << InferenceBuild().string() << " is not built (scripts/build_inference.sh)"

TEST(InferenceBuildTest, LinksNoDataSourceLibraries) {
  CREMA_REQUIRE_INFERENCE_BUILD();
  for (const char* file :
       {"libcrema_infer.so", "crema-infer", "examples/inference/crema-classify"}) {
    std::string output;
    ASSERT_EQ(RunCommand("ldd " + (InferenceBuild() / file).string(), &output), 0) << output;
    EXPECT_NE(output.find("libprotobuf"), std::string::npos) << output;  // ldd did list
    for (const char* library : {"liblmdb", "libleveldb", "libhdf5", "libcurl"})
      EXPECT_EQ(output.find(library), std::string::npos) << file << " links " << library;
  }
}

TEST(InferenceBuildTest, DataLayerIsNamedAsLeftOut) {
  CREMA_REQUIRE_INFERENCE_BUILD();
  const std::string net = ::testing::TempDir() + "/data_net.prototxt";
  std::ofstream(net) << "layer { name: 'd' type: 'Data' top: 'x' data_param { source: 'x' "
                        "batch_size: 1 } }\n";
  std::string output;
  EXPECT_EQ(
      RunCommand((InferenceBuild() / "crema-infer").string() + " inspect --model " + net, &output),
      2);
  EXPECT_NE(output.find("layer type Data is not in this inference-only build"), std::string::npos)
      << output;
}

// LeNet with its fillers' random weights on a random input: the example's top 3 (raw float32
// input) must be the classes and scores of this process's forward.
TEST(InferenceBuildTest, ClassifyExampleMatchesForward) {
  CREMA_REQUIRE_INFERENCE_BUILD();
  const std::string dir = ::testing::TempDir();
  const std::string deploy = std::string(CREMA_SOURCE_DIR) + "/models/lenet/lenet.prototxt";
  NetParameter param;
  ReadNetParamsFromTextFile(deploy, &param);
  param.mutable_layer(0)->mutable_input_param()->mutable_shape(0)->set_dim(0, 1);
  NetOptions options;
  options.verbose = false;
  Net net(param, options);
  NetParameter weights;
  net.ToProto(&weights);
  WriteBinaryProto(weights, dir + "/lenet.caffemodel");
  Blob& input = *net.input_blobs()[0];
  float* data = input.mutable_cpu_data<float>();
  for (int64_t i = 0; i < input.count(); ++i) data[i] = static_cast<float>((i * 37) % 101) / 50.f;
  std::ofstream(dir + "/input.raw", std::ios::binary)
      .write(reinterpret_cast<const char*>(data), input.count() * sizeof(float));
  net.Forward();
  const float* prob = net.output_blobs()[0]->cpu_data<float>();
  std::vector<int> order(10);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return prob[a] > prob[b]; });

  std::ofstream labels(dir + "/labels.txt");
  for (int c = 0; c < 10; ++c) labels << "digit " << c << "\n";
  labels.close();

  std::string output;
  const std::string classify = (InferenceBuild() / "examples/inference/crema-classify").string();
  ASSERT_EQ(RunCommand(classify + " " + deploy + " " + dir + "/lenet.caffemodel " + dir +
                           "/input.raw " + dir + "/labels.txt 3",
                       &output),
            0)
      << output;
  // Result lines: "SCORE CLASS LABEL" (stderr's glog lines, merged in, start otherwise).
  std::istringstream lines(output);
  int i = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0]))) continue;
    ASSERT_LT(i, 3) << output;
    std::istringstream fields(line);
    float score = 0;
    int label = -1;
    std::string name, number;
    fields >> score >> label >> name >> number;
    EXPECT_EQ(label, order[i]) << output;
    EXPECT_EQ(name + " " + number, "digit " + std::to_string(order[i])) << output;
    EXPECT_NEAR(score, prob[order[i]], 1e-5) << output;
    ++i;
  }
  EXPECT_EQ(i, 3) << output;
  // A TOP_K that is not a whole number >= 1 is a usage error (exit 2), never a crash.
  for (const char* bad : {"-3", "x", "2.5", "99999999999"}) {
    EXPECT_EQ(RunCommand(classify + " " + deploy + " " + dir + "/lenet.caffemodel " + dir +
                             "/input.raw " + dir + "/labels.txt " + bad,
                         &output),
              2)
        << bad << ": " << output;
    EXPECT_NE(output.find("TOP_K"), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace crema
