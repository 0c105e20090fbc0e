// Broken and hostile files given to the `crema` CLI: every one must end with a non-zero exit
// (1 or 2, not a signal), one "error:" line naming the file, nothing else alarming on the output
// (no "internal error", no glog "Check failed", no sanitizer report) and no output file written.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "crema/layer_registry.hpp"
#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "io/db.hpp"
#include "onnx/onnx.hpp"
#include "support/requires.hpp"
#include "tools/image_tool_util.hpp"

namespace crema {
namespace {

namespace fs = std::filesystem;
using testing::RunCrema;
using testing::WriteText;

const char kDeploy[] = R"(name: "small"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 6 dim: 6 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
        convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: "gaussian" std: 0.1 } } }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip"
        inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
)";

std::string Bytes(const google::protobuf::Message& message) {
  std::string bytes;
  message.SerializeToString(&bytes);
  return bytes;
}

class HostileFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* type : {"Input", "Convolution", "InnerProduct", "Softmax", "Data"}) {
      if (!LayerRegistry::Has(type)) GTEST_SKIP() << type << " not registered";
    }
    dir_ = ::testing::TempDir() + "/hostile_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    deploy_ = Path("deploy.prototxt");
    WriteText(deploy_, kDeploy);
    NetParameter param;
    ParseTextProto(kDeploy, "deploy", &param);
    NetOptions options;
    options.verbose = false;
    Net net(param, options);
    net.ToProto(&weights_);
    weights_path_ = Path("good.caffemodel");
    WriteText(weights_path_, Bytes(weights_));
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string Write(const std::string& name, const std::string& bytes) const {
    WriteText(Path(name), bytes);
    return Path(name);
  }
  // The good weights with one change made by `edit` to the conv layer (layer 1).
  std::string WeightsWith(const std::string& name,
                          const std::function<void(LayerParameter*)>& edit) const {
    NetParameter weights = weights_;
    edit(weights.mutable_layer(1));
    return Write(name, Bytes(weights));
  }

  // Runs crema; checks the outcome described at the top. `culprit` must appear in the error
  // line; `outputs` must not exist afterwards.
  void ExpectRejected(const std::string& args, const std::string& culprit,
                      const std::vector<std::string>& outputs = {}) {
    SCOPED_TRACE("crema " + args);
    const auto r = RunCrema(args);
    EXPECT_TRUE(r.rc == 1 || r.rc == 2) << "exit " << r.rc << "\n" << r.output;
    std::istringstream lines(r.output);
    std::string line;
    int errors = 0;
    while (std::getline(lines, line)) {
      if (line.rfind("error: ", 0) == 0) {
        ++errors;
        EXPECT_NE(line.find(culprit), std::string::npos)
            << "does not name " << culprit << ": " << line;
      }
      EXPECT_EQ(line.find("internal error"), std::string::npos) << line;
      EXPECT_EQ(line.find("Check failed"), std::string::npos) << line;
      EXPECT_EQ(line.find("Sanitizer"), std::string::npos) << line;
      EXPECT_EQ(line.find("terminate called"), std::string::npos) << line;
    }
    EXPECT_EQ(errors, 1) << r.output;
    for (const std::string& output : outputs) EXPECT_FALSE(fs::exists(output)) << output;
  }

  void ExpectForwardRejects(const std::string& weights) {
    ExpectRejected(
        "forward --model " + deploy_ + " --weights " + weights + " --output_dir " + Path("out"),
        fs::path(weights).filename().string(), {Path("out")});
  }
  void ExpectNetRejected(const std::string& name, const std::string& text) {
    const std::string path = Write(name, text);
    ExpectRejected("forward --model " + path + " --output_dir " + Path("out"), name, {Path("out")});
  }

  std::string dir_, deploy_, weights_path_;
  NetParameter weights_;
};

TEST_F(HostileFilesTest, TruncatedAndGarbageWeights) {
  const std::string good = Bytes(weights_);
  ExpectForwardRejects(Write("truncated.caffemodel", good.substr(0, good.size() / 2)));
  ExpectForwardRejects(Write("garbage.caffemodel", std::string("\xff\xfe\x13garbage\x00\x01", 12)));
  ExpectForwardRejects(Write("empty_tail.caffemodel", good + std::string("\x0a\xff\xff\xff\x0f")));
  const std::string out = Path("converted.caffemodel");
  ExpectRejected("convert-weights --fp16 " + Path("truncated.caffemodel") + " " + out,
                 "truncated.caffemodel", {out});
}

TEST_F(HostileFilesTest, WeightsWhoseValuesDoNotFitTheirShapes) {
  ExpectForwardRejects(WeightsWith("size_mismatch.caffemodel", [](LayerParameter* conv) {
    conv->mutable_blobs(0)->mutable_data()->RemoveLast();
  }));
  ExpectForwardRejects(WeightsWith("int64_overflow.caffemodel", [](LayerParameter* conv) {
    BlobShape* shape = conv->mutable_blobs(0)->mutable_shape();
    shape->Clear();
    for (int i = 0; i < 3; ++i) shape->add_dim(int64_t{1} << 40);
  }));
  ExpectForwardRejects(WeightsWith("negative_dim.caffemodel", [](LayerParameter* conv) {
    conv->mutable_blobs(0)->mutable_shape()->set_dim(0, -2);
  }));
  ExpectForwardRejects(WeightsWith(
      "param_count.caffemodel", [](LayerParameter* conv) { conv->mutable_blobs()->RemoveLast(); }));
  ExpectForwardRejects(WeightsWith("legacy_overflow.caffemodel", [](LayerParameter* conv) {
    BlobProto* blob = conv->mutable_blobs(0);
    blob->clear_shape();
    blob->set_num(1 << 30);
    blob->set_channels(1 << 30);
    blob->set_height(1 << 30);
    blob->set_width(1 << 30);
  }));
}

TEST_F(HostileFilesTest, HostileNetPrototxts) {
  const std::string input = "layer { name: \"d\" type: \"Input\" top: \"d\" input_param { shape { ";
  ExpectNetRejected("overflow.prototxt", input + "dim: 4611686018427387904 dim: 4 dim: 4 } } }\n");
  ExpectNetRejected("negative.prototxt", input + "dim: 2 dim: -3 } } }\n");
  ExpectNetRejected("dangling.prototxt",
                    input +
                        "dim: 2 dim: 3 } } }\n"
                        "layer { name: \"r\" type: \"ReLU\" bottom: \"nowhere\" top: \"r\" }\n");
  ExpectNetRejected("cycle.prototxt",
                    "layer { name: \"a\" type: \"ReLU\" bottom: \"b\" top: \"a\" }\n"
                    "layer { name: \"b\" type: \"ReLU\" bottom: \"a\" top: \"b\" }\n");
  std::string deep = "layer { name: \"x\" type: \"ReLU\" ";
  for (int i = 0; i < 10000; ++i) deep += "relu_param { ";
  for (int i = 0; i < 10000; ++i) deep += "} ";
  ExpectNetRejected("deep.prototxt", deep + "}\n");
  // validate skips unknown fields (to list them all), so nested unknown messages recurse.
  std::string unknown = "layer { name: \"x\" type: \"ReLU\" ";
  for (int i = 0; i < 10000; ++i) unknown += "nothing { ";
  for (int i = 0; i < 10000; ++i) unknown += "} ";
  const std::string path = Write("deep_unknown.prototxt", unknown + "}\n");
  const auto r = RunCrema("validate " + path);
  EXPECT_TRUE(r.rc == 1 || r.rc == 2) << r.rc << "\n" << r.output;
  EXPECT_NE(r.output.find("deep_unknown.prototxt:1:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("nested more than 100 levels"), std::string::npos) << r.output;
}

TEST_F(HostileFilesTest, SolverStateOfAnotherNet) {
  WriteText(Path("train.prototxt"),
            "layer { name: \"data\" type: \"DummyData\" top: \"data\" top: \"label\"\n"
            "  dummy_data_param { shape { dim: 2 dim: 4 } shape { dim: 2 }\n"
            "    data_filler { type: \"gaussian\" } } }\n"
            "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
            "  inner_product_param { num_output: 3 weight_filler { type: \"xavier\" } } }\n"
            "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" "
            "top: \"loss\" }\n");
  const std::string solver =
      Write("solver.prototxt", "net: \"" + Path("train.prototxt") +
                                   "\"\nbase_lr: 0.01\nmomentum: 0.9\nlr_policy: \"fixed\"\n"
                                   "max_iter: 2\nsnapshot_prefix: \"" +
                                   Path("snap") + "\"\n");
  SolverState other;
  other.set_iter(1);
  BlobProto* history = other.add_history();
  history->mutable_shape()->add_dim(7);
  for (int i = 0; i < 7; ++i) history->add_data(0);
  const std::string state = Write("other.solverstate", Bytes(other));
  ExpectRejected("train --solver " + solver + " --snapshot " + state, "other.solverstate",
                 {Path("snap_iter_2.caffemodel"), Path("snap_iter_2.solverstate")});
  const std::string garbage = Write("garbage.solverstate", "\x08\x80\x80\x80");
  ExpectRejected("train --solver " + solver + " --snapshot " + garbage, "garbage.solverstate",
                 {Path("snap_iter_2.caffemodel")});
}

TEST_F(HostileFilesTest, DatumOfTheWrongSize) {
  const std::string db_path = Path("bad_lmdb");
  {
    auto db = db::OpenDB(db::Backend::kLmdb, db_path, db::Mode::kNew);
    auto txn = db->NewTransaction();
    Datum datum;
    datum.set_channels(3);
    datum.set_height(6);
    datum.set_width(6);
    datum.set_data(std::string(50, '\x07'));  // 108 expected
    txn->Put("00000000", datum.SerializeAsString());
    txn->Commit();
  }
  const std::string net =
      Write("data_net.prototxt",
            "layer { name: \"data\" type: \"Data\" top: \"data\" top: \"label\"\n"
            "  data_param { source: \"" +
                db_path +
                "\" backend: LMDB batch_size: 1 } }\n"
                "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"data\" top: \"ip\"\n"
                "  inner_product_param { num_output: 2 } }\n");
  const std::string no_weights = Write("empty.caffemodel", "");
  ExpectRejected("test --model " + net + " --weights " + no_weights + " --iterations 1",
                 "bad_lmdb");
}

TEST_F(HostileFilesTest, BrokenImages) {
  CREMA_SKIP_WITHOUT_OPENCV();
  // classify reports an image it cannot read in its row of the results (and carries on with the
  // others), then exits 1: the row must name the image and say why.
  auto classify = [&](const std::string& image, const std::string& why) {
    SCOPED_TRACE(image);
    const auto r =
        RunCrema("classify --model " + deploy_ + " --weights " + weights_path_ + " " + image);
    EXPECT_EQ(r.rc, 1) << r.output;
    EXPECT_NE(r.output.find(fs::path(image).filename().string()), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("internal error"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("Sanitizer"), std::string::npos) << r.output;
  };
  classify(Write("zero.png", ""), "cannot decode the image");
  // A PNG header claiming 2^31-1 x 2^31-1 pixels, and one of 30000 x 30000, with no pixel data.
  for (uint32_t side : {0x7fffffffu, 30000u}) {
    std::string png = "\x89PNG\r\n\x1a\n";
    std::string ihdr;
    testing::PngPut32(&ihdr, side);
    testing::PngPut32(&ihdr, side);
    ihdr += std::string{8, 2, 0, 0, 0};
    testing::PngChunk(&png, "IHDR", ihdr);
    testing::PngChunk(&png, "IEND", "");
    classify(Write("huge" + std::to_string(side) + ".png", png),
             "the image header declares " + std::to_string(side) + " x " + std::to_string(side) +
                 " pixels");
  }
  const std::string results = Path("results.txt");
  // A mean .binaryproto whose values don't fill its shape.
  BlobProto mean;
  for (int d : {1, 3, 6, 6}) mean.mutable_shape()->add_dim(d);
  for (int i = 0; i < 10; ++i) mean.add_data(1);
  const std::string mean_file = Write("short_mean.binaryproto", Bytes(mean));
  std::vector<uint8_t> pixels(6 * 6 * 3, 100);
  testing::WritePng(Path("ok.png"), 6, 6, 3, pixels);
  ExpectRejected("classify --model " + deploy_ + " --weights " + weights_path_ + " --mean_file " +
                     mean_file + " --out " + results + " " + Path("ok.png"),
                 "short_mean.binaryproto", {results});
}

class HostileOnnxTest : public HostileFilesTest {
 protected:
  onnx::ModelProto Exported() {
    NetParameter param;
    ParseTextProto(kDeploy, "deploy", &param);
    NetOptions options;
    options.override_state = true;
    options.state.set_phase(TEST);
    options.verbose = false;
    Net net(param, options);
    onnx::ModelProto model;
    ExportOnnx(net, OnnxExportOptions(), &model);
    return model;
  }
  void ExpectImportRejects(const std::string& name, const onnx::ModelProto& model) {
    const std::string path = Write(name, Bytes(model));
    const std::string out_model = Path("imported.prototxt");
    const std::string out_weights = Path("imported.caffemodel");
    ExpectRejected(
        "import-onnx " + path + " --out_model " + out_model + " --out_weights " + out_weights, name,
        {out_model, out_weights});
  }
};

TEST_F(HostileOnnxTest, CycleMissingInputAndDeepNesting) {
  const onnx::ModelProto good = Exported();
  ASSERT_GE(good.graph().node_size(), 2);
  onnx::ModelProto cycle = good;
  onnx::GraphProto* graph = cycle.mutable_graph();
  *graph->mutable_node(0)->mutable_input(0) = graph->node(graph->node_size() - 1).output(0);
  ExpectImportRejects("cycle.onnx", cycle);

  onnx::ModelProto missing = good;
  *missing.mutable_graph()->mutable_node(1)->mutable_input(0) = "nowhere";
  ExpectImportRejects("missing_input.onnx", missing);

  // 10000 nested groups of an unknown field (100) after a valid model: protobuf recurses once
  // per group when skipping them.
  std::string deep = Bytes(good);
  for (int i = 0; i < 10000; ++i) deep += "\xa3\x06";  // field 100, start group
  for (int i = 0; i < 10000; ++i) deep += "\xa4\x06";  // field 100, end group
  const std::string deep_path = Write("deep.onnx", deep);
  ExpectRejected("import-onnx " + deep_path + " --out_model " + Path("imported.prototxt") +
                     " --out_weights " + Path("imported.caffemodel"),
                 "deep.onnx", {Path("imported.prototxt"), Path("imported.caffemodel")});
  ExpectImportRejects("garbage.onnx", onnx::ModelProto());
}

TEST_F(HostileFilesTest, ListPathsEscapingRootFolder) {
  CREMA_SKIP_WITHOUT_OPENCV();
  if (!LayerRegistry::Has("ImageData")) GTEST_SKIP() << "ImageData not registered";
  fs::create_directories(Path("root/cat"));
  std::vector<uint8_t> pixels(6 * 6 * 3, 50);
  testing::WritePng(Path("root/cat/1.png"), 6, 6, 3, pixels);
  testing::WritePng(Path("outside.png"), 6, 6, 3, pixels);
  const std::string list = Write("list.txt", "cat/1.png 0\ncat/../../outside.png 1\n");
  const std::string net =
      Write("image_net.prototxt",
            "layer { name: \"data\" type: \"ImageData\" top: \"data\" top: \"label\"\n"
            "  image_data_param { source: \"" +
                list + "\" root_folder: \"" + Path("root/") + "\" batch_size: 2 } }\n");
  // Allowed by default (Caffe's behaviour), refused with the flag, naming the list and line 2.
  const std::string args =
      "--model " + net + " --weights " + Write("empty.caffemodel", "") + " --iterations 1";
  const auto allowed = RunCrema("test " + args);
  EXPECT_EQ(allowed.rc, 0) << allowed.output;
  ExpectRejected("test --forbid_path_escape " + args, "list.txt:2");
}

}  // namespace
}  // namespace crema
