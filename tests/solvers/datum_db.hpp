#pragma once
// A DB of synthetic Datum records for the solver tests that read data (header-only: each
// *_test.cpp is its own executable).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>

#include "crema/proto.hpp"
#include "io/db.hpp"
#include "support/reference.hpp"

namespace crema::testing_db {

// testing::TempDir()/name holding `n` raw channels x height x width records written with io/db
// (keys %08d): byte j of record i is pixel(i, j) (j in C x H x W order), its label label(i).
// Returns the path.
inline std::string WriteDatumDb(const std::string& name, int n, int channels, int height, int width,
                                const std::function<uint8_t(int, int)>& pixel,
                                const std::function<int(int)>& label,
                                db::Backend backend = db::Backend::kLmdb) {
  const std::string path = testing::TempDir() + "/" + name;
  std::filesystem::remove_all(path);
  auto db = db::OpenDB(backend, path, db::Mode::kNew);
  auto txn = db->NewTransaction();
  for (int i = 0; i < n; ++i) {
    Datum datum;
    datum.set_channels(channels);
    datum.set_height(height);
    datum.set_width(width);
    datum.set_label(label(i));
    std::string pixels;
    for (int j = 0; j < channels * height * width; ++j) pixels += static_cast<char>(pixel(i, j));
    datum.set_data(pixels);
    char key[16];
    std::snprintf(key, sizeof(key), "%08d", i);
    txn->Put(key, datum.SerializeAsString());
  }
  txn->Commit();
  return path;
}

}  // namespace crema::testing_db
