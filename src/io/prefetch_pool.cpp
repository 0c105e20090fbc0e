#include "io/prefetch_pool.hpp"

#include <algorithm>
#include <utility>

#include "crema/error.hpp"

namespace crema {
namespace {

std::atomic<int64_t> total_waited_ns{0}, total_acquired{0};

}  // namespace

PrefetchWait TotalPrefetchWait() {
  return {static_cast<double>(total_waited_ns.load()) * 1e-6, total_acquired.load()};
}

int DecodeThreads(uint32_t requested) {
  if (requested > 0) return static_cast<int>(requested);
  const int hardware = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hardware / 2, 1, 8);
}

WorkerPool::WorkerPool(int threads) {
  CREMA_ASSERT(threads >= 1, "a pool of ", threads, " threads");
  for (int worker = 1; worker < threads; ++worker)
    helpers_.emplace_back(&WorkerPool::HelperLoop, this, worker);
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  start_.notify_all();
  for (std::thread& helper : helpers_) helper.join();
}

void WorkerPool::HelperLoop(int worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    Work(worker);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--busy_ == 0) done_.notify_all();
    }
  }
}

void WorkerPool::Work(int worker) {
  for (int item = next_.fetch_add(1); item < n_; item = next_.fetch_add(1)) {
    try {
      (*fn_)(item, worker);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex_);
      if (!error_ || item < error_item_) {
        error_ = std::current_exception();
        error_item_ = item;
      }
    }
  }
}

void WorkerPool::Run(int n, const std::function<void(int item, int worker)>& fn) {
  if (n <= 0) return;
  error_ = nullptr;
  const bool parallel = !helpers_.empty() && n > 1;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    if (parallel) {
      busy_ = static_cast<int>(helpers_.size());
      ++generation_;
    }
  }
  if (parallel) start_.notify_all();
  Work(0);
  if (parallel) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return busy_ == 0; });
  }
  fn_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

std::vector<int> GatherInOrder(WorkerPool* pool, int n, const std::function<void(int slot)>& fetch,
                               const std::function<void(int slot)>& decode,
                               const std::function<void(int slot, std::exception_ptr)>& check) {
  std::vector<int> good, round(static_cast<size_t>(n));
  for (int slot = 0; slot < n; ++slot) round[slot] = slot;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  good.reserve(static_cast<size_t>(n));
  while (!round.empty()) {
    for (int slot : round) fetch(slot);
    pool->Run(static_cast<int>(round.size()), [&](int i, int) {
      const int slot = round[i];
      errors[slot] = nullptr;
      try {
        decode(slot);
      } catch (const RuntimeError&) {
        errors[slot] = std::current_exception();
      }
    });
    std::vector<int> bad;
    for (int slot : round) {
      check(slot, errors[slot]);
      (errors[slot] ? bad : good).push_back(slot);
    }
    round = std::move(bad);
  }
  return good;
}

Prefetcher::Prefetcher(int depth, std::function<void(int slot)> load)
    : load_(std::move(load)), errors_(static_cast<size_t>(depth)) {
  CREMA_ASSERT(depth >= 1, "a prefetch depth of ", depth);
  for (int slot = 0; slot < depth; ++slot) free_.push_back(slot);
}

Prefetcher::~Prefetcher() { Stop(); }

void Prefetcher::Start() {
  CREMA_ASSERT(!thread_.joinable(), "prefetcher started twice");
  stop_ = false;
  thread_ = std::thread(&Prefetcher::Loop, this);
}

void Prefetcher::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void Prefetcher::Loop() {
  for (;;) {
    int slot = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [this] { return stop_ || !free_.empty(); });
      if (stop_) return;
      slot = free_.front();
      free_.pop_front();
    }
    std::exception_ptr error;
    try {
      load_(slot);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      errors_[slot] = error;
      full_.push_back(slot);
    }
    changed_.notify_all();
    if (error) return;  // the source's position is unknown after a failed load
  }
}

int Prefetcher::Acquire() {
  if (error_) std::rethrow_exception(error_);
  int slot = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (full_.empty()) {
      const auto start = std::chrono::steady_clock::now();
      changed_.wait(lock, [this] { return !full_.empty(); });
      const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::steady_clock::now() - start)
                             .count();
      waited_ns_ += ns;
      total_waited_ns += ns;
    }
    ++acquired_;
    ++total_acquired;
    slot = full_.front();
    full_.pop_front();
    error_ = errors_[slot];
  }
  if (error_) std::rethrow_exception(error_);
  return slot;
}

PrefetchWait Prefetcher::wait() const {
  return {static_cast<double>(waited_ns_.load()) * 1e-6, acquired_.load()};
}

int Prefetcher::ready() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<int>(full_.size());
}

void Prefetcher::Release(int slot) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(slot);
  }
  changed_.notify_all();
}

}  // namespace crema
