#include "io/prefetch_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "crema/error.hpp"

namespace crema {
namespace {

TEST(PrefetchPoolTest, DecodeThreads) {
  EXPECT_EQ(DecodeThreads(3), 3);
  EXPECT_EQ(DecodeThreads(1), 1);
  const int automatic = DecodeThreads(0);
  EXPECT_GE(automatic, 1);
  EXPECT_LE(automatic, 8);
}

TEST(PrefetchPoolTest, RunsEveryItemOnce) {
  for (int threads : {1, 2, 4}) {
    WorkerPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    // Many small jobs in a row: the pool is reused, and no job sees another's items.
    for (int n : {0, 1, 2, 7, 100, 3, 1000}) {
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      std::atomic<bool> bad_worker{false};
      pool.Run(n, [&](int item, int worker) {
        if (worker < 0 || worker >= threads) bad_worker = true;
        runs[item].fetch_add(1);
      });
      EXPECT_FALSE(bad_worker);
      for (int i = 0; i < n; ++i) ASSERT_EQ(runs[i].load(), 1) << threads << " " << n << " " << i;
    }
  }
}

TEST(PrefetchPoolTest, RethrowsTheLowestItemsErrorAfterRunningAll) {
  for (int threads : {1, 2, 4}) {
    WorkerPool pool(threads);
    for (int round = 0; round < 20; ++round) {
      std::vector<std::atomic<int>> runs(50);
      try {
        pool.Run(50, [&](int item, int) {
          runs[item].fetch_add(1);
          if (item % 7 == 3) throw std::runtime_error("item " + std::to_string(item));
        });
        FAIL() << "no error";
      } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "item 3");
      }
      for (int i = 0; i < 50; ++i) ASSERT_EQ(runs[i].load(), 1);
    }
    // The pool still works after an error.
    std::atomic<int> sum{0};
    pool.Run(10, [&](int item, int) { sum += item; });
    EXPECT_EQ(sum.load(), 45);
  }
}

// A source of elements 0, 1, 2, ...; those divisible by 4 or equal to 5 are bad.
struct Source {
  int next = 0;
  std::vector<int> slots;
  std::vector<int> decoded;
  std::vector<int> bad_seen, checked;
  explicit Source(int n) : slots(static_cast<size_t>(n)), decoded(static_cast<size_t>(n)) {}
  static bool Bad(int value) { return value % 4 == 0 || value == 5; }
};

std::vector<int> Gather(WorkerPool* pool, Source* source, int n) {
  const std::vector<int> order = GatherInOrder(
      pool, n, [&](int slot) { source->slots[slot] = source->next++; },
      [&](int slot) {
        const int value = source->slots[slot];
        if (Source::Bad(value)) CREMA_THROW_RUNTIME("element ", value, " is bad");
        source->decoded[slot] = value * 10;
      },
      [&](int slot, const std::exception_ptr& error) {
        source->checked.push_back(source->slots[slot]);
        if (error) source->bad_seen.push_back(source->slots[slot]);
      });
  std::vector<int> values;
  for (int slot : order) values.push_back(source->decoded[slot]);
  return values;
}

TEST(PrefetchPoolTest, GatherInOrderSkipsBadElementsInSourceOrder) {
  // Independently: the good elements of 0, 1, 2, ... in order, times 10.
  std::vector<int> expected;
  for (int v = 0; expected.size() < 4 * 6; ++v)
    if (!Source::Bad(v)) expected.push_back(v * 10);
  for (int threads : {1, 2, 4}) {
    WorkerPool pool(threads);
    Source source(6);
    std::vector<int> got;
    for (int batch = 0; batch < 4; ++batch) {
      const std::vector<int> values = Gather(&pool, &source, 6);
      ASSERT_EQ(values.size(), 6u);
      got.insert(got.end(), values.begin(), values.end());
    }
    EXPECT_EQ(got, expected) << threads << " threads";
    // Every bad element met, once, in source order.
    std::vector<int> bad;
    for (int v = 0; v < source.next; ++v)
      if (Source::Bad(v)) bad.push_back(v);
    EXPECT_EQ(source.bad_seen, bad);
    // And every element checked, once, in source order.
    ASSERT_EQ(static_cast<int>(source.checked.size()), source.next);
    for (int v = 0; v < source.next; ++v) ASSERT_EQ(source.checked[v], v);
  }
}

TEST(PrefetchPoolTest, GatherInOrderStopsWhenTheCheckThrows) {
  WorkerPool pool(3);
  int next = 0;
  try {
    GatherInOrder(
        &pool, 8, [&](int) { ++next; },
        [&](int slot) {
          if (slot == 2 || slot == 6) CREMA_THROW_RUNTIME("slot ", slot);
        },
        [&](int, const std::exception_ptr& error) {
          if (error) std::rethrow_exception(error);
        });
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_STREQ(e.what(), "slot 2");  // the first bad one in source order
  }
  // Errors other than RuntimeError are not bad records: they propagate as they are.
  EXPECT_THROW(GatherInOrder(
                   &pool, 4, [](int) {}, [](int) { throw std::logic_error("bug"); },
                   [](int, const std::exception_ptr&) {}),
               std::logic_error);
}

TEST(PrefetchPoolTest, PrefetcherHandsOutSlotsInLoadOrder) {
  for (int depth : {1, 2, 4}) {
    std::vector<int> contents(static_cast<size_t>(depth), -1);
    int loads = 0;  // touched by the background thread only
    Prefetcher prefetcher(depth, [&](int slot) { contents[slot] = loads++; });
    prefetcher.Start();
    for (int i = 0; i < 50; ++i) {
      const int slot = prefetcher.Acquire();
      ASSERT_GE(slot, 0);
      ASSERT_LT(slot, depth);
      ASSERT_EQ(contents[slot], i);
      prefetcher.Release(slot);
    }
  }
}

TEST(PrefetchPoolTest, PrefetcherRethrowsTheLoadError) {
  std::vector<int> contents(2, -1);
  int loads = 0;
  Prefetcher prefetcher(2, [&](int slot) {
    if (loads == 3) CREMA_THROW_RUNTIME("load 3 failed");
    contents[slot] = loads++;
  });
  prefetcher.Start();
  for (int i = 0; i < 3; ++i) {
    const int slot = prefetcher.Acquire();
    EXPECT_EQ(contents[slot], i);
    prefetcher.Release(slot);
  }
  for (int i = 0; i < 3; ++i) {
    try {
      prefetcher.Acquire();
      FAIL() << "no error";
    } catch (const RuntimeError& e) {
      EXPECT_STREQ(e.what(), "load 3 failed");
    }
  }
}

TEST(PrefetchPoolTest, PrefetcherStopsWhileSlotsAreFull) {
  // Destroyed with every slot full and the consumer gone: the thread must not hang.
  Prefetcher prefetcher(3, [](int) {});
  prefetcher.Start();
  EXPECT_GE(prefetcher.Acquire(), 0);
}

TEST(PrefetchPoolTest, PrefetcherCountsBatchesAndWaitsOnlyForEmptyQueues) {
  // Each Acquire below finds its slot loaded already, so no waiting may be counted.
  Prefetcher prefetcher(2, [](int) {});
  const PrefetchWait total_before = TotalPrefetchWait();
  prefetcher.Start();
  for (int i = 0; i < 5; ++i) {
    while (prefetcher.ready() == 0) std::this_thread::yield();
    prefetcher.Release(prefetcher.Acquire());
  }
  EXPECT_EQ(prefetcher.wait().batches, 5);
  EXPECT_EQ(prefetcher.wait().ms, 0.0);
  // Waits for a slow load are counted, and the process total follows every prefetcher. The load
  // finishes 100 ms after the consumer starts waiting for it, so at least about that much is
  // counted, and no more than the consumer really spent in Acquire.
  std::atomic<bool> acquiring{false}, open{false};
  Prefetcher slow(1, [&](int) {
    while (!open) std::this_thread::yield();
  });
  slow.Start();
  std::thread opener([&] {
    while (!acquiring) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    open = true;
  });
  acquiring = true;
  const auto before = std::chrono::steady_clock::now();
  slow.Release(slow.Acquire());
  const double spent_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - before).count();
  opener.join();
  EXPECT_EQ(slow.wait().batches, 1);
  EXPECT_GE(slow.wait().ms, 50.0);
  EXPECT_LE(slow.wait().ms, spent_ms + 1e-3);
  const PrefetchWait total_after = TotalPrefetchWait();
  EXPECT_EQ(total_after.batches - total_before.batches, 6);
  EXPECT_NEAR(total_after.ms - total_before.ms, slow.wait().ms, 1e-6);
}

}  // namespace
}  // namespace crema
