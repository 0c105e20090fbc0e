#include "local_group.hpp"

#include <arpa/inet.h>
#include <glog/logging.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "crema/device.hpp"
#include "crema/error.hpp"
#include "flags.hpp"
#include "solvers/distributed.hpp"

DECLARE_int32(nproc);

namespace crema::cli {
namespace {

// The ranks, for the signal handler to pass signals on.
std::vector<pid_t> ranks;

void PassSignal(int signal) {
  for (pid_t pid : ranks)
    if (pid > 0) kill(pid, signal);
}

// This process's command line, as it was started (re-executed unchanged by each rank).
std::vector<std::string> OwnArguments() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string current;
  for (char c : all) {
    if (c == '\0') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (args.empty()) CREMA_THROW_RUNTIME("cannot read /proc/self/cmdline to start the ranks");
  return args;
}

// A port nobody listens on now on 127.0.0.1 (the kernel's pick for port 0).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) CREMA_THROW_RUNTIME("cannot open a socket: ", std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  close(fd);
  if (!ok) CREMA_THROW_RUNTIME("cannot find a free port on 127.0.0.1: ", std::strerror(errno));
  return ntohs(address.sin_port);
}

int ExitCodeOf(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

bool RunLocalGroup(int* exit_code) {
  if (FLAGS_nproc < 1) CREMA_THROW_CONFIG("--nproc must be >= 1, got ", FLAGS_nproc);
  if (dist::StartedAsRank()) {
    // Each rank re-reads the same flags; --nproc is the launcher's, so only its own ranks agree.
    const char* world = std::getenv("WORLD_SIZE");
    if (FLAGS_nproc > 1 && (world == nullptr || std::atoi(world) != FLAGS_nproc))
      CREMA_THROW_CONFIG("--nproc ", FLAGS_nproc,
                         " starts its own processes: do not use it under mpirun, srun or "
                         "torchrun (they start the ranks)");
    return false;
  }
  const std::vector<int> gpus = FLAGS_gpu == "all" && CudaDeviceCount() < 2
                                    ? std::vector<int>{}  // "all" of one GPU: one process
                                    : GpuIdsFromFlag();
  if (gpus.size() > 1 && FLAGS_nproc > 1 && static_cast<int>(gpus.size()) != FLAGS_nproc)
    CREMA_THROW_CONFIG("--nproc ", FLAGS_nproc, " and --gpu ", FLAGS_gpu, " (", gpus.size(),
                       " GPUs) disagree: one process per GPU");
  const int world = gpus.size() > 1 ? static_cast<int>(gpus.size()) : FLAGS_nproc;
  if (world <= 1) return false;
  if (!gpus.empty()) {
    const int visible = CudaDeviceCount();
    for (int id : gpus)
      if (id >= visible)
        CREMA_THROW_RUNTIME("--gpu ", FLAGS_gpu, ": there is no CUDA device ", id, " (", visible,
                            " visible; crema device_query lists them)");
  }

  const std::vector<std::string> args = OwnArguments();
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string port = std::to_string(FreePort());
  // The cores are shared: each rank gets its part unless the user chose the thread count.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const std::string threads = std::to_string(std::max(1, static_cast<int>(cores) / world));
  LOG(INFO) << "Starting " << world << " training processes on this machine (ranks 0-" << world - 1
            << (gpus.empty() ? "" : ", one per GPU of --gpu " + FLAGS_gpu)
            << "), rendezvous on 127.0.0.1:" << port
            << "; batch_size is per process, as in Caffe's multi-GPU training";
  std::fflush(nullptr);

  struct sigaction pass = {}, old_int = {}, old_term = {}, old_hup = {};
  pass.sa_handler = &PassSignal;
  ranks.assign(world, -1);
  sigaction(SIGINT, &pass, &old_int);
  sigaction(SIGTERM, &pass, &old_term);
  sigaction(SIGHUP, &pass, &old_hup);
  for (int rank = 0; rank < world; ++rank) {
    const pid_t pid = fork();
    if (pid < 0) {
      PassSignal(SIGTERM);
      CREMA_THROW_RUNTIME("cannot start rank ", rank, ": ", std::strerror(errno));
    }
    if (pid == 0) {
      // A group of their own: Ctrl-C reaches the ranks once, through PassSignal; and they end
      // when this process dies.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(rank).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(world).c_str(), 1);
      setenv("MASTER_ADDR", "127.0.0.1", 1);
      setenv("MASTER_PORT", port.c_str(), 1);
      setenv("OMP_NUM_THREADS", threads.c_str(), 0);
      setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 0);
      execv("/proc/self/exe", argv.data());
      std::fprintf(stderr, "error: cannot start rank %d: %s\n", rank, std::strerror(errno));
      _exit(127);
    }
    ranks[rank] = pid;
  }

  // Every rank's end; after the first failure the others stop by themselves (the group tells
  // them), else they are ended after a grace period.
  int code = 0, running = world;
  auto failed_at = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    int status = 0;
    const pid_t pid = waitpid(-1, &status, code != 0 ? WNOHANG : 0);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;
    if (pid == 0) {
      if (std::chrono::steady_clock::now() - failed_at > std::chrono::seconds(30)) {
        LOG(WARNING) << "ranks still running 30 s after one failed: ending them";
        PassSignal(SIGKILL);
        failed_at = std::chrono::steady_clock::time_point::max();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    for (int rank = 0; rank < world; ++rank) {
      if (ranks[rank] != pid) continue;
      ranks[rank] = -1;
      --running;
      const int rank_code = ExitCodeOf(status);
      if (rank_code != 0 && code == 0) {
        code = rank_code;
        failed_at = std::chrono::steady_clock::now();
        if (running > 0) LOG(WARNING) << "rank " << rank << " exited with code " << rank_code;
      }
    }
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  *exit_code = code;
  return true;
}

}  // namespace crema::cli
