#include "layers/crop/crop_layer.hpp"

#include "crema/layer_registry.hpp"
#include "math/math.hpp"

namespace crema {

void CropLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  CREMA_CHECK_SHAPE(top[0] != bottom[0] && top[0] != bottom[1],
                    "Crop does not allow in-place computation");
  const CropParameter& param = layer_param_.crop_param();
  const Blob& in = *bottom[0];
  const Blob& like = *bottom[1];
  const int num_axes = in.num_axes();
  CREMA_CHECK_PARAM(param.axis() >= -num_axes && param.axis() < num_axes, "crop_param.axis",
                    "must be in [", -num_axes, ", ", num_axes, ") for a bottom of shape ",
                    in.shape_string(), ", got ", param.axis());
  const int start_axis = in.CanonicalAxisIndex(param.axis());
  CREMA_CHECK_PARAM(param.offset_size() <= 1 || param.offset_size() == num_axes - start_axis,
                    "crop_param.offset", "must be given once, or once per cropped axis (",
                    num_axes - start_axis, " from axis ", start_axis, " on), got ",
                    param.offset_size(), " values");
  CREMA_CHECK_SHAPE(like.num_axes() >= num_axes, "bottom 1 ", like.shape_string(),
                    " must have the axes of bottom 0 ", in.shape_string());
  offsets_.assign(num_axes, 0);
  std::vector<int> shape = in.shape();
  for (int i = start_axis; i < num_axes; ++i) {
    const uint32_t offset =
        param.offset_size() == 0 ? 0 : param.offset(param.offset_size() == 1 ? 0 : i - start_axis);
    CREMA_CHECK_PARAM(static_cast<int64_t>(offset) + like.shape(i) <= in.shape(i),
                      "crop_param.offset", "the crop of axis ", i, " is out of bounds: offset ",
                      offset, " + size ", like.shape(i), " (bottom 1 ", like.shape_string(),
                      ") exceeds ", in.shape(i), " (bottom 0 ", in.shape_string(), ")");
    offsets_[i] = static_cast<int>(offset);
    shape[i] = like.shape(i);
  }
  top[0]->Reshape(shape);
}

template <typename T>
void CropLayer::CopyWindow(const T* src, T* dst, bool to_top, const Blob& big,
                           const Blob& small) const {
  // Walk every row (all indices but the last axis) of the small blob; each row is contiguous in
  // both blobs.
  const int num_axes = small.num_axes();
  if (small.count() == 0) return;
  if (num_axes == 0) {
    *dst = *src;
    return;
  }
  const int last = num_axes - 1;
  const int64_t row = small.shape(last);
  std::vector<int> index(num_axes, 0);
  const int64_t rows = small.count() / row;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t big_offset = 0, small_offset = 0;
    for (int a = 0; a < num_axes; ++a) {
      big_offset = big_offset * big.shape(a) + index[a] + offsets_[a];
      small_offset = small_offset * small.shape(a) + index[a];
    }
    if (to_top)
      cpu::Copy<T>(row, src + big_offset, dst + small_offset);
    else
      cpu::Copy<T>(row, src + small_offset, dst + big_offset);
    for (int a = last - 1; a >= 0; --a) {
      if (++index[a] < small.shape(a)) break;
      index[a] = 0;
    }
  }
}

void CropLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       CopyWindow<T>(bottom[0]->cpu_data<T>(), top[0]->mutable_cpu_data<T>(), true,
                                     *bottom[0], *top[0]));
}

void CropLayer::BackwardCpu(const BlobVec& top, const std::vector<bool>& propagate_down,
                            const BlobVec& bottom) {
  // bottom[1] only gives a shape; its diff reads as zero, as in Caffe (which never writes it).
  if (propagate_down[1]) bottom[1]->SetDiffZero();
  if (!propagate_down[0]) return;
  bottom[0]->SetDiffZero();
  CREMA_DISPATCH_FLOAT(bottom[0]->dtype(), T,
                       CopyWindow<T>(top[0]->cpu_diff<T>(), bottom[0]->mutable_cpu_diff<T>(), false,
                                     *bottom[0], *top[0]));
}

CREMA_REGISTER_LAYER(Crop, CropLayer);

}  // namespace crema
