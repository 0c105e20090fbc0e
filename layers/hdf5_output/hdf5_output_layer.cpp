#include "layers/hdf5_output/hdf5_output_layer.hpp"

#include <glog/logging.h>

#include <cstring>

#include "crema/layer_registry.hpp"
#include "io/hdf5.hpp"

namespace crema {

HDF5OutputLayer::HDF5OutputLayer(const LayerParameter& param) : Layer(param) {}

HDF5OutputLayer::~HDF5OutputLayer() = default;

void HDF5OutputLayer::LayerSetUp(const BlobVec& bottom, const BlobVec& top) {
  file_name_ = layer_param_.hdf5_output_param().file_name();
  CREMA_CHECK_PARAM(!file_name_.empty(), "hdf5_output_param.file_name",
                    "is required (the HDF5 file to write)");
  file_.reset();
  try {
    file_ = std::make_unique<Hdf5File>(file_name_, Hdf5File::Mode::kCreate);
  } catch (const RuntimeError& e) {
    throw RuntimeError(ErrorPrefix("hdf5_output_param.file_name") + e.what());
  }
}

void HDF5OutputLayer::Reshape(const BlobVec& bottom, const BlobVec& top) {
  for (int i = 0; i < 2; ++i)
    CREMA_CHECK_SHAPE(bottom[i]->num_axes() <= 4, "HDF5Output writes 4-D datasets; bottom ", i,
                      " has shape ", bottom[i]->shape_string());
  CREMA_CHECK_SHAPE(bottom[0]->num_axes() >= 1 && bottom[1]->num_axes() >= 1 &&
                        bottom[0]->shape(0) == bottom[1]->shape(0),
                    "HDF5Output needs data and label with the same num: ",
                    bottom[0]->shape_string(), " vs. ", bottom[1]->shape_string());
}

void HDF5OutputLayer::ForwardCpu(const BlobVec& bottom, const BlobVec& top) {
  const char* const names[] = {"data", "label"};
  for (int i = 0; i < 2; ++i) {
    const Blob& in = *bottom[i];
    Blob out(in.num(), in.channels(), in.height(), in.width(), dtype_);
    CREMA_DISPATCH_FLOAT(dtype_, T, {
      T* to = out.mutable_cpu_data<T>();
      CREMA_DISPATCH_FLOAT(in.dtype(), S, {
        const S* from = in.cpu_data<S>();
        for (int64_t k = 0; k < in.count(); ++k) to[k] = static_cast<T>(from[k]);
      });
    });
    try {
      WriteBlobToHDF5(file_->id(), names[i], out, false);
    } catch (const Error& e) {
      throw RuntimeError(ErrorPrefix() + StrCat("cannot write \"", names[i], "\" to '", file_name_,
                                                "': ", e.what()));
    }
  }
  if (H5Fflush(file_->id(), H5F_SCOPE_GLOBAL) < 0)
    throw RuntimeError(ErrorPrefix() + StrCat("cannot flush HDF5 file '", file_name_, "'"));
  DLOG(INFO) << "HDF5Output layer \"" << name() << "\" saved a batch to " << file_name_;
}

CREMA_REGISTER_LAYER(HDF5Output, HDF5OutputLayer);

}  // namespace crema
