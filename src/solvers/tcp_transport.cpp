// The TCP transport (allreduce.hpp): torchrun-style variables, no MPI. A star around rank 0:
// rank 0 listens on MASTER_ADDR:MASTER_PORT and every other rank connects to it. A sum goes to
// rank 0, which adds the ranks' values in rank order and sends the result back, so every rank gets
// the same bits and runs are deterministic. Every message is a frame: a header (magic, kind,
// sender, world, payload bytes) and a payload; a rank that fails sends an abort frame with its
// message, so the others stop with it instead of waiting; a rank that dies closes its sockets,
// which the others see at once; a rank that hangs is caught by CREMA_DIST_TIMEOUT.
#include <arpa/inet.h>
#include <fcntl.h>
#include <glog/logging.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "crema/error.hpp"
#include "solvers/allreduce.hpp"

namespace crema::dist {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x414d5243;  // "CRMA"
enum Kind : uint32_t { kHello = 1, kWelcome = 2, kReject = 3, kData = 4, kAbort = 5 };

struct Header {
  uint32_t magic = kMagic;
  uint32_t kind = 0;
  uint32_t rank = 0;
  uint32_t world = 0;
  uint64_t bytes = 0;
};

// A variable that must be a whole number in [low, high] when set; `fallback` when unset.
int64_t EnvInt(const char* name, int64_t fallback, int64_t low, int64_t high) {
  const char* text = std::getenv(name);
  if (text == nullptr) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || value < low || value > high)
    CREMA_THROW_CONFIG("environment variable ", name, "=\"", text,
                       "\": expected a whole number in [", low, ", ", high, "]");
  return value;
}

std::string ErrnoText(int error) { return std::strerror(error); }

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, int world, int local_rank, std::string address, int port, int timeout_s)
      : rank_(rank),
        world_(world),
        local_rank_(local_rank),
        address_(std::move(address)),
        port_(port),
        timeout_s_(timeout_s),
        fds_(world, -1) {
    if (world_ == 1) return;
    if (rank_ == 0)
      Listen();
    else
      Connect();
  }
  ~TcpTransport() override {
    for (int fd : fds_)
      if (fd >= 0) close(fd);
  }

  const char* name() const override { return "TCP"; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }

  void Broadcast(void* data, size_t bytes) override {
    if (rank_ == 0) {
      for (int peer = 1; peer < world_; ++peer) SendFrame(peer, kData, data, bytes);
    } else {
      ReceiveHeader(0, kData, bytes, "a broadcast from rank 0");
      Receive(0, data, bytes, "a broadcast from rank 0");
    }
  }
  void SumFloats(float* data, int64_t count) override { Sum(data, count); }
  void SumDoubles(double* data, int64_t count) override { Sum(data, count); }

  [[noreturn]] void Abort(const std::string& message) override {
    LOG(ERROR) << "rank " << rank_ << " of " << world_ << " failed: " << message
               << "; stopping all ranks";
    google::FlushLogFiles(google::GLOG_INFO);
    // Best effort, without blocking: the peers may be gone already.
    Header header;
    header.kind = kAbort;
    header.rank = static_cast<uint32_t>(rank_);
    header.world = static_cast<uint32_t>(world_);
    header.bytes = message.size();
    for (int fd : fds_) {
      if (fd < 0) continue;
      send(fd, &header, sizeof(header), MSG_NOSIGNAL | MSG_DONTWAIT);
      send(fd, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      shutdown(fd, SHUT_WR);
    }
    std::fflush(nullptr);
    std::_Exit(1);
  }

 private:
  std::string Where() const { return StrCat(address_, ":", port_); }

  addrinfo* Resolve(bool passive) const {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (passive) hints.ai_flags = AI_PASSIVE;
    addrinfo* result = nullptr;
    const int code = getaddrinfo(address_.c_str(), std::to_string(port_).c_str(), &hints, &result);
    if (code != 0)
      CREMA_THROW_CONFIG("MASTER_ADDR=\"", address_, "\": cannot resolve it (", gai_strerror(code),
                         ")");
    return result;
  }

  int RemainingMs(Clock::time_point deadline) const {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return static_cast<int>(std::max<int64_t>(0, left));
  }

  static void Configure(int fd) {
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFD, FD_CLOEXEC);
  }

  // Rank 0: listens and accepts world - 1 ranks, each with a hello frame naming its rank and
  // world size; a wrong or repeated rank or another world size is refused, on both sides.
  void Listen() {
    addrinfo* info = Resolve(true);
    int listener = socket(info->ai_family, info->ai_socktype | SOCK_CLOEXEC, info->ai_protocol);
    if (listener < 0) {
      freeaddrinfo(info);
      CREMA_THROW_RUNTIME("socket() failed: ", ErrnoText(errno));
    }
    const int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const int bound = bind(listener, info->ai_addr, info->ai_addrlen);
    const int bind_error = errno;
    freeaddrinfo(info);
    if (bound != 0) {
      close(listener);
      if (bind_error == EADDRINUSE)
        CREMA_THROW_RUNTIME("rank 0 cannot listen on ", Where(), ": the port is in use (another ",
                            "job, or one that has not ended); choose another MASTER_PORT (or ",
                            "CREMA_MASTER_PORT)");
      if (bind_error == EADDRNOTAVAIL)
        CREMA_THROW_RUNTIME("rank 0 cannot listen on ", Where(), ": MASTER_ADDR is not an ",
                            "address of this machine (rank 0 must run on the MASTER_ADDR host)");
      CREMA_THROW_RUNTIME("rank 0 cannot listen on ", Where(), ": ", ErrnoText(bind_error));
    }
    listen(listener, world_);
    LOG(INFO) << "TCP rendezvous: rank 0 waits on " << Where() << " for " << world_ - 1
              << " rank(s) (CREMA_DIST_TIMEOUT " << timeout_s_ << " s)";
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s_);
    int joined = 1;
    try {
      while (joined < world_) {
        pollfd waiting{listener, POLLIN, 0};
        if (poll(&waiting, 1, RemainingMs(deadline)) <= 0) {
          std::string missing;
          for (int r = 1; r < world_; ++r)
            if (fds_[r] < 0) missing += StrCat(missing.empty() ? "" : ", ", r);
          CREMA_THROW_RUNTIME("TCP rendezvous timed out after ", timeout_s_, " s on ", Where(),
                              ": rank(s) ", missing, " of WORLD_SIZE ", world_,
                              " never connected (not started, a different MASTER_ADDR/",
                              "MASTER_PORT, or a firewall; CREMA_DIST_TIMEOUT sets the wait)");
        }
        const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) continue;
        Configure(fd);
        Header hello;
        if (!ReadWithin(fd, &hello, sizeof(hello), deadline) || hello.magic != kMagic ||
            hello.kind != kHello) {
          close(fd);  // not a crema rank (a port scanner, a stale client): ignore it
          continue;
        }
        std::string refusal;
        if (static_cast<int>(hello.world) != world_)
          refusal = StrCat("rank ", hello.rank, " was started with WORLD_SIZE=", hello.world,
                           " but rank 0 with WORLD_SIZE=", world_,
                           ": every rank needs the same WORLD_SIZE");
        else if (hello.rank == 0 || static_cast<int>(hello.rank) >= world_)
          refusal = StrCat("a rank connected as RANK=", hello.rank, ", not in [1, ", world_, ")");
        else if (fds_[hello.rank] >= 0)
          refusal = StrCat("two processes were started with RANK=", hello.rank);
        if (!refusal.empty()) {
          Header reject;
          reject.kind = kReject;
          reject.world = static_cast<uint32_t>(world_);
          reject.bytes = refusal.size();
          send(fd, &reject, sizeof(reject), MSG_NOSIGNAL);
          send(fd, refusal.data(), refusal.size(), MSG_NOSIGNAL);
          close(fd);
          CREMA_THROW_RUNTIME("TCP rendezvous on ", Where(), ": ", refusal);
        }
        fds_[hello.rank] = fd;
        ++joined;
      }
    } catch (...) {
      close(listener);
      throw;
    }
    close(listener);
    for (int peer = 1; peer < world_; ++peer) SendFrame(peer, kWelcome, nullptr, 0);
    LOG(INFO) << "TCP rendezvous: all " << world_ << " ranks joined on " << Where();
  }

  // Rank r > 0: connects to rank 0 (retrying until it listens), says hello, waits for welcome.
  void Connect() {
    const auto deadline = Clock::now() + std::chrono::seconds(timeout_s_);
    std::string last_error = "no attempt";
    int fd = -1;
    while (fd < 0) {
      if (Clock::now() >= deadline)
        CREMA_THROW_RUNTIME("TCP rendezvous timed out after ", timeout_s_, " s: rank ", rank_,
                            " cannot reach rank 0 at ", Where(), " (", last_error,
                            "); check MASTER_ADDR/MASTER_PORT and that rank 0 started "
                            "(CREMA_DIST_TIMEOUT sets the wait)");
      addrinfo* info = Resolve(false);
      for (addrinfo* a = info; a != nullptr && fd < 0; a = a->ai_next) {
        const int s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0) continue;
        // Bounds a connect to an unreachable host (Linux applies the send timeout to connect).
        timeval limit{std::max(1, std::min(5, RemainingMs(deadline) / 1000)), 0};
        setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
        if (connect(s, a->ai_addr, a->ai_addrlen) == 0) {
          timeval none{0, 0};
          setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof(none));
          fd = s;
        } else {
          last_error = ErrnoText(errno);
          close(s);
        }
      }
      freeaddrinfo(info);
      if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    Configure(fd);
    fds_[0] = fd;
    SendFrame(0, kHello, nullptr, 0);
    Header answer;
    if (!ReadWithin(fd, &answer, sizeof(answer), deadline))
      CREMA_THROW_RUNTIME("TCP rendezvous: rank 0 at ", Where(),
                          " accepted the connection but did not answer within ", timeout_s_,
                          " s (it is still waiting for other ranks, or it failed)");
    if (answer.magic != kMagic)
      CREMA_THROW_RUNTIME("TCP rendezvous: ", Where(), " is not a crema rank 0");
    if (answer.kind == kReject || answer.kind == kAbort) {
      std::string text(answer.bytes, '\0');
      ReadWithin(fd, text.data(), text.size(), deadline);
      CREMA_THROW_RUNTIME("TCP rendezvous: rank 0 at ", Where(), " refused rank ", rank_, ": ",
                          text);
    }
    if (answer.kind != kWelcome)
      CREMA_THROW_RUNTIME("TCP rendezvous: unexpected answer from rank 0 at ", Where());
  }

  // Reads exactly `bytes` before `deadline`; false on a timeout, an error or the end.
  bool ReadWithin(int fd, void* data, size_t bytes, Clock::time_point deadline) {
    char* at = static_cast<char*>(data);
    while (bytes > 0) {
      pollfd waiting{fd, POLLIN, 0};
      if (poll(&waiting, 1, RemainingMs(deadline)) <= 0) return false;
      const ssize_t got = recv(fd, at, bytes, 0);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        return false;
      }
      at += got;
      bytes -= static_cast<size_t>(got);
    }
    return true;
  }

  // Reads exactly `bytes` from `peer`; RuntimeError when it ends, fails or is silent too long.
  void Receive(int peer, void* data, size_t bytes, const char* what) {
    char* at = static_cast<char*>(data);
    while (bytes > 0) {
      pollfd waiting{fds_[peer], POLLIN, 0};
      const int ready = poll(&waiting, 1, timeout_s_ * 1000);
      if (ready == 0)
        CREMA_THROW_RUNTIME("rank ", rank_, " waited ", timeout_s_, " s for ", what, " from rank ",
                            peer, " (it hangs or is far slower; CREMA_DIST_TIMEOUT sets the wait)");
      if (ready < 0 && errno == EINTR) continue;
      const ssize_t got = recv(fds_[peer], at, bytes, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0)
        CREMA_THROW_RUNTIME("rank ", peer, " of ", world_,
                            " closed its connection (it ended or died) while rank ", rank_,
                            " waited for ", what, got < 0 ? StrCat(": ", ErrnoText(errno)) : "");
      at += got;
      bytes -= static_cast<size_t>(got);
    }
  }

  // The header of the next frame from `peer`, which must be `kind` with `bytes` bytes; an abort
  // frame becomes a RuntimeError with the failed rank's message.
  void ReceiveHeader(int peer, Kind kind, size_t bytes, const char* what) {
    Header header;
    Receive(peer, &header, sizeof(header), what);
    if (header.magic == kMagic && header.kind == kAbort) {
      std::string text(std::min<uint64_t>(header.bytes, 1 << 20), '\0');
      Receive(peer, text.data(), text.size(), "the message of an aborted rank");
      CREMA_THROW_RUNTIME("rank ", header.rank, " of ", world_, " failed: ", text);
    }
    if (header.magic != kMagic || header.kind != kind || header.bytes != bytes)
      CREMA_THROW_RUNTIME("rank ", peer, " sent ", header.bytes, " bytes where rank ", rank_,
                          " expected ", bytes, " for ", what,
                          ": the ranks do not run the same net and solver (or the same crema)");
  }

  void SendFrame(int peer, Kind kind, const void* data, size_t bytes) {
    Header header;
    header.kind = kind;
    header.rank = static_cast<uint32_t>(rank_);
    header.world = static_cast<uint32_t>(world_);
    header.bytes = bytes;
    Send(peer, &header, sizeof(header));
    Send(peer, data, bytes);
  }

  void Send(int peer, const void* data, size_t bytes) {
    const char* at = static_cast<const char*>(data);
    while (bytes > 0) {
      pollfd waiting{fds_[peer], POLLOUT, 0};
      const int ready = poll(&waiting, 1, timeout_s_ * 1000);
      if (ready == 0)
        CREMA_THROW_RUNTIME("rank ", rank_, " could not send to rank ", peer, " for ", timeout_s_,
                            " s (it stopped reading; CREMA_DIST_TIMEOUT sets the wait)");
      if (ready < 0 && errno == EINTR) continue;
      const ssize_t sent = send(fds_[peer], at, bytes, MSG_NOSIGNAL);
      if (sent < 0 && errno == EINTR) continue;
      if (sent <= 0) {
        const std::string error = ErrnoText(errno);
        ThrowIfAborted(peer);
        CREMA_THROW_RUNTIME("rank ", peer, " of ", world_,
                            " closed its connection (it ended or died) while rank ", rank_,
                            " sent to it: ", error);
      }
      at += sent;
      bytes -= static_cast<size_t>(sent);
    }
  }

  // After a failed send: when `peer` left an abort frame behind, its message is the reason.
  void ThrowIfAborted(int peer) {
    Header header;
    const ssize_t got = recv(fds_[peer], &header, sizeof(header), MSG_DONTWAIT | MSG_PEEK);
    if (got != static_cast<ssize_t>(sizeof(header)) || header.magic != kMagic ||
        header.kind != kAbort)
      return;
    recv(fds_[peer], &header, sizeof(header), MSG_DONTWAIT);
    std::string text(std::min<uint64_t>(header.bytes, 1 << 20), '\0');
    const ssize_t length = recv(fds_[peer], text.data(), text.size(), MSG_DONTWAIT);
    text.resize(std::max<ssize_t>(0, length));
    CREMA_THROW_RUNTIME("rank ", header.rank, " of ", world_, " failed: ", text);
  }

  // Rank 0 adds the ranks' values in rank order, chunk by chunk, and sends the sum back.
  template <typename T>
  void Sum(T* data, int64_t count) {
    const size_t bytes = count * sizeof(T);
    if (rank_ != 0) {
      SendFrame(0, kData, data, bytes);
      ReceiveHeader(0, kData, bytes, "the sum from rank 0");
      Receive(0, data, bytes, "the sum from rank 0");
      return;
    }
    for (int peer = 1; peer < world_; ++peer)
      ReceiveHeader(peer, kData, bytes, "its values to sum");
    constexpr int64_t kChunk = 1 << 18;
    std::vector<T> theirs(std::min(count, kChunk));
    for (int64_t begin = 0; begin < count; begin += kChunk) {
      const int64_t n = std::min(kChunk, count - begin);
      for (int peer = 1; peer < world_; ++peer) {
        Receive(peer, theirs.data(), n * sizeof(T), "its values to sum");
        for (int64_t i = 0; i < n; ++i) data[begin + i] += theirs[i];
      }
    }
    for (int peer = 1; peer < world_; ++peer) SendFrame(peer, kData, data, bytes);
  }

  int rank_, world_, local_rank_;
  std::string address_;
  int port_;
  int timeout_s_;
  std::vector<int> fds_;  // the socket to each peer (rank 0: to every rank; others: to rank 0)
};

}  // namespace

std::unique_ptr<Transport> JoinTcp() {
  const bool has_rank = std::getenv("RANK") != nullptr;
  const bool has_world = std::getenv("WORLD_SIZE") != nullptr;
  if (!has_rank && !has_world) return nullptr;
  if (has_rank != has_world)
    CREMA_THROW_CONFIG("environment: ", has_rank ? "RANK" : "WORLD_SIZE", " is set but ",
                       has_rank ? "WORLD_SIZE" : "RANK",
                       " is not; a torchrun-style start needs both (and MASTER_ADDR, "
                       "MASTER_PORT)");
  const int world = static_cast<int>(EnvInt("WORLD_SIZE", 1, 1, 1 << 20));
  const int rank = static_cast<int>(EnvInt("RANK", 0, 0, world - 1));
  const int local_rank = static_cast<int>(EnvInt("LOCAL_RANK", 0, 0, 1 << 20));
  const int timeout_s = static_cast<int>(EnvInt("CREMA_DIST_TIMEOUT", 1800, 1, 1 << 24));
  int port = 0;
  std::string address = "127.0.0.1";
  if (world > 1) {
    if (std::getenv("MASTER_PORT") == nullptr)
      CREMA_THROW_CONFIG("environment: WORLD_SIZE=", world,
                         " but MASTER_PORT is not set (the port rank 0 listens on)");
    port = static_cast<int>(EnvInt("MASTER_PORT", 0, 1, 65535));
    // torchrun's agent may keep its own store listening on MASTER_PORT for its workers
    // (TORCHELASTIC_USE_AGENT_STORE=True): then crema's rank 0 takes the next port.
    const char* agent_store = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
    if (agent_store && std::string(agent_store) == "True" && port < 65535) ++port;
    port = static_cast<int>(EnvInt("CREMA_MASTER_PORT", port, 1, 65535));
    if (const char* value = std::getenv("MASTER_ADDR"); value && *value) address = value;
  }
  return std::make_unique<TcpTransport>(rank, world, local_rank, address, port, timeout_s);
}

}  // namespace crema::dist
