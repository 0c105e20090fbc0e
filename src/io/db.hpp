#pragma once
// Key-value databases of records (Caffe's Datum DBs), as Caffe's db.hpp: a DB opened READ
// (existing, read-only), WRITE (existing, appended to) or NEW (created; the folder must not
// exist), cursors that walk the records in key order, and transactions that buffer Puts until
// Commit. LMDB is built in; LevelDB is not (yet): asking for it is a RuntimeError.
//
// LMDB specifics: READ opens with MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, so read-only DBs (no
// lock.mdb, no write permission) open, and a cursor may be used from another thread than the
// one that opened it. When writing, the map size doubles whenever a commit hits MDB_MAP_FULL.
// Errors are RuntimeErrors naming the path and LMDB's message.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "crema/proto.hpp"

namespace crema::db {

enum class Mode { kRead, kWrite, kNew };
enum class Backend { kLmdb, kLevelDb };

// "lmdb" / "leveldb" (case-insensitive); ConfigError naming the accepted values otherwise.
Backend ParseBackend(const std::string& name);
Backend FromProto(DataParameter::DB backend);
const char* BackendName(Backend backend);

// Walks the records in key order. After the last record valid() turns false (callers that loop,
// such as the Data layer, call SeekToFirst then); key() and value() need valid().
class Cursor {
 public:
  virtual ~Cursor() = default;
  virtual void SeekToFirst() = 0;
  virtual void Next() = 0;
  virtual std::string key() const = 0;
  virtual std::string value() const = 0;
  virtual bool valid() const = 0;
};

// Puts are buffered in memory and written by Commit, which may be called repeatedly: the
// transaction is reusable afterwards (as Caffe's convert tools use it).
class Transaction {
 public:
  virtual ~Transaction() = default;
  virtual void Put(const std::string& key, const std::string& value) = 0;
  virtual void Commit() = 0;
};

class DB {
 public:
  virtual ~DB() = default;
  virtual void Open(const std::string& path, Mode mode) = 0;
  virtual void Close() = 0;
  virtual std::unique_ptr<Cursor> NewCursor() = 0;
  virtual std::unique_ptr<Transaction> NewTransaction() = 0;
  virtual const std::string& path() const = 0;
};

// A closed DB of that backend; RuntimeError for LevelDB (this build has no LevelDB).
std::unique_ptr<DB> GetDB(Backend backend);
// Opens `path`; RuntimeError naming the path when it can't be opened.
std::unique_ptr<DB> OpenDB(Backend backend, const std::string& path, Mode mode);

}  // namespace crema::db
