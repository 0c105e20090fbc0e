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
  if (!HasLevelDb()) {
    try {
      GetDB(Backend::kLevelDb);
      FAIL() << "no error";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find("without LevelDB"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(ParseBackend("LMDB"), Backend::kLmdb);
  EXPECT_EQ(ParseBackend("leveldb"), Backend::kLevelDb);
  EXPECT_THROW(ParseBackend("rocksdb"), ConfigError);
  EXPECT_EQ(FromProto(DataParameter::LMDB), Backend::kLmdb);
}

// The same contract for every backend this build has.
class BackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kLevelDb && !HasLevelDb()) GTEST_SKIP() << "built without LevelDB";
  }
};

TEST_P(BackendTest, WriteReadBackInKeyOrder) {
  const std::string path = testing::TempDir() + "/db";
  {
    auto db = OpenDB(GetParam(), path, Mode::kNew);
    EXPECT_EQ(db->path(), path);
    auto txn = db->NewTransaction();
    for (int i : {7, 0, 12, 3}) txn->Put(Key(i), "value" + std::to_string(i));
    txn->Commit();
    txn->Put(Key(5), std::string("x\0y", 3));  // a reused transaction, binary value
    txn->Commit();
    txn->Commit();  // an empty commit is harmless
  }
  {
    auto db = OpenDB(GetParam(), path, Mode::kWrite);  // appends
    auto txn = db->NewTransaction();
    txn->Put(Key(1), "value1");
    txn->Commit();
  }
  auto db = OpenDB(GetParam(), path, Mode::kRead);
  auto cursor = db->NewCursor();
  std::vector<std::string> keys, values;
  for (cursor->SeekToFirst(); cursor->valid(); cursor->Next()) {
    keys.push_back(cursor->key());
    values.push_back(cursor->value());
  }
  EXPECT_EQ(keys, (std::vector<std::string>{Key(0), Key(1), Key(3), Key(5), Key(7), Key(12)}));
  EXPECT_EQ(values, (std::vector<std::string>{"value0", "value1", "value3", std::string("x\0y", 3),
                                              "value7", "value12"}));
  cursor->SeekToFirst();
  ASSERT_TRUE(cursor->valid());
  EXPECT_EQ(cursor->key(), Key(0));
  EXPECT_THROW(db->NewTransaction(), RuntimeError);
  // The cursor keeps the DB alive.
  db.reset();
  cursor->Next();
  ASSERT_TRUE(cursor->valid());
  EXPECT_EQ(cursor->value(), "value1");
}

TEST_P(BackendTest, ManyRecordsAcrossCommits) {
  const std::string path = testing::TempDir() + "/db";
  {
    auto db = OpenDB(GetParam(), path, Mode::kNew);
    auto txn = db->NewTransaction();
    for (int i = 0; i < 2500; ++i) {
      txn->Put(Key(i), std::string(100 + i % 50, static_cast<char>('a' + i % 26)));
      if (i % 1000 == 999) txn->Commit();
    }
    txn->Commit();
  }
  auto db = OpenDB(GetParam(), path, Mode::kRead);
  int n = 0;
  for (auto cursor = db->NewCursor(); cursor->valid(); cursor->Next(), ++n) {
    ASSERT_EQ(cursor->key(), Key(n));
    ASSERT_EQ(cursor->value(), std::string(100 + n % 50, static_cast<char>('a' + n % 26)));
  }
  EXPECT_EQ(n, 2500);
}

TEST_P(BackendTest, MissingOrExistingPathErrors) {
  const std::string dir = testing::TempDir();
  for (Mode mode : {Mode::kRead, Mode::kWrite}) {
    try {
      OpenDB(GetParam(), dir + "/missing", mode);
      FAIL() << "no error";
    } catch (const RuntimeError& e) {
      EXPECT_NE(std::string(e.what()).find(dir + "/missing"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(
                    BackendName(GetParam()) == std::string("lmdb") ? "LMDB" : "LevelDB"),
                std::string::npos)
          << e.what();
    }
  }
  // NEW refuses an existing folder, as Caffe.
  try {
    OpenDB(GetParam(), dir, Mode::kNew);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  // An empty folder is no DB.
  try {
    OpenDB(GetParam(), dir, Mode::kRead);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(dir), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest,
                         ::testing::Values(Backend::kLmdb, Backend::kLevelDb),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return std::string(BackendName(info.param));
                         });

TEST(DbTest, LevelDbReadersOfOnePathShareTheDb) {
  if (!HasLevelDb()) GTEST_SKIP() << "built without LevelDB";
  const std::string path = testing::TempDir() + "/db";
  {
    auto db = OpenDB(Backend::kLevelDb, path, Mode::kNew);
    auto txn = db->NewTransaction();
    txn->Put("a", "1");
    txn->Put("b", "2");
    txn->Commit();
  }
  // Two readers (a TRAIN and a TEST Data layer on one source), despite LevelDB's lock.
  auto first = OpenDB(Backend::kLevelDb, path, Mode::kRead);
  auto second = OpenDB(Backend::kLevelDb, path, Mode::kRead);
  auto c1 = first->NewCursor();
  auto c2 = second->NewCursor();
  c1->Next();
  EXPECT_EQ(c1->key(), "b");
  EXPECT_EQ(c2->key(), "a");
  // While it is open for reading, a writer is refused with LevelDB's lock error.
  try {
    OpenDB(Backend::kLevelDb, path, Mode::kWrite);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  first.reset();
  second.reset();
  c1.reset();
  c2.reset();
  OpenDB(Backend::kLevelDb, path, Mode::kWrite);  // all closed: the lock is free again
}

TEST(DbTest, LevelDbAndLmdbAreNotMixedUp) {
  if (!HasLevelDb()) GTEST_SKIP() << "built without LevelDB";
  const std::string dir = testing::TempDir();
  OpenDB(Backend::kLmdb, dir + "/lmdb", Mode::kNew)->NewTransaction()->Commit();
  // An LMDB opened as a LevelDB: LevelDB's own message, naming the path.
  try {
    OpenDB(Backend::kLevelDb, dir + "/lmdb", Mode::kRead);
    FAIL() << "no error";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/lmdb"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace crema::db
