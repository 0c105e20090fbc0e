// `crema zoo`: the front matter of every models/*/readme.md (read here by a separate parser),
// list and info over the real models/, and fetch from file:// and from an HTTP server run in
// this process (POSIX sockets, honours Range): a resumed download, a server without Range
// support, a checksum mismatch and a refused connection. Checksums come from coreutils'
// sha256sum/sha1sum, not from crema.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/reference.hpp"
#include "tools/image_tool_util.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

using Result = testing::CremaResult;

Result Crema(const std::string& args) { return testing::RunCrema(args); }

// The first word printed by coreutils' sha256sum / sha1sum for `path`.
std::string Digest(const std::string& tool, const std::string& path) {
  FILE* pipe = popen((tool + " '" + path + "'").c_str(), "r");
  if (pipe == nullptr) return "";
  char line[256] = "";
  const bool read = std::fgets(line, sizeof(line), pipe) != nullptr;
  pclose(pipe);
  const std::string text = read ? line : "";
  return text.substr(0, text.find(' '));
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// ---- front matter, parsed independently of tools/zoo.cpp ----

std::map<std::string, std::string> FrontMatter(const std::string& text) {
  std::map<std::string, std::string> keys;
  std::istringstream in(text);
  std::string line, parent;
  if (!std::getline(in, line) || line != "---") return keys;
  while (std::getline(in, line) && line != "---") {
    const size_t colon = line.find(": ") != std::string::npos ? line.find(": ") : line.find(':');
    if (colon == std::string::npos) continue;
    const bool nested = line[0] == ' ';
    std::string key = line.substr(nested ? line.find_first_not_of(' ') : 0, colon);
    key = key.substr(0, key.find(':'));
    std::string value = colon + 1 < line.size() ? line.substr(colon + 1) : "";
    value.erase(0, value.find_first_not_of(' '));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    if (nested) {
      keys[parent + "." + key] = value;
    } else {
      keys[key] = value;
      parent = key;
    }
  }
  keys["__closed"] = line == "---" ? "yes" : "no";
  return keys;
}

TEST(ZooReadmes, EveryReadmeHasTheRequiredKeys) {
  const std::string models = std::string(CREMA_SOURCE_DIR) + "/models";
  std::vector<std::string> required;
  std::istringstream words(
      "name weights_url sha256 license accuracy preprocessing.mean preprocessing.scale "
      "preprocessing.channel_order preprocessing.input_size preprocessing.crop");
  for (std::string word; words >> word;) required.push_back(word);
  int count = 0;
  for (const auto& entry : fs::directory_iterator(models)) {
    const fs::path readme = entry.path() / "readme.md";
    if (!entry.is_directory() || !fs::exists(readme)) continue;
    ++count;
    const std::string name = entry.path().filename().string();
    const auto keys = FrontMatter(testing::ReadFile(readme.string()));
    ASSERT_EQ(keys.count("__closed") ? keys.at("__closed") : "", "yes") << name;
    for (const std::string& key : required)
      EXPECT_TRUE(keys.count(key)) << name << " lacks " << key;
    const std::string url = keys.count("weights_url") ? keys.at("weights_url") : "";
    if (!url.empty()) {
      EXPECT_TRUE(url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) << name;
      // A published checksum of the right length, or a note saying why there is none.
      const std::map<std::string, size_t> lengths = {
          {"sha256", 64}, {"sha1", 40}, {"md5", 32}, {"sha256_prefix", 8}};
      bool any = false;
      for (const auto& kv : lengths) {
        if (!keys.count(kv.first) || keys.at(kv.first).empty()) continue;
        any = true;
        EXPECT_EQ(keys.at(kv.first).size(), kv.second) << name << " " << kv.first;
        EXPECT_EQ(keys.at(kv.first).find_first_not_of("0123456789abcdef"), std::string::npos)
            << name;
      }
      if (!any) {
        EXPECT_TRUE(keys.count("checksum_note")) << name;
      }
      EXPECT_TRUE(keys.count("size")) << name;
    }
    for (const char* file : {"deploy.prototxt", "train_val.prototxt", "solver.prototxt"})
      if (name != "lenet") {
        EXPECT_TRUE(fs::exists(entry.path() / file)) << name << " " << file;
      }
  }
  EXPECT_GE(count, 11);
}

TEST(ZooCli, ListAndInfoOverTheRealModels) {
  const std::string dir = "--models-dir " + std::string(CREMA_SOURCE_DIR) + "/models";
  const Result list = Crema("zoo list " + dir);
  ASSERT_EQ(list.rc, 0) << list.output;
  for (const char* name :
       {"cifar10_quick", "cifar10_full", "bvlc_alexnet", "bvlc_reference_caffenet",
        "bvlc_googlenet", "vgg16", "resnet50", "squeezenet_v1.1", "mobilenet_v1", "mobilenet_v2"})
    EXPECT_NE(list.output.find(std::string("\n") + name + " "), std::string::npos) << name;
  EXPECT_NE(list.output.find("top-1 57.1%"), std::string::npos) << list.output;
  EXPECT_NE(list.output.find("BSD-3-Clause"), std::string::npos);

  const Result info = Crema("zoo info bvlc_googlenet " + dir);
  ASSERT_EQ(info.rc, 0) << info.output;
  EXPECT_NE(info.output.find("http://dl.caffe.berkeleyvision.org/bvlc_googlenet.caffemodel"),
            std::string::npos);
  EXPECT_NE(info.output.find("405fc5acd08a3bb12de8ee5e23a96bec22f08204"), std::string::npos);
  EXPECT_NE(info.output.find("preprocessing.crop"), std::string::npos);
  EXPECT_NE(info.output.find("deploy.prototxt"), std::string::npos);

  const Result unknown = Crema("zoo info no_such_net " + dir);
  EXPECT_EQ(unknown.rc, 2);
  EXPECT_NE(unknown.output.find("unknown model \"no_such_net\""), std::string::npos);
  EXPECT_EQ(Crema("zoo frobnicate").rc, 2);
  const Result no_weights = Crema("zoo fetch cifar10_quick " + dir);
  EXPECT_EQ(no_weights.rc, 2);
  EXPECT_NE(no_weights.output.find("no published weights"), std::string::npos);
}

// ---- a tiny HTTP/1.1 server: GET of one file, with or without Range support ----

class HttpServer {
 public:
  HttpServer(std::string body, bool honour_range) : body_(std::move(body)), range_(honour_range) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    socklen_t len = sizeof(addr);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~HttpServer() {
    stop_ = true;
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  int port() const { return port_; }
  // The next response stops after this many body bytes (the connection drops mid-transfer).
  void CutAfter(size_t bytes) { cut_after_ = bytes; }
  std::vector<std::string> ranges() {
    std::lock_guard<std::mutex> lock(mutex_);
    return ranges_;
  }

 private:
  void Serve() {
    while (!stop_) {
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      std::string request;
      char buffer[2048];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(client, buffer, sizeof(buffer), 0);
        if (n <= 0) break;
        request.append(buffer, static_cast<size_t>(n));
      }
      Respond(client, request);
      close(client);
    }
  }
  void Respond(int client, const std::string& request) {
    size_t start = 0;
    std::string range;
    const size_t at = request.find("\r\nRange: bytes=");
    if (at != std::string::npos) {
      range = request.substr(at + 15, request.find("\r\n", at + 2) - at - 15);
      start = std::stoul(range);
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ranges_.push_back(range);
    }
    std::string head;
    if (!range_ || range.empty()) {
      start = 0;
      head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_.size()) + "\r\n";
    } else if (start >= body_.size()) {
      head = "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */" +
             std::to_string(body_.size()) + "\r\nContent-Length: 0\r\n";
      start = body_.size();
    } else {
      head = "HTTP/1.1 206 Partial Content\r\nContent-Length: " +
             std::to_string(body_.size() - start) + "\r\nContent-Range: bytes " +
             std::to_string(start) + "-" + std::to_string(body_.size() - 1) + "/" +
             std::to_string(body_.size()) + "\r\n";
    }
    head += "Connection: close\r\n\r\n";
    std::string out = head + body_.substr(start);
    if (cut_after_ > 0) {
      out = out.substr(0, head.size() + cut_after_);
      cut_after_ = 0;
    }
    for (size_t sent = 0; sent < out.size();) {
      const ssize_t n = send(client, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
  }

  std::string body_;
  bool range_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> cut_after_{0};
  std::mutex mutex_;
  std::vector<std::string> ranges_;
  std::thread thread_;
};

// A models/ folder with one model "tiny" whose weights are `body`, published at `url`.
class ZooFetch : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::TempDir();
    body_.resize(300000);
    for (size_t i = 0; i < body_.size(); ++i) body_[i] = static_cast<char>((i * 7919 + 13) % 251);
    served_ = dir_ + "/served";
    fs::create_directories(served_);
    WriteFile(served_ + "/tiny.caffemodel", body_);
    sha256_ = Digest("sha256sum", served_ + "/tiny.caffemodel");
    ASSERT_EQ(sha256_.size(), 64u) << "sha256sum is needed";
    models_ = dir_ + "/models";
    fs::create_directories(models_ + "/tiny");
  }
  void WriteReadme(const std::string& url, const std::string& checksum_lines) {
    WriteFile(models_ + "/tiny/readme.md",
              "---\nname: Tiny\nweights_url: " + url + "\n" +
                  (checksum_lines.rfind("sha256:", 0) == 0 ? "" : "sha256: \"\"\n") +
                  checksum_lines +
                  "license: none\naccuracy: none\npreprocessing:\n  mean: 0\n  scale: 1\n"
                  "  channel_order: BGR\n  input_size: 1x1\n  crop: none\n---\n# Tiny\n");
  }
  Result Fetch(const std::string& extra = "") {
    return Crema("zoo fetch tiny --models-dir " + models_ + " " + extra);
  }
  std::string Target() const { return models_ + "/tiny/tiny.caffemodel"; }

  std::string dir_, served_, models_, body_, sha256_;
};

TEST_F(ZooFetch, FileUrlAndUrlBase) {
  WriteReadme("https://example.invalid/weights/tiny.caffemodel", "sha256: " + sha256_ + "\n");
  // The published host does not resolve; --url-base points at a local folder (file://).
  const Result r = Fetch("--url-base file://" + served_);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(testing::ReadFile(Target()), body_);
  EXPECT_FALSE(fs::exists(Target() + ".part"));
  EXPECT_NE(r.output.find("verified"), std::string::npos) << r.output;
  // Again: the file is there and verified, nothing downloaded.
  const Result again = Fetch("--url-base file://" + served_);
  EXPECT_EQ(again.rc, 0);
  EXPECT_NE(again.output.find("present and verified"), std::string::npos) << again.output;
}

TEST_F(ZooFetch, Sha1AndPrefixChecksums) {
  const std::string sha1 = Digest("sha1sum", served_ + "/tiny.caffemodel");
  WriteReadme("file://" + served_ + "/tiny.caffemodel", "sha1: " + sha1 + "\n");
  Result r = Fetch();
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find("sha1 " + sha1 + " verified"), std::string::npos) << r.output;
  fs::remove(Target());
  WriteReadme("file://" + served_ + "/tiny.caffemodel",
              "sha256_prefix: " + sha256_.substr(0, 8) + "\n");
  r = Fetch();
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(testing::ReadFile(Target()), body_);
}

TEST_F(ZooFetch, HttpWithAResumedDownload) {
  HttpServer server(body_, /*honour_range=*/true);
  WriteReadme("https://example.invalid/x/tiny.caffemodel", "sha256: " + sha256_ + "\n");
  const std::string base = "--url-base http://127.0.0.1:" + std::to_string(server.port()) + "/m";
  // The first transfer drops after 100,000 bytes: the .part is kept and the error says so.
  server.CutAfter(100000);
  const Result cut = Fetch(base);
  EXPECT_EQ(cut.rc, 1) << cut.output;
  EXPECT_NE(cut.output.find("run the same command again to resume"), std::string::npos)
      << cut.output;
  ASSERT_TRUE(fs::exists(Target() + ".part"));
  EXPECT_EQ(fs::file_size(Target() + ".part"), 100000u);
  EXPECT_FALSE(fs::exists(Target()));
  // The second asks for the rest only.
  const Result rest = Fetch(base);
  ASSERT_EQ(rest.rc, 0) << rest.output;
  EXPECT_NE(rest.output.find("resuming"), std::string::npos) << rest.output;
  EXPECT_EQ(testing::ReadFile(Target()), body_);
  EXPECT_FALSE(fs::exists(Target() + ".part"));
  const std::vector<std::string> ranges = server.ranges();
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "");
  EXPECT_EQ(ranges[1], "100000-");
}

TEST_F(ZooFetch, HttpServerWithoutRangeStartsOver) {
  HttpServer server(body_, /*honour_range=*/false);
  WriteReadme("http://127.0.0.1:" + std::to_string(server.port()) + "/tiny.caffemodel",
              "sha256: " + sha256_ + "\n");
  WriteFile(Target() + ".part", body_.substr(0, 5000));
  const Result r = Fetch();
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(testing::ReadFile(Target()), body_);
  EXPECT_NE(r.output.find("afresh"), std::string::npos) << r.output;
}

TEST_F(ZooFetch, CompletePartIsVerifiedWithoutDownloading) {
  HttpServer server(body_, /*honour_range=*/true);
  WriteReadme("http://127.0.0.1:" + std::to_string(server.port()) + "/tiny.caffemodel",
              "sha256: " + sha256_ + "\n");
  WriteFile(Target() + ".part", body_);
  const Result r = Fetch();
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_EQ(testing::ReadFile(Target()), body_);
}

TEST_F(ZooFetch, ChecksumMismatchRemovesThePart) {
  HttpServer server(body_, /*honour_range=*/true);
  std::string wrong = sha256_;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  WriteReadme("http://127.0.0.1:" + std::to_string(server.port()) + "/tiny.caffemodel",
              "sha256: " + wrong + "\n");
  const Result r = Fetch();
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("checksum mismatch"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(sha256_), std::string::npos) << r.output;  // what was received
  EXPECT_NE(r.output.find("was removed"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(Target()));
  EXPECT_FALSE(fs::exists(Target() + ".part"));
}

TEST_F(ZooFetch, UnverifiedNeedsTheFlag) {
  WriteReadme("file://" + served_ + "/tiny.caffemodel", "");
  const Result refused = Fetch();
  EXPECT_EQ(refused.rc, 2) << refused.output;
  EXPECT_NE(refused.output.find("--allow-unverified"), std::string::npos);
  EXPECT_FALSE(fs::exists(Target()));
  const Result r = Fetch("--allow-unverified");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_NE(r.output.find(sha256_), std::string::npos) << r.output;
  EXPECT_EQ(testing::ReadFile(Target()), body_);
}

TEST_F(ZooFetch, ConnectionRefusedIsAClearError) {
  int port = 0;
  {
    // Bind an ephemeral port and close it: nothing listens there afterwards.
    HttpServer server("", true);
    port = server.port();
  }
  WriteReadme("http://127.0.0.1:" + std::to_string(port) + "/tiny.caffemodel",
              "sha256: " + sha256_ + "\n");
  const Result r = Fetch();
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_NE(r.output.find("error: cannot download http://127.0.0.1:"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("offline?"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(Target() + ".part"));
  EXPECT_FALSE(fs::exists(Target()));
}

}  // namespace
}  // namespace crema
