// Writes the seed corpora of the fuzz targets: SEEDS/<target>/<name>, small valid files of each
// format made with crema's own writers from the small net of fuzz_support and from models/.
// Usage: crema_fuzz_seeds SOURCE_DIR SEEDS_DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "crema/net.hpp"
#include "crema/proto_io.hpp"
#include "fuzz_support.hpp"
#include "io/data_transformer.hpp"
#include "onnx/onnx.hpp"

namespace fs = std::filesystem;
using namespace crema;

namespace {

fs::path seeds_root;

void Put(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path folder = seeds_root / target;
  fs::create_directories(folder);
  std::ofstream(folder / name, std::ios::binary) << bytes;
}

std::string Serialized(const google::protobuf::Message& message) {
  std::string bytes;
  message.SerializeToString(&bytes);
  return bytes;
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

NetParameter SmallNet() {
  NetParameter param;
  ParseTextProto(fuzz::kSmallNet, "small net", &param);
  return param;
}

// The small net without its label and loss: what ONNX export takes.
NetParameter SmallDeployNet() {
  NetParameter param = SmallNet();
  param.mutable_layer()->RemoveLast();
  LayerParameter* input = param.mutable_layer(0);
  input->mutable_top()->RemoveLast();
  input->mutable_input_param()->mutable_shape()->RemoveLast();
  return param;
}

std::unique_ptr<Net> Build(const NetParameter& param) {
  NetOptions options;
  options.override_state = true;
  options.state.set_phase(TEST);
  options.verbose = false;
  return std::make_unique<Net>(param, options);
}

void PrototxtSeeds(const fs::path& source_dir) {
  Put("prototxt_fuzzer", "small.prototxt", fuzz::kSmallNet);
  for (const auto& entry : fs::recursive_directory_iterator(source_dir / "models")) {
    if (entry.path().extension() != ".prototxt") continue;
    const std::string name =
        entry.path().parent_path().filename().string() + "_" + entry.path().filename().string();
    Put("prototxt_fuzzer", name, ReadText(entry.path()));
  }
  // Legacy V1 layers and net-level input fields, which the upgrade rewrites.
  Put("prototxt_fuzzer", "v1.prototxt",
      "name: \"v1\" input: \"data\" input_dim: 1 input_dim: 2 input_dim: 5 input_dim: 5\n"
      "layers { name: \"conv\" type: CONVOLUTION bottom: \"data\" top: \"conv\"\n"
      "  blobs_lr: 1 blobs_lr: 2 convolution_param { num_output: 3 kernel_size: 2 } }\n"
      "layers { name: \"pool\" type: POOLING bottom: \"conv\" top: \"pool\"\n"
      "  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }\n");
}

void WeightSeeds() {
  NetParameter weights;
  Build(SmallNet())->ToProto(&weights);
  Put("caffemodel_fuzzer", "small.caffemodel", Serialized(weights));
  // Legacy 4-D blob shapes (num/channels/height/width) and double values.
  for (LayerParameter& layer : *weights.mutable_layer()) {
    for (BlobProto& blob : *layer.mutable_blobs()) {
      std::vector<int64_t> dims(blob.shape().dim().begin(), blob.shape().dim().end());
      while (dims.size() < 4) dims.insert(dims.begin(), 1);
      blob.clear_shape();
      blob.set_num(static_cast<int>(dims[0]));
      blob.set_channels(static_cast<int>(dims[1]));
      blob.set_height(static_cast<int>(dims[2]));
      blob.set_width(static_cast<int>(dims[3]));
      for (float v : blob.data()) blob.add_double_data(v);
      blob.clear_data();
    }
  }
  Put("caffemodel_fuzzer", "legacy.caffemodel", Serialized(weights));

  Blob mean(std::vector<int>{1, 3, 4, 4});
  for (int64_t i = 0; i < mean.count(); ++i) mean.mutable_cpu_data<float>()[i] = 0.5f * i;
  BlobProto proto;
  mean.ToProto(&proto);
  Put("binaryproto_fuzzer", "mean.binaryproto", Serialized(proto));
  proto.clear_shape();
  proto.set_num(1);
  proto.set_channels(3);
  proto.set_height(4);
  proto.set_width(4);
  Put("binaryproto_fuzzer", "legacy.binaryproto", Serialized(proto));
}

void SolverStateSeeds() {
  std::unique_ptr<Net> net = Build(SmallNet());
  for (int histories : {1, 2}) {
    SolverState state;
    state.set_iter(3);
    state.set_current_step(1);
    state.set_learned_net("fuzz.caffemodel");
    for (int copy = 0; copy < histories; ++copy) {
      for (const Blob* param : net->learnable_params()) {
        Blob zeros(param->shape());
        zeros.SetDataZero();
        zeros.ToProto(state.add_history());
      }
    }
    Put("solverstate_fuzzer", StrCat("history", histories, ".solverstate"), Serialized(state));
  }
}

void ImageSeeds() {
  std::vector<uint8_t> planes(3 * 8 * 8);
  for (size_t i = 0; i < planes.size(); ++i) planes[i] = static_cast<uint8_t>(i * 7);
  Datum raw;
  raw.set_channels(3);
  raw.set_height(8);
  raw.set_width(8);
  raw.set_label(1);
  raw.set_data(planes.data(), planes.size());
  Put("datum_fuzzer", "raw.datum", Serialized(raw));
  Datum floats;
  floats.set_channels(1);
  floats.set_height(5);
  floats.set_width(5);
  for (int i = 0; i < 25; ++i) floats.add_float_data(0.25f * i);
  Put("datum_fuzzer", "float.datum", Serialized(floats));
  const struct {
    const char* extension;
    int channels;
  } formats[] = {{".png", 3}, {".jpg", 3}, {".png", 1}, {".bmp", 3}};
  for (const auto& format : formats) {
    std::string encoded;
    try {
      encoded = EncodeImage(planes.data(), format.channels, 8, 8, format.extension);
    } catch (const RuntimeError& e) {
      std::fprintf(stderr, "seeds: no %s seed: %s\n", format.extension, e.what());
      continue;
    }
    const std::string name = StrCat(format.channels, "c", format.extension);
    Put("image_fuzzer", name, encoded);
    Datum datum;
    datum.set_encoded(true);
    datum.set_label(2);
    datum.set_data(encoded);
    Put("datum_fuzzer", name + ".datum", Serialized(datum));
  }
}

void OnnxSeeds(const fs::path& source_dir) {
  std::vector<NetParameter> nets = {SmallDeployNet()};
  NetParameter lenet;
  ReadNetParamsFromTextFile((source_dir / "models/lenet/lenet.prototxt").string(), &lenet);
  nets.push_back(lenet);
  for (size_t i = 0; i < nets.size(); ++i) {
    onnx::ModelProto model;
    ExportOnnx(*Build(nets[i]), OnnxExportOptions(), &model);
    Put("onnx_fuzzer", StrCat("net", i, ".onnx"), Serialized(model));
  }
}

// Detection annotations: a VOC file, SSD's JSON and TXT boxes, a COCO file, a label map, and an
// AnnotatedDatum with two boxes.
void AnnotationSeeds() {
  Put("annotation_fuzzer", "voc.xml",
      "<?xml version=\"1.0\"?>\n<annotation>\n  <size><width>100</width><height>80</height>"
      "<depth>3</depth></size>\n  <!-- one object -->\n  <object><name>circle</name>"
      "<difficult>0</difficult>\n    <bndbox><xmin>10</xmin><ymin>20.5</ymin><xmax>60</xmax>"
      "<ymax>70</ymax></bndbox></object>\n  <object><name>sq&amp;uare</name><bndbox><xmin>1"
      "</xmin><ymin>2</ymin><xmax>3</xmax><ymax>4</ymax></bndbox></object>\n</annotation>\n");
  Put("annotation_fuzzer", "ssd.json",
      "{\"image\": {\"width\": 100, \"height\": 80}, \"annotation\": [{\"bbox\": "
      "[10, 20, 30, 40], \"category_id\": 1, \"iscrowd\": 0}]}\n");
  Put("annotation_fuzzer", "boxes.txt", "1 10 20 40 60\n2 0 0 99 79\n");
  Put("annotation_fuzzer", "coco.json",
      "{\"images\": [{\"id\": 7, \"file_name\": \"a.jpg\", \"width\": 100, \"height\": "
      "80}], \"annotations\": [{\"image_id\": 7, \"category_id\": 1, \"bbox\": [1, 2, 30, "
      "40], \"iscrowd\": 0}], \"categories\": [{\"id\": 1, \"name\": \"circle\"}]}\n");
  Put("annotation_fuzzer", "labelmap.prototxt",
      "item { name: \"background\" label: 0 display_name: \"background\" }\n"
      "item { name: \"circle\" label: 1 display_name: \"circle\" }\n");
  AnnotatedDatum record;
  record.set_type(AnnotatedDatum::BBOX);
  for (int label : {1, 2}) {
    AnnotationGroup* group = record.add_annotation_group();
    group->set_group_label(label);
    NormalizedBBox* box = group->add_annotation()->mutable_bbox();
    box->set_xmin(0.1f * label);
    box->set_ymin(0.2f);
    box->set_xmax(0.5f + 0.1f * label);
    box->set_ymax(0.9f);
  }
  Put("annotation_fuzzer", "record.annotated_datum", Serialized(record));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOURCE_DIR SEEDS_DIR\n", argv[0]);
    return 2;
  }
  seeds_root = fs::absolute(argv[2]);
  const fs::path source_dir = fs::absolute(argv[1]);
  fuzz::Init();
  try {
    PrototxtSeeds(source_dir);
    WeightSeeds();
    SolverStateSeeds();
    ImageSeeds();
    OnnxSeeds(source_dir);
    AnnotationSeeds();
  } catch (const Error& e) {
    std::fprintf(stderr, "seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
