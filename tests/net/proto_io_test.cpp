#include "crema/proto_io.hpp"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "crema/error.hpp"
#include "crema/proto.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

template <typename E>
std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "(no exception of the expected kind)";
}

std::vector<std::string> FolderContents(const std::string& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

const char kNet[] =
    "name: \"tiny\"\n"                             // 1
    "layer {\n"                                    // 2
    "  name: \"data\"\n"                           // 3
    "  type: \"Input\"\n"                          // 4
    "  top: \"data\"\n"                            // 5
    "  input_param { shape { dim: 1 dim: 3 } }\n"  // 6
    "}\n"                                          // 7
    "layer {\n"                                    // 8
    "  name: \"conv1\"\n"                          // 9
    "  type: \"Convolution\"\n"                    // 10
    "  bottom: \"data\"\n"                         // 11
    "  top: \"conv1\"\n"                           // 12
    "  convolution_param {\n"                      // 13
    "    num_output: 4\n"                          // 14
    "      kernel_size: 3\n"                       // 15
    "  }\n"                                        // 16
    "}\n";                                         // 17

TEST(ProtoIoTest, ParsesAndLocatesNestedFields) {
  const std::string path = WriteTemp("tiny.prototxt", kNet);
  NetParameter net;
  auto source = ReadTextProto(path, &net);
  ASSERT_EQ(net.layer_size(), 2);
  EXPECT_EQ(net.layer(1).convolution_param().kernel_size(0), 3u);
  EXPECT_EQ(source->path(), path);
  EXPECT_EQ(source->Locate(net, "layer[1].convolution_param.kernel_size"), path + ":15:7");
  EXPECT_EQ(source->Locate(net, "layer[1].convolution_param.kernel_size[0]"), path + ":15:7");
  EXPECT_EQ(source->Locate(net, "layer[1].convolution_param"), path + ":13:3");
  EXPECT_EQ(source->Locate(net, "layer[1]"), path + ":8:1");
  EXPECT_EQ(source->Locate(net, "name"), path + ":1:1");
  EXPECT_EQ(source->Locate(net, "layer[0].input_param.shape[0].dim[1]"), path + ":6:32");
  // Unset fields fall back to the nearest enclosing located one, then to the file.
  EXPECT_EQ(source->Locate(net, "layer[1].convolution_param.stride"), path + ":13:3");
  EXPECT_EQ(source->Locate(net, "layer[1].no_such_field"), path + ":8:1");
  EXPECT_EQ(source->Locate(net, "layer[7].name"), path);
  EXPECT_EQ(source->Locate(net, "force_backward"), path);
  EXPECT_EQ(source->Locate(net, "layer[1"), path);
}

TEST(ProtoIoTest, SyntaxErrorHasLineAndColumn) {
  const std::string text =
      "name: \"x\"\n"
      "layer {\n"
      "  name: \"a\"\n"
      "  type \"ReLU\"\n"  // missing ':' before a string value
      "}\n";
  const std::string path = WriteTemp("syntax.prototxt", text);
  NetParameter net;
  const std::string error = ErrorOf<ConfigError>([&] { ReadTextProto(path, &net); });
  EXPECT_EQ(error.rfind(path + ":4:8: ", 0), 0u) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos) << error;  // one line: the first error only
}

// A file that ends inside a block once read "file:2:1: Expected identifier, got: ": the error
// says what is missing and where each open block began.
TEST(ProtoIoTest, FileEndingInsideABlockSaysWhatIsMissing) {
  NetParameter net;
  std::string path = WriteTemp("open1.prototxt",
                               "name: \"x\"\n"
                               "layer { name: \"data\" type: \"Input\" top: \"data\"\n"
                               "  input_param { shape { dim: 1 } } # a } in a comment\n");
  EXPECT_EQ(ErrorOf<ConfigError>([&] { ReadTextProto(path, &net); }),
            path + ":4:1: the file ends inside the block \"layer {\" opened at " + path +
                ":2:1: a closing '}' is missing");
  path = WriteTemp("open2.prototxt",
                   "layer {\n"
                   "  name: \"a}\"\n"
                   "  input_param: < shape { dim: 1 }");
  EXPECT_EQ(ErrorOf<ConfigError>([&] { ReadTextProto(path, &net); }),
            path + ":3:34: the file ends inside 2 blocks: \"input_param <\" opened at " + path +
                ":3:3, inside \"layer {\" opened at " + path +
                ":1:1: 2 closing brackets are missing");
  // Collected the same way (crema validate).
  std::vector<std::string> problems;
  bool syntax_ok = true;
  ParseTextProtoCollecting("layer {\n", "v.prototxt", &net, &problems, &syntax_ok);
  EXPECT_FALSE(syntax_ok);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0],
            "v.prototxt:2:1: the file ends inside the block \"layer {\" opened at "
            "v.prototxt:1:1: a closing '}' is missing");
  // An extra closing brace is not this case.
  EXPECT_EQ(ErrorOf<ConfigError>([&] {
              ParseTextProto("layer { }\n}\n", "e.prototxt", &net);
            }).find("ends inside"),
            std::string::npos);
}
TEST(ProtoIoTest, UnknownFieldSuggestsTheClosestName) {
  const std::string text =
      "layer {\n"
      "  name: \"conv\"\n"
      "  convolution_param {\n"
      "    num_output: 4\n"
      "    kernal_size: 3\n"
      "  }\n"
      "}\n";
  const std::string path = WriteTemp("typo.prototxt", text);
  NetParameter net;
  const std::string error = ErrorOf<ConfigError>([&] { ReadTextProto(path, &net); });
  EXPECT_EQ(error.rfind(path + ":5:5: ", 0), 0u) << error;
  EXPECT_NE(error.find("\"kernal_size\""), std::string::npos) << error;
  EXPECT_NE(error.find("did you mean \"kernel_size\"?"), std::string::npos) << error;

  // Suggestions come from the message being parsed: `lr_mul` inside param {} is ParamSpec's.
  const std::string error2 = ErrorOf<ConfigError>(
      [&] { ParseTextProto("layer { param { lr_mul: 1 } }", "inline", &net); });
  EXPECT_EQ(error2.rfind("inline:1:17: ", 0), 0u) << error2;
  EXPECT_NE(error2.find("did you mean \"lr_mult\"?"), std::string::npos) << error2;

  // Tabs count as protobuf counts them (to the next multiple of 8), as Locate does.
  const std::string error_tab =
      ErrorOf<ConfigError>([&] { ParseTextProto("layer {\n\tnmae: \"x\"\n}\n", "tabbed", &net); });
  EXPECT_EQ(error_tab.rfind("tabbed:2:9: unknown field \"nmae\" in LayerParameter; did you mean "
                            "\"name\"?",
                            0),
            0u)
      << error_tab;

  // Nothing close: no suggestion.
  const std::string error3 =
      ErrorOf<ConfigError>([&] { ParseTextProto("zzzzzzzzzzzz: 1", "inline", &net); });
  EXPECT_EQ(error3.find("did you mean"), std::string::npos) << error3;
}

TEST(ProtoIoTest, UnknownEnumValueSuggestsTheClosestValue) {
  SolverParameter solver;
  const std::string error = ErrorOf<ConfigError>(
      [&] { ParseTextProto("base_lr: 0.1\nsolver_mode: GPPU\n", "solver.prototxt", &solver); });
  EXPECT_EQ(error.rfind("solver.prototxt:2:14: ", 0), 0u) << error;
  EXPECT_NE(error.find("did you mean \"GPU\"?"), std::string::npos) << error;
}

TEST(ProtoIoTest, LegacyV1PrototxtParsesAndLocates) {
  const std::string text =
      "name: \"old\"\n"                                                         // 1
      "input: \"data\"\n"                                                       // 2
      "input_dim: 1 input_dim: 1 input_dim: 8 input_dim: 8\n"                   // 3
      "layers {\n"                                                              // 4
      "  name: \"conv\"\n"                                                      // 5
      "  type: CONVOLUTION\n"                                                   // 6
      "  bottom: \"data\" top: \"conv\"\n"                                      // 7
      "  blobs_lr: 1 blobs_lr: 2\n"                                             // 8
      "  convolution_param { num_output: 2\n"                                   // 9
      "    kernel_size: 3 }\n"                                                  // 10
      "}\n"                                                                     // 11
      "layers { name: \"relu\" type: RELU bottom: \"conv\" top: \"conv\" }\n";  // 12
  const std::string path = WriteTemp("v1.prototxt", text);
  NetParameter net;
  auto source = ReadNetParamsFromTextFile(path, &net);
  ASSERT_EQ(net.layer_size(), 3);
  EXPECT_EQ(net.layer(0).type(), "Input");
  EXPECT_EQ(net.layer(1).type(), "Convolution");
  EXPECT_EQ(net.layer(1).param(1).lr_mult(), 2.f);
  // layer[i] of the upgraded net maps back to the text's `layers[i - 1]` (the Input layer came
  // from the `input` fields).
  EXPECT_EQ(source->Locate(net, "layer[0]"), path + ":2:1");
  EXPECT_EQ(source->Locate(net, "layer[1]"), path + ":4:1");
  EXPECT_EQ(source->Locate(net, "layer[1].convolution_param.kernel_size"), path + ":10:5");
  EXPECT_EQ(source->Locate(net, "layer[2].name"), path + ":12:10");
}

TEST(ProtoIoTest, MissingFileIsARuntimeError) {
  const std::string path = testing::TempDir() + "/does_not_exist.prototxt";
  NetParameter net;
  std::string error = ErrorOf<RuntimeError>([&] { ReadTextProto(path, &net); });
  EXPECT_EQ(error, "cannot read " + path + ": No such file or directory");
  error = ErrorOf<RuntimeError>([&] { ReadBinaryProto(path, &net); });
  EXPECT_EQ(error, "cannot read " + path + ": No such file or directory");
  error = ErrorOf<RuntimeError>([&] { ReadNetParamsFromBinaryFile(path, &net); });
  EXPECT_NE(error.find(path), std::string::npos);
}

TEST(ProtoIoTest, TruncatedBinaryIsAConfigError) {
  NetParameter net;
  net.set_name("truncated");
  LayerParameter* layer = net.add_layer();
  layer->set_name("ip");
  layer->set_type("InnerProduct");
  BlobProto* blob = layer->add_blobs();
  for (int i = 0; i < 100; ++i) blob->add_data(0.5f * i);
  std::string bytes;
  ASSERT_TRUE(net.SerializeToString(&bytes));
  const std::string path = WriteTemp("cut.caffemodel", bytes.substr(0, bytes.size() - 7));
  NetParameter read;
  const std::string error = ErrorOf<ConfigError>([&] { ReadBinaryProto(path, &read); });
  EXPECT_EQ(error, path + ": not a valid NetParameter (truncated or corrupt)");

  const std::string garbage = WriteTemp("garbage.caffemodel", std::string("\xff\xff\xff\xff", 4));
  EXPECT_NE(ErrorOf<ConfigError>([&] { ReadBinaryProto(garbage, &read); }).find("corrupt"),
            std::string::npos);
}

TEST(ProtoIoTest, BinaryAndTextRoundTrip) {
  const std::string folder = testing::TempDir();
  NetParameter net;
  ParseTextProto(kNet, "tiny", &net);
  WriteBinaryProto(net, folder + "/net.caffemodel");
  WriteTextProto(net, folder + "/net.prototxt");
  EXPECT_EQ(FolderContents(folder), (std::vector<std::string>{"net.caffemodel", "net.prototxt"}));
  NetParameter from_binary, from_text;
  ReadBinaryProto(folder + "/net.caffemodel", &from_binary);
  ReadTextProto(folder + "/net.prototxt", &from_text);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(net, from_binary));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(net, from_text));
}

TEST(ProtoIoTest, AtomicWriteReplacesAndLeavesNoTemporary) {
  const std::string folder = testing::TempDir();
  const std::string path = folder + "/out.txt";
  WriteFileAtomically(path, "first");
  WriteFileAtomically(path, "second, longer");
  EXPECT_EQ(testing::ReadFile(path), "second, longer");
  EXPECT_EQ(FolderContents(folder), std::vector<std::string>{"out.txt"});
  WriteFileAtomically(path, "");
  EXPECT_EQ(testing::ReadFile(path), "");
  EXPECT_EQ(fs::file_size(path), 0u);

  // A folder that does not exist: RuntimeError naming the target, and nothing left behind.
  const std::string error =
      ErrorOf<RuntimeError>([&] { WriteFileAtomically(folder + "/missing/out.txt", "x"); });
  EXPECT_EQ(error.rfind("cannot write " + folder + "/missing/out.txt: ", 0), 0u) << error;
  // A target that is a folder: rename fails, and the temporary is removed.
  fs::create_directory(folder + "/taken");
  fs::create_directory(folder + "/taken/x");
  EXPECT_NE(ErrorOf<RuntimeError>([&] { WriteFileAtomically(folder + "/taken", "x"); }),
            "(no exception of the expected kind)");
  EXPECT_EQ(FolderContents(folder), (std::vector<std::string>{"out.txt", "taken"}));
}

TEST(ProtoIoTest, SolverTextIsUpgraded) {
  const std::string path = WriteTemp(
      "solver.prototxt", "net: \"train.prototxt\"\nbase_lr: 0.01\nsolver_type: ADAGRAD\n");
  SolverParameter solver;
  auto source = ReadSolverParamsFromTextFile(path, &solver);
  EXPECT_EQ(solver.type(), "AdaGrad");
  EXPECT_FALSE(solver.has_solver_type());
  EXPECT_EQ(source->Locate(solver, "base_lr"), path + ":2:1");
}

TEST(ProtoIoTest, ReferenceCaffemodelRoundTripsByteForByte) {
  CREMA_REQUIRE_REFERENCE(path, "bvlc/solvers/lenet_init.caffemodel");
  NetParameter net;
  ReadBinaryProto(path, &net);
  EXPECT_GT(net.layer_size(), 0);
  const std::string copy = testing::TempDir() + "/lenet_copy.caffemodel";
  WriteBinaryProto(net, copy);
  const std::string original_bytes = testing::ReadFile(path);
  ASSERT_FALSE(original_bytes.empty());
  EXPECT_TRUE(original_bytes == testing::ReadFile(copy));

  // The upgrade path leaves a current-format model unchanged.
  NetParameter upgraded;
  ReadNetParamsFromBinaryFile(path, &upgraded);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(net, upgraded));
}

TEST(ProtoIoTest, ReferenceSqueezeNetLocatesThroughTheInputUpgrade) {
  CREMA_REQUIRE_REFERENCE(path, "real/models/squeezenet_v1.0/SqueezeNet_deploy.prototxt");
  NetParameter net;
  auto source = ReadNetParamsFromTextFile(path, &net);
  ASSERT_GT(net.layer_size(), 1);
  EXPECT_EQ(net.layer(0).name(), "input");
  EXPECT_EQ(source->Locate(net, "layer[0]"), path + ":2:1");  // the `input:` line
  EXPECT_EQ(source->Locate(net, "layer[1]"), path + ":7:1");  // the first `layer {`
}

}  // namespace
}  // namespace crema
