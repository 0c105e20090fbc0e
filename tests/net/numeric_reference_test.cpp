// Forward and backward of whole nets against BVLC Caffe's dumps (../shared/reference/bvlc/numeric):
// every layer's tops after it ran, every bottom diff after its backward, and the input and
// param diffs, each within 1e-4 relative (||a - b|| / ||b||). Nets using a layer type crema does
// not register yet are skipped with a note.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <map>

#include "core/rng.hpp"
#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "io/json.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

double RelativeError(const Blob& blob, bool diff, const std::vector<float>& expected) {
  if (blob.count() != static_cast<int64_t>(expected.size())) {
    ADD_FAILURE() << "blob has " << blob.count() << " values (shape " << blob.shape_string()
                  << "), the reference " << expected.size();
    return 1e30;
  }
  double num = 0, den = 0;
  for (int64_t i = 0; i < blob.count(); ++i) {
    const double a = diff ? blob.diff_at(i) : blob.data_at(i);
    num += (a - expected[i]) * (a - expected[i]);
    den += static_cast<double>(expected[i]) * expected[i];
  }
  // All-zero references (e.g. Caffe's documented zero diffs) are compared absolutely.
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

void Fill(Blob* blob, bool diff, const std::vector<float>& values) {
  ASSERT_EQ(blob->count(), static_cast<int64_t>(values.size()));
  float* dst = diff ? blob->mutable_cpu_diff<float>() : blob->mutable_cpu_data<float>();
  std::memcpy(dst, values.data(), values.size() * sizeof(float));
}

class NumericReferenceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(NumericReferenceTest, MatchesCaffe) {
  const std::string name = GetParam();
  CREMA_REQUIRE_REFERENCE(dir, "bvlc/numeric/" + name);
  const Json manifest = ParseJson(testing::ReadFile(dir + "/manifest.json"));
  NetParameter param;
  ReadNetParamsFromTextFile(dir + "/" + manifest["prototxt_used"].string, &param);
  for (const LayerParameter& layer : param.layer())
    if (!LayerRegistry::Has(layer.type()))
      GTEST_SKIP() << name << " uses layer type " << layer.type() << ", not registered yet";

  // Relative paths inside the nets are relative to bvlc/.
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir((dir + "/../..").c_str()), 0);
  SetRandomSeed(1701);
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(TEST);
  options.verbose = false;
  std::unique_ptr<Net> net;
  ASSERT_NO_THROW(net = std::make_unique<Net>(param, options));
  net->CopyTrainedLayersFrom(dir + "/" + manifest["caffemodel"].string);
  ASSERT_EQ(chdir(cwd), 0);

  std::multimap<int, const Json*> forward, backward;
  for (const Json& e : manifest["entries"].array) {
    const std::string& kind = e["kind"].string;
    if (e["file"].string.empty()) continue;  // Caffe's dumps omit some blobs (split outputs)
    if (kind == "input") {
      Fill(net->blob_by_name(e["blob"].string).get(), false,
           testing::ReadF32(dir + "/" + e["file"].string));
    } else if (kind == "forward_top") {
      forward.emplace(static_cast<int>(e["layer_index"].number), &e);
    } else if (kind == "backward_bottom_diff") {
      backward.emplace(static_cast<int>(e["layer_index"].number), &e);
    }
  }
  for (int i = 0; i < net->num_layers(); ++i) {
    ASSERT_EQ(net->layer_names()[i], manifest["layers"][i]["name"].string) << "layer " << i;
    net->ForwardFromTo(i, i);
    auto range = forward.equal_range(i);
    for (auto it = range.first; it != range.second; ++it) {
      const Json& e = *it->second;
      const Blob& top = *net->top_vecs()[i][static_cast<int>(e["top_index"].number)];
      EXPECT_LE(RelativeError(top, false, testing::ReadF32(dir + "/" + e["file"].string)), 1e-4)
          << name << ": " << e["file"].string;
    }
  }
  net->ClearParamDiffs();
  for (const Json& e : manifest["entries"].array)
    if (e["kind"].string == "backward_seed_top_diff")
      Fill(net->blob_by_name(e["blob"].string).get(), true,
           testing::ReadF32(dir + "/" + e["file"].string));
  for (int i = net->num_layers() - 1; i >= 0; --i) {
    net->BackwardFromTo(i, i);
    auto range = backward.equal_range(i);
    for (auto it = range.first; it != range.second; ++it) {
      const Json& e = *it->second;
      const Blob& bottom = *net->bottom_vecs()[i][static_cast<int>(e["bottom_index"].number)];
      const std::vector<float> expected = testing::ReadF32(dir + "/" + e["file"].string);
      double error = RelativeError(bottom, true, expected);
      if (error > 1e-4) {
        // A bottom diff that cancels to rounding noise (e.g. MVN fed a gradient proportional to
        // its output) is compared to the size of the gradient that came in instead.
        double expected_norm = 0, top_norm = 0;
        for (float v : expected) expected_norm += static_cast<double>(v) * v;
        for (const Blob* top : net->top_vecs()[i]) top_norm += top->sumsq_diff();
        if (top_norm > 0) error *= std::sqrt(expected_norm / top_norm);
      }
      EXPECT_LE(error, 1e-4) << name << ": " << e["file"].string;
    }
  }
  for (const Json& e : manifest["entries"].array) {
    const std::string& kind = e["kind"].string;
    if (e["file"].string.empty()) continue;
    if (kind == "input_diff") {
      EXPECT_LE(RelativeError(*net->blob_by_name(e["blob"].string), true,
                              testing::ReadF32(dir + "/" + e["file"].string)),
                1e-4)
          << name << ": " << e["file"].string;
    } else if (kind == "param_diff") {
      const int layer = static_cast<int>(e["layer_index"].number);
      const Blob& blob = *net->layers()[layer]->blobs()[static_cast<int>(e["param_index"].number)];
      EXPECT_LE(RelativeError(blob, true, testing::ReadF32(dir + "/" + e["file"].string)), 1e-4)
          << name << ": " << e["file"].string;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Nets, NumericReferenceTest,
                         ::testing::Values("lenet", "cifar10_quick", "layer_zoo", "layer_zoo_aux"));

}  // namespace
}  // namespace crema
