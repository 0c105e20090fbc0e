#pragma once
// Key-value databases of records (Caffe's Datum DBs), as Caffe's db.hpp: a DB opened READ
// (existing, read-only), WRITE (existing, appended to) or NEW (created; the folder must not
// exist), cursors that walk the records in key order, and transactions that buffer Puts until
// Commit. LMDB is always built in; LevelDB when libleveldb-dev was found at configure time
// (otherwise asking for it is a RuntimeError).
//
// LMDB specifics: READ opens with MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, so read-only DBs (no
// lock.mdb, no write permission) open, and a cursor may be used from another thread than the
// one that opened it. When writing, the map size doubles whenever a commit hits MDB_MAP_FULL.
// Errors are RuntimeErrors naming the path and LMDB's message.
//
// LevelDB specifics: Caffe's options (64 KiB blocks, 256 MiB write buffer, 100 open files), so
// either tool reads the other's DBs. A LevelDB is locked by the process that opens it, so DBs
// opened READ on the same path within a process share one handle (as Caffe's DataReader shares
// one per source); a writer excludes everything else. Errors are RuntimeErrors naming the path and
// LevelDB's status.
#include <cstdint>
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
  // The number of records (LMDB: its statistics; LevelDB: counted by a walk over the keys).
  virtual int64_t Count() = 0;
};

// A closed DB of that backend; RuntimeError for LevelDB when this build has no LevelDB.
std::unique_ptr<DB> GetDB(Backend backend);
// Whether this build has the LevelDB backend.
bool HasLevelDb();
// Opens `path`; RuntimeError naming the path when it can't be opened.
std::unique_ptr<DB> OpenDB(Backend backend, const std::string& path, Mode mode);

}  // namespace crema::db
