// The shared main of every test executable: quiet logging, a fixed seed, crema's CPU kernels.
#include <glog/logging.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/rng.hpp"

int main(int argc, char** argv) {
  // crema's own CPU kernels (bit-reproducible) unless the run asks for oneDNN; crema processes
  // that tests start inherit this. Tests of the oneDNN engine set the policy themselves.
  setenv("CREMA_CPU_ENGINE", "caffe", /*overwrite=*/0);
  // Tests that race the engines keep their choices to themselves, never in the user's cache.
  setenv("CREMA_CPU_ENGINE_CACHE", "off", /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // warnings and errors only
  google::InitGoogleLogging(argv[0]);
  crema::SetRandomSeed(1701);
  return RUN_ALL_TESTS();
}
