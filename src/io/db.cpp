#include "io/db.hpp"

#include <lmdb.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "crema/error.hpp"

#ifdef CREMA_WITH_LEVELDB
#include <leveldb/db.h>
#include <leveldb/write_batch.h>
#endif

namespace crema::db {
namespace {

constexpr size_t kInitialMapSize = size_t{1} << 26;  // 64 MiB; doubled on MDB_MAP_FULL

[[noreturn]] void ThrowLmdb(const std::string& what, const std::string& path, int rc) {
  CREMA_THROW_RUNTIME(what, " LMDB '", path, "': ", mdb_strerror(rc));
}

// The environment is shared by the DB and its cursors and transactions, so closing the DB
// before them is safe.
struct Env {
  MDB_env* env = nullptr;
  std::string path;
  ~Env() {
    if (env != nullptr) mdb_env_close(env);
  }
};

class LmdbCursor final : public Cursor {
 public:
  explicit LmdbCursor(std::shared_ptr<Env> env) : env_(std::move(env)) {
    int rc = mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &txn_);
    if (rc != MDB_SUCCESS) ThrowLmdb("cannot read", env_->path, rc);
    MDB_dbi dbi;
    rc = mdb_dbi_open(txn_, nullptr, 0, &dbi);
    if (rc == MDB_SUCCESS) rc = mdb_cursor_open(txn_, dbi, &cursor_);
    if (rc != MDB_SUCCESS) {
      mdb_txn_abort(txn_);
      ThrowLmdb("cannot read", env_->path, rc);
    }
    SeekToFirst();
  }
  ~LmdbCursor() override {
    mdb_cursor_close(cursor_);
    mdb_txn_abort(txn_);
  }

  void SeekToFirst() override { Seek(MDB_FIRST); }
  void Next() override { Seek(MDB_NEXT); }
  std::string key() const override {
    return std::string(static_cast<const char*>(key_.mv_data), key_.mv_size);
  }
  std::string value() const override {
    return std::string(static_cast<const char*>(value_.mv_data), value_.mv_size);
  }
  bool valid() const override { return valid_; }

 private:
  void Seek(MDB_cursor_op op) {
    const int rc = mdb_cursor_get(cursor_, &key_, &value_, op);
    if (rc == MDB_NOTFOUND) {
      valid_ = false;
      return;
    }
    if (rc != MDB_SUCCESS) ThrowLmdb("cannot read", env_->path, rc);
    valid_ = true;
  }

  std::shared_ptr<Env> env_;
  MDB_txn* txn_ = nullptr;
  MDB_cursor* cursor_ = nullptr;
  MDB_val key_{}, value_{};
  bool valid_ = false;
};

class LmdbTransaction final : public Transaction {
 public:
  explicit LmdbTransaction(std::shared_ptr<Env> env) : env_(std::move(env)) {}

  void Put(const std::string& key, const std::string& value) override {
    keys_.push_back(key);
    values_.push_back(value);
  }

  void Commit() override {
    // A commit that does not fit is aborted and retried with twice the map size.
    while (!TryCommit()) {
      MDB_envinfo info;
      mdb_env_info(env_->env, &info);
      const int rc = mdb_env_set_mapsize(env_->env, info.me_mapsize * 2);
      if (rc != MDB_SUCCESS) ThrowLmdb("cannot grow", env_->path, rc);
    }
    keys_.clear();
    values_.clear();
  }

 private:
  bool TryCommit() {
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_->env, nullptr, 0, &txn);
    if (rc != MDB_SUCCESS) ThrowLmdb("cannot write", env_->path, rc);
    MDB_dbi dbi;
    rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
    for (size_t i = 0; rc == MDB_SUCCESS && i < keys_.size(); ++i) {
      MDB_val key{keys_[i].size(), keys_[i].data()};
      MDB_val value{values_[i].size(), values_[i].data()};
      rc = mdb_put(txn, dbi, &key, &value, 0);
    }
    if (rc != MDB_SUCCESS) {
      mdb_txn_abort(txn);
      if (rc == MDB_MAP_FULL) return false;
      ThrowLmdb("cannot write", env_->path, rc);
    }
    rc = mdb_txn_commit(txn);  // frees txn whatever the outcome
    if (rc == MDB_MAP_FULL) return false;
    if (rc != MDB_SUCCESS) ThrowLmdb("cannot write", env_->path, rc);
    return true;
  }

  std::shared_ptr<Env> env_;
  std::vector<std::string> keys_, values_;
};

class Lmdb final : public DB {
 public:
  void Open(const std::string& path, Mode mode) override {
    Close();
    auto env = std::make_shared<Env>();
    env->path = path;
    struct stat st;
    const bool exists = stat(path.c_str(), &st) == 0;
    if (mode == Mode::kNew) {
      if (exists)
        CREMA_THROW_RUNTIME("cannot create LMDB '", path,
                            "': it already exists (remove it or choose another name)");
      if (mkdir(path.c_str(), 0755) != 0)
        CREMA_THROW_RUNTIME("cannot create LMDB '", path, "': ", std::strerror(errno));
    } else if (!exists) {
      CREMA_THROW_RUNTIME("cannot open LMDB '", path, "': no such file or directory");
    } else if (!S_ISDIR(st.st_mode)) {
      CREMA_THROW_RUNTIME("cannot open LMDB '", path,
                          "': not a directory (an LMDB is a folder holding data.mdb)");
    }
    int rc = mdb_env_create(&env->env);
    if (rc != MDB_SUCCESS) ThrowLmdb("cannot open", path, rc);
    if (mode == Mode::kNew) {
      rc = mdb_env_set_mapsize(env->env, kInitialMapSize);
      if (rc != MDB_SUCCESS) ThrowLmdb("cannot open", path, rc);
    }
    // Read-only opens take no lock: reference DBs may sit in read-only folders, and Caffe's
    // readers never share a DB with a writer.
    const unsigned flags = mode == Mode::kRead ? MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS : 0;
    rc = mdb_env_open(env->env, path.c_str(), flags, 0664);
    if (rc != MDB_SUCCESS) ThrowLmdb("cannot open", path, rc);
    env_ = std::move(env);
    mode_ = mode;
    path_ = path;
  }

  void Close() override { env_.reset(); }

  std::unique_ptr<Cursor> NewCursor() override {
    CheckOpen();
    return std::make_unique<LmdbCursor>(env_);
  }

  std::unique_ptr<Transaction> NewTransaction() override {
    CheckOpen();
    if (mode_ == Mode::kRead)
      CREMA_THROW_RUNTIME("LMDB '", path_, "' was opened for reading; it cannot be written");
    return std::make_unique<LmdbTransaction>(env_);
  }

  const std::string& path() const override { return path_; }

  int64_t Count() override {
    CheckOpen();
    MDB_txn* txn = nullptr;
    int rc = mdb_txn_begin(env_->env, nullptr, MDB_RDONLY, &txn);
    if (rc != MDB_SUCCESS) ThrowLmdb("cannot read", path_, rc);
    MDB_dbi dbi;
    MDB_stat stat;
    rc = mdb_dbi_open(txn, nullptr, 0, &dbi);
    if (rc == MDB_SUCCESS) rc = mdb_stat(txn, dbi, &stat);
    mdb_txn_abort(txn);
    if (rc != MDB_SUCCESS) ThrowLmdb("cannot read", path_, rc);
    return static_cast<int64_t>(stat.ms_entries);
  }

 private:
  void CheckOpen() const { CREMA_ASSERT(env_ != nullptr, "the DB is not open"); }

  std::shared_ptr<Env> env_;
  Mode mode_ = Mode::kRead;
  std::string path_;
};

#ifdef CREMA_WITH_LEVELDB
// The leveldb::DB is shared by the DB and its cursors and transactions, so closing the DB before
// them is safe; iterators are deleted before it.
struct LevelDbHandle {
  std::unique_ptr<leveldb::DB> db;
  std::string path;
};

[[noreturn]] void ThrowLevelDb(const std::string& what, const std::string& path,
                               const leveldb::Status& status) {
  CREMA_THROW_RUNTIME(what, " LevelDB '", path, "': ", status.ToString());
}

class LevelDbCursor final : public Cursor {
 public:
  explicit LevelDbCursor(std::shared_ptr<LevelDbHandle> handle)
      : handle_(std::move(handle)), iter_(handle_->db->NewIterator(leveldb::ReadOptions())) {
    SeekToFirst();
  }
  ~LevelDbCursor() override { iter_.reset(); }

  void SeekToFirst() override {
    iter_->SeekToFirst();
    CheckStatus();
  }
  void Next() override {
    iter_->Next();
    CheckStatus();
  }
  std::string key() const override { return iter_->key().ToString(); }
  std::string value() const override { return iter_->value().ToString(); }
  bool valid() const override { return iter_->Valid(); }

 private:
  void CheckStatus() const {
    if (!iter_->status().ok()) ThrowLevelDb("cannot read", handle_->path, iter_->status());
  }

  std::shared_ptr<LevelDbHandle> handle_;
  std::unique_ptr<leveldb::Iterator> iter_;
};

class LevelDbTransaction final : public Transaction {
 public:
  explicit LevelDbTransaction(std::shared_ptr<LevelDbHandle> handle) : handle_(std::move(handle)) {}

  void Put(const std::string& key, const std::string& value) override { batch_.Put(key, value); }

  void Commit() override {
    const leveldb::Status status = handle_->db->Write(leveldb::WriteOptions(), &batch_);
    if (!status.ok()) ThrowLevelDb("cannot write", handle_->path, status);
    batch_.Clear();
  }

 private:
  std::shared_ptr<LevelDbHandle> handle_;
  leveldb::WriteBatch batch_;
};

class LevelDb final : public DB {
 public:
  void Open(const std::string& path, Mode mode) override {
    Close();
    struct stat st;
    const bool exists = stat(path.c_str(), &st) == 0;
    if (mode == Mode::kNew && exists)
      CREMA_THROW_RUNTIME("cannot create LevelDB '", path,
                          "': it already exists (remove it or choose another name)");
    if (mode != Mode::kNew && !exists)
      CREMA_THROW_RUNTIME("cannot open LevelDB '", path, "': no such file or directory");
    if (mode != Mode::kNew && !S_ISDIR(st.st_mode))
      CREMA_THROW_RUNTIME("cannot open LevelDB '", path,
                          "': not a directory (a LevelDB is a folder holding CURRENT)");
    // A LevelDB can be opened once per process (it takes a lock), but nets often read one
    // source from several layers (TRAIN and TEST): readers share the open DB, as Caffe's
    // DataReader shares one per source.
    static std::mutex mutex;
    static std::map<std::string, std::weak_ptr<LevelDbHandle>> readers;
    std::unique_lock<std::mutex> lock(mutex);
    if (mode == Mode::kRead) {
      auto it = readers.find(path);
      if (it != readers.end()) {
        if (auto shared = it->second.lock()) {
          handle_ = std::move(shared);
          mode_ = mode;
          path_ = path;
          return;
        }
      }
    }
    // Caffe's options, so DBs written by either have the same layout.
    leveldb::Options options;
    options.block_size = 65536;
    options.write_buffer_size = 268435456;
    options.max_open_files = 100;
    options.error_if_exists = mode == Mode::kNew;
    options.create_if_missing = mode != Mode::kRead;
    leveldb::DB* raw = nullptr;
    const leveldb::Status status = leveldb::DB::Open(options, path, &raw);
    if (!status.ok()) ThrowLevelDb("cannot open", path, status);
    auto handle = std::make_shared<LevelDbHandle>();
    handle->db.reset(raw);
    handle->path = path;
    if (mode == Mode::kRead) readers[path] = handle;
    handle_ = std::move(handle);
    mode_ = mode;
    path_ = path;
  }

  void Close() override { handle_.reset(); }

  std::unique_ptr<Cursor> NewCursor() override {
    CheckOpen();
    return std::make_unique<LevelDbCursor>(handle_);
  }

  std::unique_ptr<Transaction> NewTransaction() override {
    CheckOpen();
    if (mode_ == Mode::kRead)
      CREMA_THROW_RUNTIME("LevelDB '", path_, "' was opened for reading; it cannot be written");
    return std::make_unique<LevelDbTransaction>(handle_);
  }

  const std::string& path() const override { return path_; }

  int64_t Count() override {
    CheckOpen();
    int64_t count = 0;
    for (auto cursor = NewCursor(); cursor->valid(); cursor->Next()) ++count;
    return count;
  }

 private:
  void CheckOpen() const { CREMA_ASSERT(handle_ != nullptr, "the DB is not open"); }

  std::shared_ptr<LevelDbHandle> handle_;
  Mode mode_ = Mode::kRead;
  std::string path_;
};
#endif  // CREMA_WITH_LEVELDB

}  // namespace

Backend ParseBackend(const std::string& name) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "lmdb") return Backend::kLmdb;
  if (lower == "leveldb") return Backend::kLevelDb;
  CREMA_THROW_CONFIG("unknown DB backend \"", name, "\" (expected lmdb or leveldb)");
}

Backend FromProto(DataParameter::DB backend) {
  return backend == DataParameter::LMDB ? Backend::kLmdb : Backend::kLevelDb;
}

const char* BackendName(Backend backend) { return backend == Backend::kLmdb ? "lmdb" : "leveldb"; }

std::unique_ptr<DB> GetDB(Backend backend) {
  if (backend == Backend::kLevelDb) {
#ifdef CREMA_WITH_LEVELDB
    return std::make_unique<LevelDb>();
#else
    CREMA_THROW_RUNTIME(
        "this crema was built without LevelDB; use LMDB (backend: LMDB in a "
        "prototxt, --backend lmdb on the command line)");
#endif
  }
  return std::make_unique<Lmdb>();
}

bool HasLevelDb() {
#ifdef CREMA_WITH_LEVELDB
  return true;
#else
  return false;
#endif
}

std::unique_ptr<DB> OpenDB(Backend backend, const std::string& path, Mode mode) {
  std::unique_ptr<DB> db = GetDB(backend);
  db->Open(path, mode);
  return db;
}

}  // namespace crema::db
