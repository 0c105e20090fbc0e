#include "io/db.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "crema/error.hpp"
#include "support/reference.hpp"

namespace crema::db {
namespace {

std::string Key(int i) {
  char buffer[16];
  std::snprintf(buffer, sizeof(buffer), "%08d", i);
  return buffer;
}

TEST(DbTest, LmdbRoundTripInKeyOrder) {
  const std::string path = testing::TempDir() + "/db";
  {
    auto db = OpenDB(Backend::kLmdb, path, Mode::kNew);
    auto txn = db->NewTransaction();
    // Written out of order; read back sorted by key.
    for (int i : {3, 0, 2}) txn->Put(Key(i), "value" + std::to_string(i));
    txn->Commit();
    txn->Put(Key(1), std::string("a\0b", 3));  // a reused transaction, binary value
    txn->Commit();
  }
  auto db = OpenDB(Backend::kLmdb, path, Mode::kRead);
  auto cursor = db->NewCursor();
  std::vector<std::string> keys, values;
  for (cursor->SeekToFirst(); cursor->valid(); cursor->Next()) {
    keys.push_back(cursor->key());
    values.push_back(cursor->value());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{Key(0), Key(1), Key(2), Key(3)}));
  EXPECT_EQ(values[1], std::string("a\0b", 3));
  EXPECT_EQ(values[3], "value3");
  // SeekToFirst restarts after the end (what the Data layer does to wrap around).
  cursor->SeekToFirst();
  ASSERT_TRUE(cursor->valid());
  EXPECT_EQ(cursor->key(), Key(0));
  EXPECT_THROW(db->NewTransaction(), RuntimeError);
}

TEST(DbTest, WriteModeAppends) {
  const std::string path = testing::TempDir() + "/db";
  {
    auto db = OpenDB(Backend::kLmdb, path, Mode::kNew);
    auto txn = db->NewTransaction();
    txn->Put("a", "1");
    txn->Commit();
  }
  {
    auto db = OpenDB(Backend::kLmdb, path, Mode::kWrite);
    auto txn = db->NewTransaction();
    txn->Put("b", "2");
    txn->Commit();
  }
  auto db = OpenDB(Backend::kLmdb, path, Mode::kRead);
  auto cursor = db->NewCursor();
  int n = 0;
  for (; cursor->valid(); cursor->Next()) ++n;
  EXPECT_EQ(n, 2);
}

TEST(DbTest, MapGrowsWhenFull) {
  // 96 records of 1 MiB exceed the initial 64 MiB map, in one commit and across commits.
  const std::string path = testing::TempDir() + "/big";
  const std::string value(1 << 20, 'x');
  {
    auto db = OpenDB(Backend::kLmdb, path, Mode::kNew);
    auto txn = db->NewTransaction();
    for (int i = 0; i < 80; ++i) txn->Put(Key(i), value);
    txn->Commit();
    for (int i = 80; i < 96; ++i) txn->Put(Key(i), value);
    txn->Commit();
  }
  auto db = OpenDB(Backend::kLmdb, path, Mode::kRead);
  auto cursor = db->NewCursor();
  int n = 0;
  for (; cursor->valid(); cursor->Next(), ++n) ASSERT_EQ(cursor->value().size(), value.size());
  EXPECT_EQ(n, 96);
}

TEST(DbTest, CursorOutlivesDb) {
  const std::string path = testing::TempDir() + "/db";
  {
    auto db = OpenDB(Backend::kLmdb, path, Mode::kNew);
    auto txn = db->NewTransaction();
    txn->Put("k", "v");
    txn->Commit();
  }
  auto db = OpenDB(Backend::kLmdb, path, Mode::kRead);
  auto cursor = db->NewCursor();
  db.reset();
  ASSERT_TRUE(cursor->valid());
  EXPECT_EQ(cursor->value(), "v");
}

TEST(DbTest, ReadsCaffesReadOnlyReferenceDb) {
  CREMA_REQUIRE_REFERENCE(path, "bvlc/fmnist_small/train_lmdb");
  auto db = OpenDB(Backend::kLmdb, path, Mode::kRead);
  auto cursor = db->NewCursor();
  int n = 0;
  for (; cursor->valid(); cursor->Next(), ++n) ASSERT_EQ(cursor->key(), Key(n));
  EXPECT_EQ(n, 1000);
}

TEST(DbTest, Errors) {
  const std::string dir = testing::TempDir();
  try {
    OpenDB(Backend::kLmdb, dir + "/missing", Mode::kRead);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/missing"), std::string::npos) << e.what();
  }
  // NEW refuses an existing folder, as Caffe.
  EXPECT_THROW(OpenDB(Backend::kLmdb, dir, Mode::kNew), RuntimeError);
  // A folder without data.mdb opened for reading: LMDB's own message.
  try {
    OpenDB(Backend::kLmdb, dir, Mode::kRead);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
  try {
    GetDB(Backend::kLevelDb);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("without LevelDB"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ParseBackend("LMDB"), Backend::kLmdb);
  EXPECT_EQ(ParseBackend("leveldb"), Backend::kLevelDb);
  EXPECT_THROW(ParseBackend("rocksdb"), ConfigError);
  EXPECT_EQ(FromProto(DataParameter::LMDB), Backend::kLmdb);
}

}  // namespace
}  // namespace crema::db
