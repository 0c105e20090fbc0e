#pragma once
// AnnotatedData: the SSD branch's data layer. Reads AnnotatedDatum records (a Datum and its boxes,
// as convert-annoset writes them) from a DB and emits batches with the SSD augmentation.
// Tops: data (N x C x H' x W'); optionally label. With annotations (the first record has a type,
// or annotated_data_param.anno_type is set): label is 1 x 1 x B x 8, one row per box left after
// the transforms, items in batch order: [item_id, group_label, instance_id, xmin, ymin, xmax,
// ymax, difficult], coordinates normalized to the transformed image; a batch without boxes gives
// 1 x 1 x 1 x 8 of -1. Without: label is N, each record's datum.label, as Data.
// Per item (io/annotated_transform.hpp, in both phases): decode (raw uint8 or encoded JPEG/PNG;
// force_color / force_gray) -> transform_param.distort_param -> expand_param ->
// annotated_data_param.batch_sampler (a random crop among the sampled boxes that meet their
// constraints) -> resize_param -> crop_size (random in TRAIN, centred in TEST), mirror,
// mean_file / mean_value, scale; emit_constraint decides which boxes survive each crop.
// All items of a batch must come out the same size (resize_param WARP, or crop_size, make sure).
// Params: data_param as Data (source, batch_size, backend, rand_skip, prefetch, decode_threads,
// on_bad_record, shard_id, num_shards); transform_param as above (noise_param with prob > 0 is
// a ConfigError: crema does not apply SSD's noise); annotated_data_param { batch_sampler
// { sampler { min_scale, max_scale, min_aspect_ratio, max_aspect_ratio }, sample_constraint
// { min/max_jaccard_overlap, min/max_sample_coverage, min/max_object_coverage }, max_sample,
// max_trials, use_original_image }, anno_type (overrides the records' type), label_map_file
// (unused, as in SSD) }.
// Reading, threads, bad records (a record that is no AnnotatedDatum, or lacks the type the others
// have, is bad), sharding and resuming are Data's (layers/data/data_layer.hpp). Randomness: one
// generator, seeded from the calling thread's at set-up when any step draws; each item's steps
// draw from a generator seeded with one word taken from it in item order, so batches depend on
// the seed only, not on decode_threads or timing; its state is saved with the reader's.
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/annotated_transform.hpp"
#include "layers/data/data_layer.hpp"

namespace crema {

class AnnotatedDataLayer final : public DataLayer {
 public:
  explicit AnnotatedDataLayer(const LayerParameter& param) : DataLayer(param) {}
  ~AnnotatedDataLayer() override { StopPrefetch(); }
  const char* type() const override { return "AnnotatedData"; }

 protected:
  struct AnnotatedItem : Item {
    bool has_type = false;
    std::vector<ObjectBox> objects;
    Picture picture;
    AnnotatedTransformer::Sample sample;
  };

  std::unique_ptr<Item> NewItem() const override { return std::make_unique<AnnotatedItem>(); }
  void SetUpTransform() override;
  void Decode(Item* item) const override;
  void ShapeTops(const Item& first, const BlobVec& top) override;
  void FillBatch(const std::vector<Item*>& items, Batch* batch) override;
  bool NeedsRandom() const override { return transform_->NeedsRandom(); }
  std::string RandState() const override;
  void SetRandState(const std::string& state) override;

 private:
  void CheckParams() const;

  std::unique_ptr<AnnotatedTransformer> transform_;
  std::mt19937 rng_;
  // Whether the records carry boxes: unknown (-1) until the first good record is read.
  int has_boxes_ = -1;
};

}  // namespace crema
