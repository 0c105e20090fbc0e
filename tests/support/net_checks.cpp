#include "support/net_checks.hpp"

#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cstring>

#include "support/gradient_checker.hpp"

namespace crema::testing {

NetParameter ParseNet(const std::string& text) {
  NetParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  return param;
}

std::vector<std::string> LayerMapNames(const Net& net, const std::vector<int>& into,
                                       const char* sep) {
  std::vector<std::string> names;
  for (int l = 0; l < net.num_layers(); ++l)
    if (into[l] >= 0) names.push_back(net.layer_names()[l] + sep + net.layer_names()[into[l]]);
  return names;
}

bool SameBits(const Blob& a, const Blob& b, bool diff) {
  if (a.shape() != b.shape()) return false;
  const float* x = diff ? a.cpu_diff<float>() : a.cpu_data<float>();
  const float* y = diff ? b.cpu_diff<float>() : b.cpu_data<float>();
  return std::memcmp(x, y, sizeof(float) * a.count()) == 0;
}

void ExpectSameBlobs(const Net& a, const Net& b, bool diffs, bool param_data,
                     const std::string& what) {
  ASSERT_EQ(a.blob_names(), b.blob_names());
  for (size_t i = 0; i < a.blobs().size(); ++i) {
    EXPECT_TRUE(SameBits(*a.blobs()[i], *b.blobs()[i], false))
        << what << ": data of blob " << a.blob_names()[i];
    if (diffs) {
      EXPECT_TRUE(SameBits(*a.blobs()[i], *b.blobs()[i], true))
          << what << ": diff of blob " << a.blob_names()[i];
    }
  }
  ASSERT_EQ(a.learnable_params().size(), b.learnable_params().size());
  for (size_t p = 0; p < a.learnable_params().size(); ++p) {
    if (param_data) {
      EXPECT_TRUE(SameBits(*a.learnable_params()[p], *b.learnable_params()[p], false))
          << what << ": parameter " << p;
    }
    if (diffs) {
      EXPECT_TRUE(SameBits(*a.learnable_params()[p], *b.learnable_params()[p], true))
          << what << ": gradient of parameter " << p;
    }
  }
}

void SetBatch(Net* net, int batch) {
  for (Blob* input : net->input_blobs()) {
    std::vector<int> shape = input->shape();
    shape[0] = batch;
    input->Reshape(shape);
  }
  net->Reshape();
}

void ExpectSameOutputs(Net* plain, Net* other, int batch, uint32_t seed) {
  RandomInferenceWeights(plain, seed);
  other->ShareTrainedLayersWith(*plain);
  for (Net* net : {plain, other}) SetBatch(net, batch);
  for (uint32_t pass = 0; pass < 2; ++pass) {
    for (Net* net : {plain, other}) {
      FillUniform(net->input_blobs()[0], -1, 1, seed + 31 + pass);
      net->Forward();
    }
    for (size_t i = 0; i < other->output_blobs().size(); ++i)
      EXPECT_TRUE(SameBits(*plain->output_blobs()[i], *other->output_blobs()[i], false))
          << "output " << i << ", pass " << pass;
  }
}

void RandomInferenceWeights(Net* net, uint32_t seed) {
  for (size_t j = 0; j < net->learnable_params().size(); ++j)
    FillUniform(net->learnable_params()[j], -0.5, 0.5, seed + static_cast<uint32_t>(j));
  for (const auto& layer : net->layers())
    if (std::string(layer->type()) == "BatchNorm") {
      FillUniform(layer->blobs()[1].get(), 0.5, 2.0, seed - 1);  // variances
      layer->blobs()[2]->mutable_cpu_data<float>()[0] = 1.0f;    // moving-average factor
    }
}

}  // namespace crema::testing
