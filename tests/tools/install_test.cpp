// `cmake --install` of this build into a temporary prefix, used as a new user would: the layout
// (CLI, libcrema, headers with crema.pb.h, crema.proto, CMake package, pkg-config file, bash
// completion, the Python package when built); the installed CLI runs from the prefix; and
// examples/embed, a CMake project of its own, finds the package with find_package(crema CONFIG),
// builds, trains LeNet on Fashion-MNIST through the Solver API and runs a forward, also when
// built with pkg-config's flags instead. Fashion-MNIST: Debian's dataset-fashion-mnist (its test
// images, converted by the installed CLI).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "support/run_command.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using Result = testing::CommandResult;

const fs::path kFashionMnist = "/usr/share/datasets/fashion-mnist";

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Quote(const fs::path& path) { return "'" + path.string() + "'"; }

// Where the dynamic loader finds libcrema for `program` ("" when it does not).
fs::path LoadedLibcrema(const fs::path& program) {
  const Result ldd = testing::RunCommand("ldd " + Quote(program));
  std::smatch m;
  if (!std::regex_search(ldd.output, m, std::regex("libcrema\\.so[.0-9]* => (\\S+)"))) return "";
  return fs::canonical(m[1].str());
}

class InstallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
#ifndef CREMA_SANITIZED
    dir_ = new fs::path(fs::path(::testing::TempDir()) /
                        ("crema_install_test." + std::to_string(getpid())));
    fs::remove_all(*dir_);
    fs::create_directories(*dir_);
    install_ = new Result(testing::RunCommand("cmake --install " + Quote(CREMA_BINARY_DIR) +
                                              " --prefix " + Quote(Prefix())));
#endif
  }
  static void TearDownTestSuite() {
    if (dir_ != nullptr && !::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(*dir_);
  }
  void SetUp() override {
    if (install_ == nullptr)
      GTEST_SKIP() << "a sanitizer build's library cannot be linked by a plain program";
    ASSERT_EQ(install_->rc, 0) << install_->output;
  }
  static fs::path Prefix() { return *dir_ / "prefix"; }
  static fs::path Lib() { return Prefix() / CREMA_INSTALL_LIBDIR; }

  // The quickstart's LeNet solver and net, reading an LMDB that the installed crema converts from
  // Debian's Fashion-MNIST test set (10,000 images: quicker to convert than the 60,000 training
  // images, and enough for 30 iterations; the accuracy is measured on its first batch).
  static fs::path LeNetSolver() {
    const fs::path db = *dir_ / "fashion_mnist_t10k_lmdb";
    if (!fs::exists(db)) {
      const Result convert = testing::RunCommand(
          "CREMA_OPENBLAS_FIX=0 " + Quote(Prefix() / "bin/crema") + " convert-mnist " +
          Quote(kFashionMnist / "t10k-images-idx3-ubyte.gz") + " " +
          Quote(kFashionMnist / "t10k-labels-idx1-ubyte.gz") + " " + Quote(db));
      EXPECT_EQ(convert.rc, 0) << convert.output;
    }
    const std::string models = std::string(CREMA_SOURCE_DIR) + "/models/lenet/";
    std::string net = ReadText(models + "lenet_train_test.prototxt");
    net = std::regex_replace(net, std::regex("data/fashion_mnist/fashion_mnist_t(est|rain)_lmdb"),
                             db.string());
    std::ofstream(*dir_ / "lenet_train_test.prototxt") << net;
    std::string solver = ReadText(models + "lenet_solver.prototxt");
    solver = std::regex_replace(solver, std::regex("models/lenet/lenet_train_test.prototxt"),
                                (*dir_ / "lenet_train_test.prototxt").string());
    solver = std::regex_replace(solver, std::regex("models/lenet/snapshots/lenet"),
                                (*dir_ / "lenet").string());
    std::ofstream(*dir_ / "lenet_solver.prototxt") << solver;
    return *dir_ / "lenet_solver.prototxt";
  }

  // Runs crema-embed: 30 iterations, then the deploy net on a test batch; checks its output.
  static void RunEmbed(const fs::path& program, const std::string& environment = "") {
    const Result run = testing::RunCommand(
        "cd " + Quote(*dir_) + " && " + environment + " CREMA_OPENBLAS_FIX=0 " + Quote(program) +
        " " + Quote(LeNetSolver()) + " " +
        Quote(std::string(CREMA_SOURCE_DIR) + "/models/lenet/lenet.prototxt") + " 30");
    ASSERT_EQ(run.rc, 0) << run.output;
    EXPECT_NE(run.output.find("iteration 30, loss "), std::string::npos) << run.output;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(run.output, m,
                                  std::regex("deploy net: 100 test images, accuracy ([0-9.]+)")))
        << run.output;
    EXPECT_GT(std::stod(m[1]), 0.4) << "LeNet learned nothing in 30 iterations: " << run.output;
  }

  static fs::path* dir_;
  static Result* install_;
};

fs::path* InstallTest::dir_ = nullptr;
Result* InstallTest::install_ = nullptr;

TEST_F(InstallTest, Layout) {
  for (const fs::path& file :
       {Prefix() / "bin/crema", Lib() / "libcrema.so", Prefix() / "include/crema/net.hpp",
        Prefix() / "include/crema/solver.hpp", Prefix() / "include/crema/proto_io.hpp",
        Prefix() / "include/crema/crema.pb.h", Prefix() / "share/crema/proto/crema.proto",
        Lib() / "cmake/crema/cremaConfig.cmake", Lib() / "cmake/crema/cremaConfigVersion.cmake",
        Lib() / "cmake/crema/crema_targets.cmake", Lib() / "pkgconfig/crema.pc",
        Prefix() / "share/bash-completion/completions/crema"})
    EXPECT_TRUE(fs::exists(file)) << file << " was not installed";
  EXPECT_EQ(ReadText(Prefix() / "share/bash-completion/completions/crema"),
            ReadText(fs::path(CREMA_BINARY_DIR) / "completions/crema"));
#ifdef CREMA_PYTHON_INSTALL_DIR
  const fs::path package = Prefix() / CREMA_PYTHON_INSTALL_DIR / "crema";
  EXPECT_TRUE(fs::exists(package / "__init__.py"));
  EXPECT_TRUE(fs::exists(package / "proto/crema_pb2.py"));
  const Result python = testing::RunCommand(
      "cd " + Quote(*dir_) + " && PYTHONPATH=" + Quote(Prefix() / CREMA_PYTHON_INSTALL_DIR) + " " +
      CREMA_PYTHON_EXECUTABLE + " -c 'import crema; print(crema.__file__, crema.__version__)'");
  EXPECT_EQ(python.rc, 0) << python.output;
  EXPECT_NE(python.output.find(package.string()), std::string::npos) << python.output;
#endif
}

TEST_F(InstallTest, CliRunsFromThePrefix) {
  const Result version = testing::RunCommand(Quote(Prefix() / "bin/crema") + " --version");
  ASSERT_EQ(version.rc, 0) << version.output;
  EXPECT_TRUE(std::regex_search(version.output, std::regex("^crema 0\\.1\\.0 \\(git [0-9a-f]+")))
      << version.output;
  for (const char* line : {"\nCUDA: ", "\ncuDNN: ", "\noneDNN: "})
    EXPECT_NE(version.output.find(line), std::string::npos) << version.output;
  // libcrema from the prefix, not from the build folder; every library found.
  EXPECT_EQ(LoadedLibcrema(Prefix() / "bin/crema"), fs::canonical(Lib() / "libcrema.so"));
  const Result ldd = testing::RunCommand("ldd " + Quote(Prefix() / "bin/crema"));
  EXPECT_EQ(ldd.output.find("not found"), std::string::npos) << ldd.output;
}

TEST_F(InstallTest, EmbedExampleWithFindPackage) {
  if (!fs::exists(kFashionMnist)) GTEST_SKIP() << kFashionMnist << " is missing";
  const fs::path build = *dir_ / "embed-build";
  const Result configure = testing::RunCommand(
      "cmake -S " + Quote(std::string(CREMA_SOURCE_DIR) + "/examples/embed") + " -B " +
      Quote(build) + " -DCMAKE_PREFIX_PATH=" + Quote(Prefix()) + " -DCMAKE_BUILD_TYPE=Release");
  ASSERT_EQ(configure.rc, 0) << configure.output;
  const Result make = testing::RunCommand("cmake --build " + Quote(build));
  ASSERT_EQ(make.rc, 0) << make.output;
  EXPECT_EQ(LoadedLibcrema(build / "crema-embed"), fs::canonical(Lib() / "libcrema.so"));
  RunEmbed(build / "crema-embed");
}

TEST_F(InstallTest, EmbedExampleWithPkgConfig) {
  if (!fs::exists(kFashionMnist)) GTEST_SKIP() << kFashionMnist << " is missing";
  const std::string pkg_config = "PKG_CONFIG_PATH=" + Quote(Lib() / "pkgconfig") + " pkg-config ";
  const Result version = testing::RunCommand(pkg_config + "--modversion crema");
  ASSERT_EQ(version.rc, 0) << version.output;
  EXPECT_EQ(version.output, "0.1.0\n");
  const Result cflags = testing::RunCommand(pkg_config + "--cflags crema");
  EXPECT_NE(cflags.output.find("-I"), std::string::npos) << cflags.output;
  const fs::path program = *dir_ / "crema-embed-pc";
  const Result compile = testing::RunCommand(
      "c++ -std=c++17 -O1 " + Quote(std::string(CREMA_SOURCE_DIR) + "/examples/embed/embed.cpp") +
      " -o " + Quote(program) + " $(" + pkg_config + "--cflags --libs crema)");
  ASSERT_EQ(compile.rc, 0) << compile.output;
  RunEmbed(program, "LD_LIBRARY_PATH=" + Quote(Lib()));
}

}  // namespace
}  // namespace crema
