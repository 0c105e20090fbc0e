#include "core/rng.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <mutex>
#include <sstream>

#include "crema/error.hpp"

namespace crema {
namespace {

// The global seed and a counter of engines seeded from it. Bumping the epoch makes every thread
// reseed on its next ThreadRng() call, so a persistent worker (e.g. a prefetch thread) started
// before SetRandomSeed still draws a sequence fixed by the new seed.
std::mutex g_mutex;
uint64_t g_seed = 0;
bool g_seed_chosen = false;
uint64_t g_thread_counter = 0;
std::atomic<uint64_t> g_epoch{1};

struct ThreadState {
  RngEngine engine;
  uint64_t epoch = 0;  // never matches g_epoch, so the first use seeds the engine
};
thread_local ThreadState t_state;

uint64_t EntropySeed() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) | device();
}

// seed_seq mixes all 64 bits of the seed and the stream index, so nearby seeds or counters do not
// give correlated mt19937 streams.
void SeedEngine(RngEngine* engine, uint64_t seed, uint64_t stream) {
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)};
  engine->seed(seq);
}

}  // namespace

void SetRandomSeed(int64_t seed) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_seed = seed >= 0 ? static_cast<uint64_t>(seed) : EntropySeed();
  g_seed_chosen = true;
  // Stream 0 belongs to the calling thread; other threads take 1, 2, ... in order of first use.
  g_thread_counter = 0;
  uint64_t epoch = g_epoch.fetch_add(1, std::memory_order_acq_rel) + 1;
  SeedEngine(&t_state.engine, g_seed, 0);
  t_state.epoch = epoch;
}

RngEngine& ThreadRng() {
  ThreadState& state = t_state;
  if (state.epoch != g_epoch.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_seed_chosen) {
      // Without SetRandomSeed, runs differ (as Caffe without random_seed).
      g_seed = EntropySeed();
      g_seed_chosen = true;
    }
    SeedEngine(&state.engine, g_seed, ++g_thread_counter);
    state.epoch = g_epoch.load(std::memory_order_acquire);
  }
  return state.engine;
}

uint32_t NextSeed() { return static_cast<uint32_t>(ThreadRng()()); }

std::string EngineState(const std::mt19937& engine) {
  std::ostringstream out;
  out << engine;
  return out.str();
}

void SetEngineState(const std::string& state, std::mt19937* engine) {
  std::istringstream in(state);
  std::mt19937 restored;
  in >> restored;
  if (in.fail())
    CREMA_THROW_RUNTIME("not the state of a random number generator: '", state.substr(0, 40),
                        state.size() > 40 ? "...'" : "'");
  *engine = restored;
}

namespace cpu {

// The Rng* functions stay serial: one engine, one fixed order of draws, so a seed fixes results.
template <typename T>
void RngUniform(int64_t n, T a, T b, T* r) {
  CREMA_ASSERT(n >= 0, "n = ", n);
  CREMA_ASSERT(a <= b, "uniform range [", a, ", ", b, "]");
  // As Caffe: widen the half-open distribution by one ulp so that b itself can be drawn.
  const T upper = std::nextafter(b, std::numeric_limits<T>::max());
  std::uniform_real_distribution<T> distribution(a, upper);
  RngEngine& engine = ThreadRng();
  for (int64_t i = 0; i < n; ++i) {
    // libstdc++ can round a draw up to the exclusive bound; keep results inside [a, b].
    r[i] = std::min(distribution(engine), b);
  }
}

template <typename T>
void RngGaussian(int64_t n, T mean, T sigma, T* r) {
  CREMA_ASSERT(n >= 0, "n = ", n);
  CREMA_ASSERT(sigma > 0, "gaussian sigma ", sigma);
  std::normal_distribution<T> distribution(mean, sigma);
  RngEngine& engine = ThreadRng();
  for (int64_t i = 0; i < n; ++i) r[i] = distribution(engine);
}

template <typename T>
void RngBernoulli(int64_t n, T p, int* r) {
  CREMA_ASSERT(n >= 0, "n = ", n);
  CREMA_ASSERT(p >= 0 && p <= 1, "bernoulli p ", p);
  std::bernoulli_distribution distribution(static_cast<double>(p));
  RngEngine& engine = ThreadRng();
  for (int64_t i = 0; i < n; ++i) r[i] = distribution(engine) ? 1 : 0;
}

void RngBernoulliUnsigned(int64_t n, double p, unsigned int* r) {
  CREMA_ASSERT(n >= 0, "n = ", n);
  CREMA_ASSERT(p >= 0 && p <= 1, "bernoulli p ", p);
  std::bernoulli_distribution distribution(p);
  RngEngine& engine = ThreadRng();
  for (int64_t i = 0; i < n; ++i) r[i] = distribution(engine) ? 1u : 0u;
}

template void RngUniform<float>(int64_t, float, float, float*);
template void RngUniform<double>(int64_t, double, double, double*);
template void RngGaussian<float>(int64_t, float, float, float*);
template void RngGaussian<double>(int64_t, double, double, double*);
template void RngBernoulli<float>(int64_t, float, int*);
template void RngBernoulli<double>(int64_t, double, int*);

}  // namespace cpu
}  // namespace crema
