#include "core/rng.hpp"

#include <atomic>
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

}  // namespace crema
