// Plugins: the example plugin (examples/plugin, ScaledTanh) loaded into this process and into the
// `crema` executable, its attribute helpers, and the errors of loading a bad plugin.
#include "crema/plugin.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "io/npy.hpp"
#include "support/layer_checks.hpp"
#include "support/layer_test.hpp"
#include "support/reference.hpp"
#include "support/run_command.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

const std::string kPluginPath = std::string(CREMA_BINARY_DIR) + "/libcrema_example_plugin.so";
const std::string kExampleNet =
    std::string(CREMA_SOURCE_DIR) + "/examples/plugin/scaled_tanh.prototxt";

// Loads the plugin before any test runs, so the conformance suite below finds ScaledTanh.
class PluginEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kPluginPath)) << kPluginPath << " is not built";
    LoadPlugin(kPluginPath);
  }
};
[[maybe_unused]] ::testing::Environment* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new PluginEnvironment);

}  // namespace
}  // namespace crema

CREMA_LAYER_CONFORMANCE(ScaledTanh,
                        LayerCase("plugin_param { attr { key: 'a' value: '1.7159' } "
                                  "attr { key: 'b' value: '0.6667' } }",
                                  {{2, 3, 4, 5}})
                            .Eltwise(),
                        LayerCase("", {{4, 6}}).Range(-3, 3).Name("defaults"),
                        LayerCase("plugin_param { attr { key: 'a' value: '-2' } "
                                  "attr { key: 'b' value: '0.25' } }",
                                  {{3, 7}})
                            .Range(-4, 4)
                            .Name("negative_a"));

namespace crema {
namespace {

using Result = testing::CommandResult;

Result Crema(const std::string& args, const std::string& env = "") {
  return testing::RunCommand("CREMA_OPENBLAS_FIX=0 CREMA_PLUGIN_PATH= " + env + " " +
                             std::string(CREMA_BINARY_DIR) + "/crema " + args);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PluginTest, RegistersItsLayerTypeInTheSharedRegistry) {
  EXPECT_TRUE(LayerRegistry::Has("ScaledTanh"));
  // Loading the same library again changes nothing and reports its types.
  EXPECT_EQ(LoadPlugin(kPluginPath), std::vector<std::string>{"ScaledTanh"});
  EXPECT_EQ(PluginOfLayerType("ScaledTanh"), kPluginPath);
  EXPECT_EQ(PluginOfLayerType("ReLU"), "");
  const std::vector<PluginInfo> plugins = LoadedPlugins();
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0].path, kPluginPath);
  EXPECT_EQ(plugins[0].types, std::vector<std::string>{"ScaledTanh"});
}

TEST(PluginTest, ScaledTanhValues) {
  const std::vector<double> x = {-3, -0.5, 0, 0.25, 2};
  std::vector<double> y, d;
  for (double v : x) {
    const double t = std::tanh(0.5 * v);
    y.push_back(2 * t);
    d.push_back(2 * 0.5 * (1 - t * t));
  }
  testing::ExpectValues(
      "type: 'ScaledTanh' plugin_param { attr { key: 'a' value: '2' } attr { key: 'b' value: "
      "'0.5' } }",
      x, y, d);
  // Both attributes default to 1: plain tanh.
  std::vector<double> plain;
  for (double v : x) plain.push_back(std::tanh(v));
  testing::ExpectValues("type: 'ScaledTanh'", x, plain, {});
}

TEST(PluginTest, BadAttributesAreConfigErrors) {
  testing::ExpectSetUpError("type: 'ScaledTanh' plugin_param { attr { key: 'a' value: 'abc' } }",
                            {{2, 3}}, "plugin_param.attr \"a\" must be a number, got \"abc\"");
  testing::ExpectSetUpError("type: 'ScaledTanh' plugin_param { attr { key: 'b' value: '' } }",
                            {{2, 3}}, "plugin_param.attr \"b\"");
  testing::ExpectSetUpError("type: 'ScaledTanh' plugin_param { attr { key: 'B' value: '2' } }",
                            {{2, 3}}, "unknown plugin_param.attr \"B\". Did you mean \"b\"?");
}

TEST(PluginTest, GetAttrConvertsAndNamesTheField) {
  const LayerParameter param = testing::ParseLayerParam(
      "name: 'p' type: 'Mine' plugin_param { param_str: 'free text' "
      "attr { key: 'f' value: '0.5' } attr { key: 'i' value: '-7' } "
      "attr { key: 'big' value: '5000000000' } attr { key: 'yes' value: 'true' } "
      "attr { key: 's' value: 'hello' } attr { key: 'bad' value: '1.5x' } }");
  EXPECT_FLOAT_EQ(GetAttr<float>(param, "f"), 0.5f);
  EXPECT_EQ(GetAttr<int32_t>(param, "i"), -7);
  EXPECT_EQ(GetAttr<int64_t>(param, "big"), 5000000000LL);
  EXPECT_TRUE(GetAttr<bool>(param, "yes"));
  EXPECT_EQ(GetAttr<std::string>(param, "s"), "hello");
  EXPECT_EQ(GetAttr<double>(param, "absent", 3.0), 3.0);
  EXPECT_EQ(GetAttr<std::string>(param, "absent", "dflt"), "dflt");
  EXPECT_EQ(param.plugin_param().param_str(), "free text");
  auto expect_error = [&](auto read, const std::string& want) {
    try {
      read();
      ADD_FAILURE() << "expected a ConfigError containing " << want;
    } catch (const ConfigError& e) {
      EXPECT_TRUE(Contains(e.what(), "layer \"p\" (Mine): ")) << e.what();
      EXPECT_TRUE(Contains(e.what(), want)) << e.what();
    }
  };
  expect_error([&] { return GetAttr<int32_t>(param, "big"); }, "\"big\" must be a 32-bit integer");
  expect_error([&] { return GetAttr<int32_t>(param, "f"); }, "\"f\" must be a 32-bit integer");
  expect_error([&] { return GetAttr<double>(param, "bad"); }, "must be a number, got \"1.5x\"");
  expect_error([&] { return GetAttr<bool>(param, "s"); }, "\"s\" must be true or false");
  expect_error([&] { return GetAttr<float>(param, "absent"); }, "\"absent\" is required");
}

TEST(PluginTest, MissingOrBrokenLibraryIsRuntimeErrorWithThePath) {
  const std::string dir = testing::TempDir();
  const std::string missing = dir + "/libnope.so";
  try {
    LoadPlugin(missing);
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_TRUE(Contains(e.what(), missing)) << e.what();
  }
  const std::string broken = dir + "/libbroken.so";
  std::ofstream(broken) << std::string(256, '#');  // long enough for dlopen to read a header
  try {
    LoadPlugin(broken);
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_TRUE(Contains(e.what(), broken)) << e.what();
    EXPECT_TRUE(Contains(e.what(), "invalid ELF header")) << e.what();  // dlopen's own words
  }
}

TEST(PluginTest, TypeAlreadyRegisteredIsConfigError) {
  // A copy of the plugin is another library to dlopen: its ScaledTanh clashes with the first.
  const std::string copy = testing::TempDir() + "/libcopy.so";
  fs::copy_file(kPluginPath, copy);
  try {
    LoadPlugin(copy);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(Contains(e.what(), copy)) << e.what();
    EXPECT_TRUE(Contains(e.what(), "\"ScaledTanh\" is already registered by plugin " + kPluginPath))
        << e.what();
  }
  // The original registration is untouched.
  EXPECT_EQ(PluginOfLayerType("ScaledTanh"), kPluginPath);
  EXPECT_EQ(LoadedPlugins().size(), 1u);
  EXPECT_NE(testing::CreateLayer("name: 'x' type: 'ScaledTanh'"), nullptr);
}

TEST(PluginTest, PluginPathEnvironmentVariable) {
  const std::string dir = testing::TempDir();
  // A folder entry loads its *.so (a link to the loaded plugin: the same library, no clash).
  fs::create_symlink(kPluginPath, dir + "/libexample.so");
  std::ofstream(dir + "/README.txt") << "not a plugin";
  setenv("CREMA_PLUGIN_PATH", (":" + dir + "::" + kPluginPath).c_str(), 1);
  EXPECT_EQ(LoadPluginsFromEnv(), (std::vector<std::string>{"ScaledTanh", "ScaledTanh"}));
  setenv("CREMA_PLUGIN_PATH", (dir + ":" + dir + "/missing.so").c_str(), 1);
  try {
    LoadPluginsFromEnv();
    FAIL() << "expected a RuntimeError";
  } catch (const RuntimeError& e) {
    EXPECT_TRUE(Contains(e.what(), "CREMA_PLUGIN_PATH")) << e.what();
    EXPECT_TRUE(Contains(e.what(), dir + "/missing.so")) << e.what();
  }
  unsetenv("CREMA_PLUGIN_PATH");
  EXPECT_TRUE(LoadPluginsFromEnv().empty());
}

// ---- the crema executable with --plugin ----

TEST(PluginCliTest, InspectWithPlugin) {
  const Result r = Crema("inspect --model " + kExampleNet + " --plugin " + kPluginPath);
  ASSERT_EQ(r.rc, 0) << r.output;
  for (const char* text : {"scaled_tanh_example", "ScaledTanh", "act (2,3)"})
    EXPECT_TRUE(Contains(r.output, text)) << text << " missing from:\n" << r.output;
}

TEST(PluginCliTest, WithoutPluginTheTypeIsUnknownAndTheErrorHintsAtPlugin) {
  const Result r = Crema("inspect --model " + kExampleNet);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(Contains(r.output, "scaled_tanh.prototxt:")) << r.output;
  EXPECT_TRUE(Contains(r.output, "unknown layer type \"ScaledTanh\"")) << r.output;
  EXPECT_TRUE(Contains(r.output, "--plugin")) << r.output;
}

TEST(PluginCliTest, ForwardWithPlugin) {
  const std::string dir = testing::TempDir();
  const float x[6] = {-2, -0.5f, 0, 0.5f, 1, 3};
  WriteNpyFloat32(dir + "/x.npy", {2, 3}, x);
  const Result r = Crema("forward --plugin=" + kPluginPath + " --model " + kExampleNet +
                         " --input data=" + dir + "/x.npy --output_dir " + dir + "/out");
  ASSERT_EQ(r.rc, 0) << r.output;
  const NpyArray out = ReadNpy(dir + "/out/act.npy");
  ASSERT_EQ(out.shape, (std::vector<int64_t>{2, 3}));
  for (int i = 0; i < 6; ++i)
    EXPECT_NEAR(out.values[i], 1.7159 * std::tanh(0.6667 * x[i]), 1e-5) << i;
}

TEST(PluginCliTest, LayersMarksPluginTypes) {
  // Repeated and comma-separated --plugin, and CREMA_PLUGIN_PATH, all load the same library.
  for (const std::string& how :
       {"--plugin " + kPluginPath, "--plugin " + kPluginPath + " --plugin " + kPluginPath,
        "--plugin " + kPluginPath + "," + kPluginPath}) {
    const Result r = Crema("layers " + how);
    ASSERT_EQ(r.rc, 0) << how << "\n" << r.output;
    EXPECT_TRUE(Contains(r.output, "ScaledTanh  (plugin " + kPluginPath + ")\n")) << r.output;
    EXPECT_TRUE(Contains(r.output, "\nReLU\n")) << r.output;
  }
  Result r = Crema("layers", "CREMA_PLUGIN_PATH=" + kPluginPath);
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_TRUE(Contains(r.output, "ScaledTanh  (plugin ")) << r.output;
  r = Crema("layers");
  ASSERT_EQ(r.rc, 0) << r.output;
  EXPECT_FALSE(Contains(r.output, "ScaledTanh")) << r.output;
}

TEST(PluginCliTest, BadPluginPathsAndAttributes) {
  const std::string dir = testing::TempDir();
  Result r = Crema("inspect --model " + kExampleNet + " --plugin " + dir + "/libmissing.so");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, dir + "/libmissing.so")) << r.output;
  r = Crema("layers", "CREMA_PLUGIN_PATH=" + dir + "/gone");
  EXPECT_EQ(r.rc, 1) << r.output;
  EXPECT_TRUE(Contains(r.output, "CREMA_PLUGIN_PATH: " + dir + "/gone")) << r.output;
  // A bad attribute value: one line with the prototxt location, the layer and the key.
  const std::string net = dir + "/bad.prototxt";
  std::ofstream(net) << "name: 'bad'\n"
                        "layer { name: 'data' type: 'Input' top: 'data'\n"
                        "        input_param { shape { dim: 1 dim: 2 } } }\n"
                        "layer { name: 'act' type: 'ScaledTanh' bottom: 'data' top: 'act'\n"
                        "        plugin_param { attr { key: 'b' value: 'fast' } } }\n";
  r = Crema("inspect --model " + net + " --plugin " + kPluginPath);
  EXPECT_EQ(r.rc, 2) << r.output;
  EXPECT_TRUE(std::regex_search(r.output, std::regex("bad\\.prototxt:[0-9]+:[0-9]+: layer \"act\" "
                                                     "\\(ScaledTanh\\): plugin_param.attr \"b\" "
                                                     "must be a number, got \"fast\"")))
      << r.output;
}

TEST(PluginCliTest, HelpMentionsPlugin) {
  for (const char* args : {"--help", "train --help", "layers --help"}) {
    const Result r = Crema(args);
    EXPECT_EQ(r.rc, 0) << r.output;
    EXPECT_TRUE(Contains(r.output, "--plugin")) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace crema
