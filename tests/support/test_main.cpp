// The shared main of every test executable: quiet logging, a fixed seed.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include "core/rng.hpp"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // warnings and errors only
  google::InitGoogleLogging(argv[0]);
  crema::SetRandomSeed(1701);
  return RUN_ALL_TESTS();
}
