#include "support/net_checks.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace crema::testing {

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

}  // namespace crema::testing
