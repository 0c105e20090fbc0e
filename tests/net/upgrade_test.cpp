#include "net/upgrade.hpp"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>

#include "crema/error.hpp"
#include "crema/proto.hpp"
#include "crema/proto_io.hpp"
#include "support/reference.hpp"

namespace crema {
namespace {

template <typename M>
M Parse(const std::string& text) {
  M message;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &message)) << text;
  return message;
}

// Equality with a readable diff on failure.
::testing::AssertionResult SameProto(const google::protobuf::Message& expected,
                                     const google::protobuf::Message& actual) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string diff;
  differencer.ReportDifferencesToString(&diff);
  if (differencer.Compare(expected, actual)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << diff << "\nactual:\n" << actual.DebugString();
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

TEST(UpgradeTest, V1NetBecomesV2) {
  NetParameter net = Parse<NetParameter>(R"(
    name: "LeNet"
    layers {
      name: "mnist" type: DATA top: "data" top: "label"
      data_param { source: "train_lmdb" backend: LMDB batch_size: 64 scale: 0.00390625
                   mean_file: "mean.binaryproto" crop_size: 24 mirror: true }
      include { phase: TRAIN }
    }
    layers {
      name: "conv1" type: CONVOLUTION bottom: "data" top: "conv1"
      blobs_lr: 1 blobs_lr: 2 weight_decay: 1 weight_decay: 0
      param: "conv1_w" param: "conv1_b" blob_share_mode: PERMISSIVE
      convolution_param { num_output: 20 kernel_size: 5 stride: 1
                          weight_filler { type: "xavier" } }
    }
    layers {
      name: "pool1" type: POOLING bottom: "conv1" top: "pool1"
      pooling_param { pool: MAX kernel_size: 2 stride: 2 }
      exclude { phase: TEST stage: "deploy" }
    }
    layers { name: "relu1" type: RELU bottom: "pool1" top: "pool1" relu_param { negative_slope: 0.1 } }
    layers { name: "drop" type: DROPOUT bottom: "pool1" top: "pool1" dropout_param { dropout_ratio: 0.3 } }
    layers {
      name: "ip" type: INNER_PRODUCT bottom: "pool1" top: "ip"
      blobs_lr: 1 blobs_lr: 2
      inner_product_param { num_output: 10 bias_filler { type: "constant" } }
    }
    layers { name: "cat" type: CONCAT bottom: "ip" bottom: "ip" top: "cat" concat_param { concat_dim: 1 } }
    layers {
      name: "loss" type: SOFTMAX_LOSS bottom: "ip" bottom: "label" top: "loss"
      loss_weight: 2 loss_param { ignore_label: 255 }
    }
    layers { name: "acc" type: ACCURACY bottom: "ip" bottom: "label" top: "acc"
             accuracy_param { top_k: 5 } }
  )");
  const NetParameter expected = Parse<NetParameter>(R"(
    name: "LeNet"
    layer {
      name: "mnist" type: "Data" top: "data" top: "label"
      data_param { source: "train_lmdb" backend: LMDB batch_size: 64 }
      transform_param { scale: 0.00390625 mean_file: "mean.binaryproto" crop_size: 24 mirror: true }
      include { phase: TRAIN }
    }
    layer {
      name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
      param { name: "conv1_w" share_mode: PERMISSIVE lr_mult: 1 decay_mult: 1 }
      param { name: "conv1_b" lr_mult: 2 decay_mult: 0 }
      convolution_param { num_output: 20 kernel_size: 5 stride: 1
                          weight_filler { type: "xavier" } }
    }
    layer {
      name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
      pooling_param { pool: MAX kernel_size: 2 stride: 2 }
      exclude { phase: TEST stage: "deploy" }
    }
    layer { name: "relu1" type: "ReLU" bottom: "pool1" top: "pool1" relu_param { negative_slope: 0.1 } }
    layer { name: "drop" type: "Dropout" bottom: "pool1" top: "pool1" dropout_param { dropout_ratio: 0.3 } }
    layer {
      name: "ip" type: "InnerProduct" bottom: "pool1" top: "ip"
      param { lr_mult: 1 } param { lr_mult: 2 }
      inner_product_param { num_output: 10 bias_filler { type: "constant" } }
    }
    layer { name: "cat" type: "Concat" bottom: "ip" bottom: "ip" top: "cat" concat_param { concat_dim: 1 } }
    layer {
      name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
      loss_weight: 2 loss_param { ignore_label: 255 }
    }
    layer { name: "acc" type: "Accuracy" bottom: "ip" bottom: "label" top: "acc"
            accuracy_param { top_k: 5 } }
  )");
  EXPECT_TRUE(NetNeedsUpgrade(net));
  EXPECT_TRUE(NetNeedsDataUpgrade(net));
  EXPECT_TRUE(NetNeedsV1ToV2Upgrade(net));
  EXPECT_FALSE(NetNeedsV0ToV1Upgrade(net));
  EXPECT_TRUE(UpgradeNetAsNeeded("lenet.prototxt", &net));
  EXPECT_TRUE(SameProto(expected, net));
  EXPECT_FALSE(NetNeedsUpgrade(net));
  EXPECT_FALSE(UpgradeNetAsNeeded("lenet.prototxt", &net));
}

TEST(UpgradeTest, V1TransformParamAndAllTypesCarryOver) {
  NetParameter net = Parse<NetParameter>(R"(
    layers { name: "img" type: IMAGE_DATA top: "data" top: "label"
             image_data_param { source: "list.txt" batch_size: 4 scale: 0.5 new_height: 32 }
             transform_param { mean_value: 104 } }
    layers { name: "win" type: WINDOW_DATA top: "w" top: "wl"
             window_data_param { source: "win.txt" mirror: true crop_size: 8 fg_threshold: 0.6 } }
    layers { name: "slice" type: SLICE bottom: "data" top: "a" top: "b"
             slice_param { slice_dim: 1 slice_point: 1 } }
    layers { name: "elt" type: ELTWISE bottom: "a" bottom: "b" top: "e"
             eltwise_param { operation: MAX } }
    layers { name: "dummy" type: DUMMY_DATA top: "d" dummy_data_param { num: 1 channels: 2 } }
  )");
  UpgradeNetAsNeeded("x.prototxt", &net);
  const NetParameter expected = Parse<NetParameter>(R"(
    layer { name: "img" type: "ImageData" top: "data" top: "label"
            image_data_param { source: "list.txt" batch_size: 4 new_height: 32 }
            transform_param { mean_value: 104 scale: 0.5 } }
    layer { name: "win" type: "WindowData" top: "w" top: "wl"
            window_data_param { source: "win.txt" fg_threshold: 0.6 }
            transform_param { mirror: true crop_size: 8 } }
    layer { name: "slice" type: "Slice" bottom: "data" top: "a" top: "b"
            slice_param { slice_dim: 1 slice_point: 1 } }
    layer { name: "elt" type: "Eltwise" bottom: "a" bottom: "b" top: "e"
            eltwise_param { operation: MAX } }
    layer { name: "dummy" type: "DummyData" top: "d" dummy_data_param { num: 1 channels: 2 } }
  )");
  EXPECT_TRUE(SameProto(expected, net));
}

TEST(UpgradeTest, EveryV1LayerTypeHasAName) {
  const auto* enum_type = V1LayerParameter::LayerType_descriptor();
  for (int i = 0; i < enum_type->value_count(); ++i) {
    const auto type = static_cast<V1LayerParameter::LayerType>(enum_type->value(i)->number());
    const std::string name = UpgradeV1LayerType(type);
    EXPECT_EQ(name.empty(), type == V1LayerParameter::NONE) << enum_type->value(i)->name();
  }
  EXPECT_STREQ(UpgradeV1LayerType(V1LayerParameter::SOFTMAX_LOSS), "SoftmaxWithLoss");
  EXPECT_STREQ(UpgradeV1LayerType(V1LayerParameter::HDF5_DATA), "HDF5Data");
  EXPECT_STREQ(UpgradeV1LayerType(V1LayerParameter::IM2COL), "Im2col");
  EXPECT_STREQ(UpgradeV1LayerType(V1LayerParameter::TANH), "TanH");
}

TEST(UpgradeTest, V0NetWithPaddingLayer) {
  NetParameter net = Parse<NetParameter>(R"(
    name: "CaffeNet"
    input: "data"
    input_dim: 10 input_dim: 3 input_dim: 227 input_dim: 227
    layers {
      layer { name: "pad1" type: "padding" pad: 2 }
      bottom: "data" top: "pad1"
    }
    layers {
      layer { name: "conv1" type: "conv" num_output: 96 kernelsize: 11 stride: 4 group: 2
              biasterm: false weight_filler { type: "gaussian" std: 0.01 }
              blobs_lr: 1 weight_decay: 1 }
      bottom: "pad1" top: "conv1"
    }
    layers { layer { name: "relu1" type: "relu" } bottom: "conv1" top: "conv1" }
    layers { layer { name: "norm1" type: "lrn" local_size: 5 alpha: 0.0001 beta: 0.75 k: 2 }
             bottom: "conv1" top: "norm1" }
    layers { layer { name: "pad2" type: "padding" pad: 1 } bottom: "norm1" top: "pad2" }
    layers { layer { name: "pool1" type: "pool" pool: AVE kernelsize: 3 stride: 2 }
             bottom: "pad2" top: "pool1" }
    layers { layer { name: "fc" type: "innerproduct" num_output: 10
                     bias_filler { type: "constant" value: 0.1 } }
             bottom: "pool1" top: "fc" }
    layers { layer { name: "drop" type: "dropout" dropout_ratio: 0.4 } bottom: "fc" top: "fc" }
    layers { layer { name: "prob" type: "softmax" } bottom: "fc" top: "prob" }
  )");
  const NetParameter expected = Parse<NetParameter>(R"(
    name: "CaffeNet"
    layer { name: "input" type: "Input" top: "data"
            input_param { shape { dim: 10 dim: 3 dim: 227 dim: 227 } } }
    layer {
      name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
      param { lr_mult: 1 decay_mult: 1 }
      convolution_param { num_output: 96 bias_term: false pad: 2 kernel_size: 11 group: 2
                          stride: 4 weight_filler { type: "gaussian" std: 0.01 } }
    }
    layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
    layer { name: "norm1" type: "LRN" bottom: "conv1" top: "norm1"
            lrn_param { local_size: 5 alpha: 0.0001 beta: 0.75 k: 2 } }
    layer { name: "pool1" type: "Pooling" bottom: "norm1" top: "pool1"
            pooling_param { pool: AVE pad: 1 kernel_size: 3 stride: 2 } }
    layer { name: "fc" type: "InnerProduct" bottom: "pool1" top: "fc"
            inner_product_param { num_output: 10 bias_filler { type: "constant" value: 0.1 } } }
    layer { name: "drop" type: "Dropout" bottom: "fc" top: "fc" dropout_param { dropout_ratio: 0.4 } }
    layer { name: "prob" type: "Softmax" bottom: "fc" top: "prob" }
  )");
  EXPECT_TRUE(NetNeedsV0ToV1Upgrade(net));
  EXPECT_TRUE(UpgradeNetAsNeeded("caffenet_v0.prototxt", &net));
  EXPECT_TRUE(SameProto(expected, net));
}

TEST(UpgradeTest, V0DataLayerFields) {
  NetParameter net = Parse<NetParameter>(R"(
    layers {
      layer { name: "data" type: "data" source: "train_leveldb" batchsize: 256 rand_skip: 10
              meanfile: "mean.binaryproto" cropsize: 227 mirror: true scale: 0.5 }
      top: "data" top: "label"
    }
    layers {
      layer { name: "win" type: "window_data" source: "w.txt" batchsize: 8 det_fg_threshold: 0.6
              det_bg_threshold: 0.4 det_fg_fraction: 0.3 det_context_pad: 16
              det_crop_mode: "square" }
      top: "w" top: "wl"
    }
    layers {
      layer { name: "img" type: "images" source: "l.txt" batchsize: 2 shuffle_images: true
              new_height: 64 new_width: 48 }
      top: "i" top: "il"
    }
    layers { layer { name: "cat" type: "concat" concat_dim: 0 } bottom: "data" bottom: "i" top: "c" }
    layers { layer { name: "out" type: "hdf5_output" hdf5_output_param { file_name: "o.h5" } }
             bottom: "c" bottom: "label" }
    layers { layer { name: "loss" type: "infogain_loss" source: "H.binaryproto" }
             bottom: "c" bottom: "label" }
  )");
  UpgradeNetAsNeeded("v0.prototxt", &net);
  const NetParameter expected = Parse<NetParameter>(R"(
    layer { name: "data" type: "Data" top: "data" top: "label"
            data_param { source: "train_leveldb" batch_size: 256 rand_skip: 10 }
            transform_param { scale: 0.5 mirror: true crop_size: 227 mean_file: "mean.binaryproto" } }
    layer { name: "win" type: "WindowData" top: "w" top: "wl"
            window_data_param { source: "w.txt" batch_size: 8 fg_threshold: 0.6 bg_threshold: 0.4
                                fg_fraction: 0.3 context_pad: 16 crop_mode: "square" } }
    layer { name: "img" type: "ImageData" top: "i" top: "il"
            image_data_param { source: "l.txt" batch_size: 2 shuffle: true new_height: 64
                               new_width: 48 } }
    layer { name: "cat" type: "Concat" bottom: "data" bottom: "i" top: "c"
            concat_param { concat_dim: 0 } }
    layer { name: "out" type: "HDF5Output" bottom: "c" bottom: "label"
            hdf5_output_param { file_name: "o.h5" } }
    layer { name: "loss" type: "InfogainLoss" bottom: "c" bottom: "label"
            infogain_loss_param { source: "H.binaryproto" } }
  )");
  EXPECT_TRUE(SameProto(expected, net));
}

TEST(UpgradeTest, V0ErrorsNameTheSource) {
  NetParameter padding_to_relu = Parse<NetParameter>(R"(
    input: "data"
    layers { layer { name: "pad" type: "padding" pad: 1 } bottom: "data" top: "p" }
    layers { layer { name: "relu" type: "relu" } bottom: "p" top: "r" }
  )");
  std::string error = ErrorOf([&] { UpgradeNetAsNeeded("old.prototxt", &padding_to_relu); });
  EXPECT_NE(error.find("old.prototxt"), std::string::npos) << error;
  EXPECT_NE(error.find("relu"), std::string::npos) << error;

  NetParameter unknown_type = Parse<NetParameter>(R"(
    layers { layer { name: "x" type: "frobnicate" } top: "x" }
  )");
  error = ErrorOf([&] { UpgradeNetAsNeeded("old.prototxt", &unknown_type); });
  EXPECT_NE(error.find("old.prototxt"), std::string::npos) << error;
  EXPECT_NE(error.find("frobnicate"), std::string::npos) << error;

  NetParameter unknown_blob = Parse<NetParameter>(R"(
    layers { layer { name: "relu" type: "relu" } bottom: "nowhere" top: "r" }
  )");
  error = ErrorOf([&] { UpgradeNetAsNeeded("old.prototxt", &unknown_blob); });
  EXPECT_NE(error.find("nowhere"), std::string::npos) << error;
}

TEST(UpgradeTest, MixedLayerAndLayersIsAnError) {
  NetParameter net = Parse<NetParameter>(R"(
    layer { name: "a" type: "ReLU" }
    layers { name: "b" type: RELU }
  )");
  const std::string error = ErrorOf([&] { UpgradeNetAsNeeded("mixed.prototxt", &net); });
  EXPECT_NE(error.find("mixed.prototxt"), std::string::npos) << error;
}

TEST(UpgradeTest, InputDimBecomesInputLayer) {
  NetParameter net = Parse<NetParameter>(R"(
    name: "two_inputs"
    input: "data" input: "label"
    input_dim: 2 input_dim: 3 input_dim: 8 input_dim: 8
    input_dim: 2 input_dim: 1 input_dim: 1 input_dim: 1
    layer { name: "relu" type: "ReLU" bottom: "data" top: "data" }
  )");
  const NetParameter expected = Parse<NetParameter>(R"(
    name: "two_inputs"
    layer { name: "input" type: "Input" top: "data" top: "label"
            input_param { shape { dim: 2 dim: 3 dim: 8 dim: 8 } shape { dim: 2 dim: 1 dim: 1 dim: 1 } } }
    layer { name: "relu" type: "ReLU" bottom: "data" top: "data" }
  )");
  EXPECT_TRUE(NetNeedsInputUpgrade(net));
  EXPECT_TRUE(UpgradeNetAsNeeded("in.prototxt", &net));
  EXPECT_TRUE(SameProto(expected, net));
}

TEST(UpgradeTest, InputShapeBecomesInputLayer) {
  NetParameter net = Parse<NetParameter>(R"(
    input: "data"
    input_shape { dim: 1 dim: 3 dim: 224 dim: 224 }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 4 kernel_size: 3 } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
  )");
  const NetParameter expected = Parse<NetParameter>(R"(
    layer { name: "input" type: "Input" top: "data"
            input_param { shape { dim: 1 dim: 3 dim: 224 dim: 224 } } }
    layer { name: "conv" type: "Convolution" bottom: "data" top: "conv"
            convolution_param { num_output: 4 kernel_size: 3 } }
    layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
  )");
  EXPECT_TRUE(UpgradeNetAsNeeded("in.prototxt", &net));
  EXPECT_TRUE(SameProto(expected, net));
}

TEST(UpgradeTest, InputWithoutShapeIsDropped) {
  // A legacy caffemodel lists input names only; Caffe just strips them.
  NetParameter net = Parse<NetParameter>(R"(
    input: "data"
    layer { name: "relu" type: "ReLU" bottom: "data" top: "r" }
  )");
  EXPECT_TRUE(UpgradeNetAsNeeded("old.caffemodel", &net));
  EXPECT_TRUE(SameProto(Parse<NetParameter>(R"(
    layer { name: "relu" type: "ReLU" bottom: "data" top: "r" })"),
                        net));
}

TEST(UpgradeTest, BadInputDimsAreErrors) {
  NetParameter short_dims = Parse<NetParameter>(R"(
    input: "data" input_dim: 1 input_dim: 3 input_dim: 8
  )");
  std::string error = ErrorOf([&] { UpgradeNetAsNeeded("bad.prototxt", &short_dims); });
  EXPECT_NE(error.find("bad.prototxt"), std::string::npos) << error;
  EXPECT_NE(error.find("input_dim"), std::string::npos) << error;

  NetParameter missing_shape = Parse<NetParameter>(R"(
    input: "a" input: "b" input_shape { dim: 1 }
  )");
  error = ErrorOf([&] { UpgradeNetAsNeeded("bad.prototxt", &missing_shape); });
  EXPECT_NE(error.find("input_shape"), std::string::npos) << error;

  NetParameter both = Parse<NetParameter>(R"(
    input: "a" input_shape { dim: 1 } input_dim: 1 input_dim: 1 input_dim: 1 input_dim: 1
  )");
  error = ErrorOf([&] { UpgradeNetAsNeeded("bad.prototxt", &both); });
  EXPECT_NE(error.find("bad.prototxt"), std::string::npos) << error;
}

TEST(UpgradeTest, V1NetWithInputFields) {
  NetParameter net = Parse<NetParameter>(R"(
    input: "data" input_dim: 1 input_dim: 1 input_dim: 4 input_dim: 4
    layers { name: "relu" type: RELU bottom: "data" top: "r" }
  )");
  UpgradeNetAsNeeded("v1.prototxt", &net);
  EXPECT_TRUE(SameProto(Parse<NetParameter>(R"(
    layer { name: "input" type: "Input" top: "data"
            input_param { shape { dim: 1 dim: 1 dim: 4 dim: 4 } } }
    layer { name: "relu" type: "ReLU" bottom: "data" top: "r" })"),
                        net));
}

TEST(UpgradeTest, BatchNormParamSpecsAreFrozen) {
  NetParameter net = Parse<NetParameter>(R"(
    layer { name: "bn0" type: "BatchNorm" bottom: "x" top: "x"
            param { lr_mult: 0 } param { lr_mult: 0 } param { lr_mult: 0 } }
    layer { name: "bn1" type: "BatchNorm" bottom: "x" top: "x"
            param { name: "m" lr_mult: 1 decay_mult: 1 } param { name: "v" } param { name: "c" } }
    layer { name: "bn2" type: "BatchNorm" bottom: "x" top: "x" }
    layer { name: "conv" type: "Convolution" bottom: "x" top: "y"
            param { lr_mult: 1 } param { lr_mult: 2 } param { lr_mult: 3 } }
  )");
  const NetParameter expected = Parse<NetParameter>(R"(
    layer { name: "bn0" type: "BatchNorm" bottom: "x" top: "x"
            param { lr_mult: 0 decay_mult: 0 } param { lr_mult: 0 decay_mult: 0 }
            param { lr_mult: 0 decay_mult: 0 } }
    layer { name: "bn1" type: "BatchNorm" bottom: "x" top: "x"
            param { name: "m" lr_mult: 0 decay_mult: 0 } param { name: "v" lr_mult: 0 decay_mult: 0 }
            param { name: "c" lr_mult: 0 decay_mult: 0 } }
    layer { name: "bn2" type: "BatchNorm" bottom: "x" top: "x" }
    layer { name: "conv" type: "Convolution" bottom: "x" top: "y"
            param { lr_mult: 1 } param { lr_mult: 2 } param { lr_mult: 3 } }
  )");
  EXPECT_TRUE(NetNeedsBatchNormUpgrade(net));
  EXPECT_TRUE(UpgradeNetAsNeeded("bn.prototxt", &net));
  EXPECT_TRUE(SameProto(expected, net));
  EXPECT_FALSE(NetNeedsBatchNormUpgrade(
      Parse<NetParameter>(R"(layer { name: "bn" type: "BatchNorm" param { lr_mult: 0 } })")));
}

TEST(UpgradeTest, CurrentNetIsLeftAlone) {
  NetParameter net = Parse<NetParameter>(R"(
    name: "current"
    layer { name: "input" type: "Input" top: "data" input_param { shape { dim: 1 } } }
    layer { name: "relu" type: "ReLU" bottom: "data" top: "data" }
  )");
  const NetParameter original = net;
  EXPECT_FALSE(NetNeedsUpgrade(net));
  EXPECT_FALSE(UpgradeNetAsNeeded("current.prototxt", &net));
  EXPECT_TRUE(SameProto(original, net));
}

TEST(UpgradeTest, SolverTypeEnumBecomesString) {
  const std::pair<const char*, const char*> cases[] = {
      {"SGD", "SGD"},         {"NESTEROV", "Nesterov"}, {"ADAGRAD", "AdaGrad"},
      {"RMSPROP", "RMSProp"}, {"ADADELTA", "AdaDelta"}, {"ADAM", "Adam"}};
  for (const auto& [enum_name, type] : cases) {
    SolverParameter solver =
        Parse<SolverParameter>(StrCat("base_lr: 0.01 solver_type: ", enum_name));
    EXPECT_TRUE(SolverNeedsTypeUpgrade(solver));
    EXPECT_TRUE(UpgradeSolverAsNeeded("solver.prototxt", &solver));
    EXPECT_TRUE(
        SameProto(Parse<SolverParameter>(StrCat("base_lr: 0.01 type: \"", type, "\"")), solver));
  }
}

TEST(UpgradeTest, SolverTypeConflicts) {
  SolverParameter same = Parse<SolverParameter>(R"(solver_type: ADAM type: "Adam")");
  EXPECT_TRUE(UpgradeSolverAsNeeded("solver.prototxt", &same));
  EXPECT_EQ(same.type(), "Adam");
  EXPECT_FALSE(same.has_solver_type());

  SolverParameter different = Parse<SolverParameter>(R"(solver_type: NESTEROV type: "Adam")");
  const std::string error = ErrorOf([&] { UpgradeSolverAsNeeded("solver.prototxt", &different); });
  EXPECT_NE(error.find("solver.prototxt"), std::string::npos) << error;
  EXPECT_NE(error.find("NESTEROV"), std::string::npos) << error;

  SolverParameter current = Parse<SolverParameter>(R"(type: "RMSProp" base_lr: 0.1)");
  EXPECT_FALSE(SolverNeedsTypeUpgrade(current));
  EXPECT_FALSE(UpgradeSolverAsNeeded("solver.prototxt", &current));
  EXPECT_EQ(current.type(), "RMSProp");
}

TEST(UpgradeTest, SolverInlineNetsAreUpgraded) {
  SolverParameter solver = Parse<SolverParameter>(R"(
    net_param { layers { name: "relu" type: RELU bottom: "x" top: "x" } }
    test_net_param { input: "x" input_dim: 1 input_dim: 1 input_dim: 1 input_dim: 1 }
  )");
  EXPECT_TRUE(UpgradeSolverAsNeeded("solver.prototxt", &solver));
  EXPECT_EQ(solver.net_param().layer_size(), 1);
  EXPECT_EQ(solver.net_param().layer(0).type(), "ReLU");
  EXPECT_EQ(solver.test_net_param(0).layer(0).type(), "Input");
}

TEST(UpgradeTest, SqueezeNetDeployGetsAnInputLayer) {
  CREMA_REQUIRE_REFERENCE(path, "real/models/squeezenet_v1.0/SqueezeNet_deploy.prototxt");
  NetParameter raw;
  ReadTextProto(path, &raw);
  ASSERT_GT(raw.input_size(), 0);
  NetParameter net;
  ReadNetParamsFromTextFile(path, &net);
  EXPECT_EQ(net.input_size(), 0);
  EXPECT_EQ(net.input_dim_size(), 0);
  ASSERT_EQ(net.layer_size(), raw.layer_size() + 1);
  EXPECT_TRUE(SameProto(Parse<LayerParameter>(R"(
    name: "input" type: "Input" top: "data"
    input_param { shape { dim: 1 dim: 3 dim: 227 dim: 227 } })"),
                        net.layer(0)));
  for (int i = 0; i < raw.layer_size(); ++i) {
    EXPECT_TRUE(SameProto(raw.layer(i), net.layer(i + 1))) << i;
  }
  EXPECT_EQ(net.layer(1).name(), "conv1");
  EXPECT_FALSE(NetNeedsUpgrade(net));
}

}  // namespace
}  // namespace crema

namespace crema {
namespace {

TEST(UpgradeTest, SnapshotPrefixFollowsTheSolverFile) {
  const std::string dir = testing::TempDir();
  SolverParameter param;
  UpgradeSnapshotPrefix(dir + "/lenet_solver.prototxt", &param);
  EXPECT_EQ(param.snapshot_prefix(), dir + "/lenet_solver");
  param.set_snapshot_prefix(dir);  // an existing folder
  UpgradeSnapshotPrefix("models/lenet_solver.prototxt", &param);
  EXPECT_EQ(param.snapshot_prefix(), dir + "/lenet_solver");
  param.set_snapshot_prefix("snapshots/lenet");  // a plain prefix is kept
  UpgradeSnapshotPrefix("models/lenet_solver.prototxt", &param);
  EXPECT_EQ(param.snapshot_prefix(), "snapshots/lenet");
}

}  // namespace
}  // namespace crema
