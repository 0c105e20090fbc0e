#!/usr/bin/python3
"""Writes the prototxts of a small SSD for the synthetic shapes set (Debian's python3, stdlib only).

  make_nets.py --num-classes 4 --out DIR [--data DIR] [--name ssd_shapes]

writes DIR/<name>_train_test.prototxt (AnnotatedData -> backbone -> MultiBoxLoss in TRAIN;
DetectionOutput -> DetectionEvaluate in TEST) and DIR/<name>_deploy.prototxt (Input ->
DetectionOutput). num_classes counts the background (label 0). The backbone is seven 3x3
convolutions with BatchNorm + Scale + ReLU; four feature maps (16x16, 8x8, 4x4, 2x2 of a
128x128 input) carry SSD heads with four priors per cell.
"""
import argparse
import os

SIZE = 128
# (layer, channels, stride); the ones named in HEADS feed detection heads.
BACKBONE = [("conv1", 16, 2), ("conv2", 32, 2), ("conv3", 64, 2), ("conv4", 64, 1),
            ("conv5", 128, 2), ("conv6", 128, 2), ("conv7", 128, 2)]
# feature map, min_size, max_size, step (pixels of the input)
HEADS = [("conv4", 20, 40, 8), ("conv5", 40, 64, 16), ("conv6", 64, 96, 32), ("conv7", 96, 128, 64)]
PRIORS_PER_CELL = 4  # min, sqrt(min*max), aspect ratios 2 and 1/2
MEAN, SCALE = 127.5, 0.007843


def layer(name, type_, bottoms, tops, body="", include=None):
    text = f'layer {{\n  name: "{name}"\n  type: "{type_}"\n'
    text += "".join(f'  bottom: "{b}"\n' for b in bottoms)
    text += "".join(f'  top: "{t}"\n' for t in tops)
    if include:
        text += f"  include {{ phase: {include} }}\n"
    if body:
        text += "".join(f"  {line}\n" for line in body.strip().splitlines())
    return text + "}\n"


def conv(name, bottom, channels, kernel, stride, pad, with_bn):
    text = layer(name, "Convolution", [bottom], [name], f"""
param {{ lr_mult: 1 decay_mult: 1 }}
convolution_param {{
  num_output: {channels} kernel_size: {kernel} stride: {stride} pad: {pad} bias_term: {str(not with_bn).lower()}
  weight_filler {{ type: "msra" }}
}}""" + ("" if with_bn else "\nparam { lr_mult: 2 decay_mult: 0 }"))
    if with_bn:
        text += layer(name + "_bn", "BatchNorm", [name], [name])
        text += layer(name + "_scale", "Scale", [name], [name], "scale_param { bias_term: true }")
        text += layer(name + "_relu", "ReLU", [name], [name])
    return text


def backbone():
    text, bottom = "", "data"
    for name, channels, stride in BACKBONE:
        text += conv(name, bottom, channels, 3, stride, 1, True)
        bottom = name
    return text


def heads(num_classes):
    text = ""
    locs, confs, priors = [], [], []
    for fmap, min_size, max_size, step in HEADS:
        for kind, per_prior in (("loc", 4), ("conf", num_classes)):
            out = f"{fmap}_mbox_{kind}"
            text += conv(out, fmap, PRIORS_PER_CELL * per_prior, 3, 1, 1, False)
            text += layer(out + "_perm", "Permute", [out], [out + "_perm"],
                          "permute_param { order: 0 order: 2 order: 3 order: 1 }")
            text += layer(out + "_flat", "Flatten", [out + "_perm"], [out + "_flat"],
                          "flatten_param { axis: 1 }")
            (locs if kind == "loc" else confs).append(out + "_flat")
        prior = f"{fmap}_mbox_priorbox"
        text += layer(prior, "PriorBox", [fmap, "data"], [prior], f"""
prior_box_param {{
  min_size: {min_size} max_size: {max_size} aspect_ratio: 2 flip: true clip: false
  variance: 0.1 variance: 0.1 variance: 0.2 variance: 0.2 step: {step} offset: 0.5
}}""")
        priors.append(prior)
    text += layer("mbox_loc", "Concat", locs, ["mbox_loc"], "concat_param { axis: 1 }")
    text += layer("mbox_conf", "Concat", confs, ["mbox_conf"], "concat_param { axis: 1 }")
    text += layer("mbox_priorbox", "Concat", priors, ["mbox_priorbox"], "concat_param { axis: 2 }")
    return text


def detection_output(num_classes, include=None):
    text = layer("mbox_conf_reshape", "Reshape", ["mbox_conf"], ["mbox_conf_reshape"],
                 f"reshape_param {{ shape {{ dim: 0 dim: -1 dim: {num_classes} }} }}", include)
    text += layer("mbox_conf_softmax", "Softmax", ["mbox_conf_reshape"], ["mbox_conf_softmax"],
                  "softmax_param { axis: 2 }", include)
    text += layer("mbox_conf_flatten", "Flatten", ["mbox_conf_softmax"], ["mbox_conf_flatten"],
                  "flatten_param { axis: 1 }", include)
    text += layer("detection_out", "DetectionOutput",
                  ["mbox_loc", "mbox_conf_flatten", "mbox_priorbox"], ["detection_out"], f"""
detection_output_param {{
  num_classes: {num_classes} share_location: true background_label_id: 0
  nms_param {{ nms_threshold: 0.45 top_k: 100 }}
  code_type: CENTER_SIZE keep_top_k: 50 confidence_threshold: 0.01
}}""", include)
    return text


def data_layer(phase, data_dir, batch):
    train = phase == "TRAIN"
    augment = """
  distort_param {
    brightness_prob: 0.5 brightness_delta: 32
    contrast_prob: 0.5 contrast_lower: 0.5 contrast_upper: 1.5
    hue_prob: 0.5 hue_delta: 18
    saturation_prob: 0.5 saturation_lower: 0.5 saturation_upper: 1.5
  }
  expand_param { prob: 0.5 max_expand_ratio: 2.0 }
  emit_constraint { emit_type: CENTER }""" if train else ""
    samplers = "batch_sampler { max_sample: 1 max_trials: 1 }\n" if train else "batch_sampler { }\n"
    if train:
        for min_jaccard in (0.3, 0.5, 0.7):
            samplers += f"""batch_sampler {{
  sampler {{ min_scale: 0.5 max_scale: 1.0 min_aspect_ratio: 0.5 max_aspect_ratio: 2.0 }}
  sample_constraint {{ min_jaccard_overlap: {min_jaccard} }}
  max_sample: 1 max_trials: 50
}}
"""
    body = f"""
transform_param {{
  scale: {SCALE} mean_value: {MEAN} mean_value: {MEAN} mean_value: {MEAN}
  mirror: {str(train).lower()}
  resize_param {{ prob: 1 resize_mode: WARP height: {SIZE} width: {SIZE} interp_mode: LINEAR }}{augment}
}}
data_param {{ source: "{data_dir}/{'train' if train else 'test'}_lmdb" batch_size: {batch} backend: LMDB }}
annotated_data_param {{
{samplers}  label_map_file: "{data_dir}/labelmap.prototxt"
}}"""
    return layer("data", "AnnotatedData", [], ["data", "label"], body, phase)


def train_test(num_classes, data_dir, name):
    text = f'name: "{name}"\n'
    text += data_layer("TRAIN", data_dir, 16)
    text += data_layer("TEST", data_dir, 25)
    text += backbone() + heads(num_classes)
    text += layer("mbox_loss", "MultiBoxLoss", ["mbox_loc", "mbox_conf", "mbox_priorbox", "label"],
                  ["mbox_loss"], f"""
include {{ phase: TRAIN }}
propagate_down: true
propagate_down: true
propagate_down: false
propagate_down: false
loss_param {{ normalization: VALID }}
multibox_loss_param {{
  loc_loss_type: SMOOTH_L1 conf_loss_type: SOFTMAX loc_weight: 1.0
  num_classes: {num_classes} share_location: true match_type: PER_PREDICTION
  overlap_threshold: 0.5 use_prior_for_matching: true background_label_id: 0
  use_difficult_gt: true neg_pos_ratio: 3.0 neg_overlap: 0.5 code_type: CENTER_SIZE
  ignore_cross_boundary_bbox: false mining_type: MAX_NEGATIVE
}}""")
    text += detection_output(num_classes, "TEST")
    text += layer("detection_eval", "DetectionEvaluate", ["detection_out", "label"],
                  ["detection_eval"], f"""
detection_evaluate_param {{
  num_classes: {num_classes} background_label_id: 0 overlap_threshold: 0.5
  evaluate_difficult_gt: false
}}""", "TEST")
    return text


def deploy(num_classes, name):
    text = f'name: "{name}"\n'
    text += layer("input", "Input", [], ["data"],
                  f"input_param {{ shape {{ dim: 1 dim: 3 dim: {SIZE} dim: {SIZE} }} }}")
    return text + backbone() + heads(num_classes) + detection_output(num_classes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-classes", type=int, required=True,
                        help="classes including the background")
    parser.add_argument("--out", required=True)
    parser.add_argument("--data", default="examples/ssd_shapes/data/shapes",
                        help="folder with train_lmdb, test_lmdb and labelmap.prototxt")
    parser.add_argument("--name", default="ssd_shapes")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"{args.name}_train_test.prototxt"), "w") as f:
        f.write(train_test(args.num_classes, args.data, args.name))
    with open(os.path.join(args.out, f"{args.name}_deploy.prototxt"), "w") as f:
        f.write(deploy(args.num_classes, args.name))


if __name__ == "__main__":
    main()
