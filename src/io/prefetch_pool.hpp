#pragma once
// Threads for data loading, shared by the data layers (Data now; ImageData, WindowData can use
// the same pieces).
//
// WorkerPool: a fixed set of threads; Run(n, fn) calls fn(item, worker) for every item in [0, n)
// and returns when all are done. The calling thread takes part as worker 0, so a pool of 1 thread
// starts no thread. Items are handed out dynamically, so which thread runs which item depends on
// timing: for results not to depend on it, fn writes only to state owned by its item (or to
// scratch indexed by `worker`). Every item runs even when some throw; then the exception of the
// lowest item is rethrown, so the error reported does not depend on timing either. Run is for
// one caller at a time.
//
// GatherInOrder: fills a batch of n good items from a sequential source, skipping bad ones.
// fetch(slot) takes the next element of the source into `slot` (on the calling thread, in source
// order); decode(slot) parses and decodes it on the pool and throws RuntimeError for a bad
// element; check(slot, error) is then called on the calling thread for every element in source
// order, with the RuntimeError of a bad one (null for a good one): for a bad one it rethrows to
// stop, or returns to skip it (the next element is fetched in its place).
// The result lists the slots of the n good items in source order: the batch a single thread
// would assemble, whatever the number of threads.
//
// Prefetcher: one background thread that keeps `depth` slots filled ahead of the consumer.
// load(slot) fills a slot; it runs on the background thread, one slot at a time, in the order
// the consumer gets them. Acquire() waits for the next filled slot; Release(slot) hands it back
// to be refilled. An exception thrown by load stops the background thread and is rethrown by
// that slot's Acquire and by every later one. The time Acquire spends waiting for a slot to be
// filled is counted (per prefetcher, and summed over all of the process's prefetchers for tools
// like `crema time` and `crema train` to report: a consumer that never waits is not slowed by
// its data).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace crema {

// The number of decode threads for a requested count: `requested` when > 0, else (0 = auto) half
// the hardware threads, between 1 and 8, leaving the rest to the net.
int DecodeThreads(uint32_t requested);

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int size() const { return static_cast<int>(helpers_.size()) + 1; }
  void Run(int n, const std::function<void(int item, int worker)>& fn);

 private:
  void HelperLoop(int worker);
  void Work(int worker);

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable start_, done_;
  const std::function<void(int, int)>* fn_ = nullptr;
  int n_ = 0;
  std::atomic<int> next_{0};
  uint64_t generation_ = 0;
  int busy_ = 0;  // helpers still working on the current job
  bool stop_ = false;
  std::mutex error_mutex_;
  int error_item_ = 0;
  std::exception_ptr error_;
};

// The time Acquire calls waited for a filled slot, and how many calls there were.
struct PrefetchWait {
  double ms = 0;
  int64_t batches = 0;
};
// Summed over every Prefetcher of the process, since it started.
PrefetchWait TotalPrefetchWait();

std::vector<int> GatherInOrder(WorkerPool* pool, int n, const std::function<void(int slot)>& fetch,
                               const std::function<void(int slot)>& decode,
                               const std::function<void(int slot, std::exception_ptr)>& check);

class Prefetcher {
 public:
  Prefetcher(int depth, std::function<void(int slot)> load);
  // Stops the background thread (after the load in progress).
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  void Start();
  void Stop();
  int Acquire();
  void Release(int slot);
  // Waiting by Acquire so far, and the slots filled and not yet acquired (thread-safe).
  PrefetchWait wait() const;
  int ready() const;

 private:
  void Loop();

  std::function<void(int)> load_;
  std::deque<int> free_, full_;
  std::vector<std::exception_ptr> errors_;  // per slot
  std::exception_ptr error_;                // the first error, rethrown by every later Acquire
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<int64_t> waited_ns_{0}, acquired_{0};
};

}  // namespace crema
