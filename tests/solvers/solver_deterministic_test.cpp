// The solver's deterministic mode: the same weights, bit for bit, whatever the number of OpenMP /
// BLAS threads and data decode threads; a seed is picked (and kept) when random_seed is unset.
#include <dlfcn.h>
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cuda_context.hpp"
#include "crema/error.hpp"
#include "crema/solver.hpp"
#include "io/db.hpp"
#include "math/math.hpp"
#include "solvers/datum_db.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

constexpr int kC = 3, kH = 20, kW = 20;

std::string WriteLmdb(const std::string& name, int n) {
  return testing_db::WriteDatumDb(
      name, n, kC, kH, kW,
      [](int i, int j) { return static_cast<uint8_t>((i * 131 + j * 7) % 256); },
      [](int i) { return i % 4; });
}

// Sets the OpenMP (and so the OpenMP OpenBLAS) thread count of this process; the test binary is
// not built with OpenMP, so the runtime's function is looked up where crema loaded it.
bool SetThreads(int threads) {
  using SetFn = void (*)(int);
  auto omp = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto blas = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (omp) omp(threads);
  if (blas) blas(threads);
  return omp != nullptr || blas != nullptr;
}

// Conv (its output, 8 x 16 x 18 x 18 = 41472 values, also feeds a sum-of-squares loss: a long
// dot product) -> pooling -> inner product -> softmax loss, on randomly cropped and mirrored
// data.
std::string SolverText(const std::string& lmdb, int decode_threads) {
  return StrCat(R"(net_param { name: "det"
      layer { name: "data" type: "Data" top: "data" top: "label"
              data_param { source: ")",
                lmdb, R"(" backend: LMDB batch_size: 8 decode_threads: )", decode_threads, R"( }
              transform_param { crop_size: 20 mirror: true scale: 0.004 } }
      layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
              convolution_param { num_output: 16 kernel_size: 3
                                  weight_filler { type: "xavier" } } }
      layer { name: "sumsq" type: "Reduction" bottom: "conv" top: "sumsq" loss_weight: 0.0001
              reduction_param { operation: SUMSQ axis: 0 } }
      layer { name: "pool" type: "Pooling" bottom: "conv" top: "pool"
              pooling_param { pool: MAX kernel_size: 3 stride: 3 } }
      layer { name: "ip" type: "InnerProduct" bottom: "pool" top: "ip"
              inner_product_param { num_output: 4 weight_filler { type: "gaussian" std: 0.01 } } }
      layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss" } }
    base_lr: 0.05 momentum: 0.9 weight_decay: 0.001 lr_policy: "fixed" display: 0
    max_iter: 6 snapshot_after_train: false deterministic: true random_seed: 5)");
}

std::vector<std::vector<float>> Train(const std::string& text) {
  SolverParameter param;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  auto solver = Solver::Create(param);
  solver->Solve();
  std::vector<std::vector<float>> weights;
  for (const Blob* blob : solver->net()->learnable_params()) {
    const float* data = blob->cpu_data<float>();
    weights.emplace_back(data, data + blob->count());
  }
  return weights;
}

TEST(SolverDeterministic, SameWeightsWhateverTheThreadCount) {
  const std::string lmdb = WriteLmdb("det_lmdb", 21);
  SetThreads(1);
  const auto one = Train(SolverText(lmdb, 1));
  if (!SetThreads(4)) std::printf("no OpenMP runtime found; only decode_threads vary\n");
  const auto four = Train(SolverText(lmdb, 3));
  ASSERT_EQ(one.size(), four.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_EQ(one[i].size(), four[i].size());
    EXPECT_EQ(std::memcmp(one[i].data(), four[i].data(), one[i].size() * sizeof(float)), 0)
        << "parameter blob " << i;
  }
  // Training moved the weights (the comparison is not of untouched fillers).
  SetThreads(1);
  std::string short_run = SolverText(lmdb, 1);
  short_run.replace(short_run.find("max_iter: 6"), 11, "max_iter: 1");
  const auto after_one = Train(short_run);
  EXPECT_NE(std::memcmp(one[0].data(), after_one[0].data(), one[0].size() * sizeof(float)), 0);
}

// The deterministic mode's blocked products against a double-precision loop, for every
// transpose and shapes that leave a partial block.
TEST(SolverDeterministic, BlockedProductsMatchAReference) {
  gpu::SetDeterministic(true);
  std::mt19937 engine(3);
  std::uniform_real_distribution<float> uniform(-1, 1);
  const int m = 37, n = 600, k = 29;
  for (cpu::Trans ta : {cpu::Trans::kNo, cpu::Trans::kYes}) {
    for (cpu::Trans tb : {cpu::Trans::kNo, cpu::Trans::kYes}) {
      std::vector<float> a(m * k), b(k * n), c(m * n);
      for (float& v : a) v = uniform(engine);
      for (float& v : b) v = uniform(engine);
      for (float& v : c) v = uniform(engine);
      std::vector<float> out = c;
      cpu::Gemm<float>(ta, tb, m, n, k, 0.5f, a.data(), b.data(), 2.0f, out.data());
      for (int i = 0; i < m; ++i) {
        for (int j = 0; j < n; ++j) {
          double sum = 0;
          for (int p = 0; p < k; ++p) {
            const double av = ta == cpu::Trans::kNo ? a[i * k + p] : a[p * m + i];
            const double bv = tb == cpu::Trans::kNo ? b[p * n + j] : b[j * k + p];
            sum += av * bv;
          }
          ASSERT_NEAR(out[i * n + j], 0.5 * sum + 2.0 * c[i * n + j], 1e-4) << i << "," << j;
        }
      }
    }
  }
  const int rows = 300, cols = 520;
  std::vector<float> a(rows * cols), x(cols), xt(rows), y(rows, 1.0f), yt(cols, 1.0f);
  for (float& v : a) v = uniform(engine);
  for (float& v : x) v = uniform(engine);
  for (float& v : xt) v = uniform(engine);
  cpu::Gemv<float>(cpu::Trans::kNo, rows, cols, 2.0f, a.data(), x.data(), -1.0f, y.data());
  cpu::Gemv<float>(cpu::Trans::kYes, rows, cols, 2.0f, a.data(), xt.data(), 0.5f, yt.data());
  for (int i = 0; i < rows; ++i) {
    double sum = 0;
    for (int j = 0; j < cols; ++j) sum += static_cast<double>(a[i * cols + j]) * x[j];
    ASSERT_NEAR(y[i], 2.0 * sum - 1.0, 1e-3) << i;
  }
  for (int j = 0; j < cols; ++j) {
    double sum = 0;
    for (int i = 0; i < rows; ++i) sum += static_cast<double>(a[i * cols + j]) * xt[i];
    ASSERT_NEAR(yt[j], 2.0 * sum + 0.5, 1e-3) << j;
  }
  double dot = 0, asum = 0;
  for (int j = 0; j < cols; ++j) dot += static_cast<double>(a[j]) * x[j], asum += std::fabs(a[j]);
  EXPECT_NEAR(cpu::Dot<float>(cols, a.data(), x.data()), dot, 1e-3);
  EXPECT_NEAR(cpu::Asum<float>(cols, a.data()), asum, 1e-3);
}

TEST(SolverDeterministic, PicksAndKeepsASeedWhenUnset) {
  const std::string lmdb = WriteLmdb("det_seed_lmdb", 9);
  std::string text = SolverText(lmdb, 1);
  text.replace(text.find("random_seed: 5"), 14, "");
  SolverParameter param;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &param));
  ASSERT_FALSE(param.has_random_seed());
  auto solver = Solver::Create(param);
  EXPECT_GE(solver->param().random_seed(), 0);
  // Running again with the picked seed repeats the run.
  solver->Solve();
  SolverParameter again = param;
  again.set_random_seed(solver->param().random_seed());
  auto repeat = Solver::Create(again);
  repeat->Solve();
  const Blob* a = solver->net()->learnable_params()[0];
  const Blob* b = repeat->net()->learnable_params()[0];
  EXPECT_EQ(std::memcmp(a->cpu_data<float>(), b->cpu_data<float>(), a->count() * sizeof(float)), 0);
}

}  // namespace
}  // namespace crema
