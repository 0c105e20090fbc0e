#include "crema/blob.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "core/half.hpp"
#include "crema/proto.hpp"

#ifdef CREMA_WITH_CUDA
#include "core/blob_gpu.hpp"
#include "core/cuda_context.hpp"
#endif

namespace crema {

size_t SizeOf(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat64:
      return 8;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
  }
  return 4;
}

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat64:
      return "float64";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

Blob::Blob(const std::vector<int>& shape, DataType type) : dtype_(type) { Reshape(shape); }

Blob::Blob(int num, int channels, int height, int width, DataType type) : dtype_(type) {
  Reshape(num, channels, height, width);
}

void Blob::set_dtype(DataType type) {
  if (type == dtype_) return;
  dtype_ = type;
  capacity_ = count_;
  data_ = std::make_shared<SyncedMemory>(capacity_ * SizeOf(dtype_));
  diff_ = std::make_shared<SyncedMemory>(capacity_ * SizeOf(dtype_));
}

namespace {

// The most elements one blob may hold: Caffe's own limit (INT_MAX) unless
// CREMA_MAX_BLOB_ELEMENTS says otherwise, so that a hostile or mistyped shape is refused with a
// clear error while the net is built, not by the allocator when it first runs.
int64_t MaxBlobElements() {
  static const int64_t bound = [] {
    const char* env = std::getenv("CREMA_MAX_BLOB_ELEMENTS");
    if (env == nullptr || *env == '\0')
      return static_cast<int64_t>(std::numeric_limits<int>::max());
    char* end = nullptr;
    const long long value = std::strtoll(env, &end, 10);
    if (*end != '\0' || value <= 0)
      CREMA_THROW_CONFIG("CREMA_MAX_BLOB_ELEMENTS must be a positive integer, got \"", env, "\"");
    return static_cast<int64_t>(value);
  }();
  return bound;
}

}  // namespace

void Blob::Reshape(const std::vector<int>& shape) {
  if (static_cast<int>(shape.size()) > kMaxAxes)
    CREMA_THROW_CONFIG("blob shape has ", shape.size(), " axes; at most ", kMaxAxes,
                       " are allowed");
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0)
      CREMA_THROW_CONFIG("blob shape has a negative dimension ", shape[i], " at axis ", i);
    if (shape[i] > 0 && count > std::numeric_limits<int64_t>::max() / 8 / shape[i])
      CREMA_THROW_CONFIG("blob shape overflows: element count too large at axis ", i);
    count *= shape[i];
  }
  if (count > MaxBlobElements()) {
    std::string dims;
    for (size_t i = 0; i < shape.size(); ++i) dims += (i ? " x " : "") + std::to_string(shape[i]);
    CREMA_THROW_CONFIG("blob shape ", dims, " has ", count, " elements, more than the bound of ",
                       MaxBlobElements(),
                       " (Caffe's limit, INT_MAX; CREMA_MAX_BLOB_ELEMENTS changes it)");
  }
  shape_ = shape;
  count_ = count;
  if (count_ > capacity_ || !data_) {
    capacity_ = count_;
    data_ = std::make_shared<SyncedMemory>(capacity_ * SizeOf(dtype_));
    diff_ = std::make_shared<SyncedMemory>(capacity_ * SizeOf(dtype_));
  }
}

void Blob::Reshape(const BlobShape& shape) {
  if (shape.dim_size() > kMaxAxes)
    CREMA_THROW_CONFIG("blob shape has ", shape.dim_size(), " axes; at most ", kMaxAxes,
                       " are allowed");
  std::vector<int> dims(shape.dim_size());
  for (int i = 0; i < shape.dim_size(); ++i) {
    if (shape.dim(i) < 0 || shape.dim(i) > std::numeric_limits<int>::max())
      CREMA_THROW_CONFIG("blob shape dimension ", shape.dim(i), " at axis ", i, " is out of range");
    dims[i] = static_cast<int>(shape.dim(i));
  }
  Reshape(dims);
}

void Blob::Reshape(int num, int channels, int height, int width) {
  Reshape(std::vector<int>{num, channels, height, width});
}

int64_t Blob::count(int start_axis, int end_axis) const {
  CREMA_ASSERT(start_axis >= 0 && start_axis <= end_axis && end_axis <= num_axes(), start_axis, " ",
               end_axis, " ", num_axes());
  int64_t c = 1;
  for (int i = start_axis; i < end_axis; ++i) c *= shape_[i];
  return c;
}

int Blob::CanonicalAxisIndex(int axis_index) const {
  if (axis_index < -num_axes() || axis_index >= num_axes() + (num_axes() == 0 ? 1 : 0))
    CREMA_THROW_CONFIG("axis ", axis_index, " is out of range for a blob with ", num_axes(),
                       " axes (shape ", shape_string(), ")");
  return axis_index < 0 ? axis_index + num_axes() : axis_index;
}

std::string Blob::shape_string() const {
  std::string s;
  for (int d : shape_) s += std::to_string(d) + " ";
  return s + "(" + std::to_string(count_) + ")";
}

int Blob::LegacyShape(int index) const {
  if (num_axes() > 4)
    CREMA_THROW_CONFIG("legacy 4-D accessors used on a blob with ", num_axes(), " axes");
  if (index >= num_axes() || index < -num_axes()) return 1;
  return shape(index);
}

int64_t Blob::offset(int n, int c, int h, int w) const {
  return ((static_cast<int64_t>(n) * channels() + c) * height() + h) * width() + w;
}

int64_t Blob::offset(const std::vector<int>& indices) const {
  CREMA_ASSERT(static_cast<int>(indices.size()) <= num_axes());
  int64_t off = 0;
  for (int i = 0; i < num_axes(); ++i) {
    off *= shape_[i];
    if (i < static_cast<int>(indices.size())) off += indices[i];
  }
  return off;
}

void Blob::TypeMismatch(DataType requested) const {
  AssertFailed(__FILE__, __LINE__, "element type",
               StrCat("blob holds ", DataTypeName(dtype_), " but ", DataTypeName(requested),
                      " was requested"));
}

namespace {
bool IsHalf(DataType type) { return type == DataType::kFloat16 || type == DataType::kBFloat16; }
// Element `index` of a buffer of half values (mixed precision's storage), widened.
float HalfAt(DataType type, const void* values, int64_t index) {
  const uint16_t v = static_cast<const uint16_t*>(values)[index];
  return type == DataType::kFloat16 ? HalfToFloat(v) : BFloat16ToFloat(v);
}
// Sum of |x| or x^2 over a buffer of half values, in double (host; tests, --check-nan).
double HalfReduce(DataType type, const void* values, int64_t n, bool squares) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = HalfAt(type, values, i);
    s += squares ? v * v : std::fabs(v);
  }
  return s;
}
}  // namespace

double Blob::data_at(int64_t index) const {
  CREMA_ASSERT(index >= 0 && index < count_);
  if (IsHalf(dtype_)) return HalfAt(dtype_, data_->cpu_data(), index);
  double v = 0;
  CREMA_DISPATCH_FLOAT(dtype_, T, v = cpu_data<T>()[index]);
  return v;
}

double Blob::diff_at(int64_t index) const {
  CREMA_ASSERT(index >= 0 && index < count_);
  if (IsHalf(dtype_)) return HalfAt(dtype_, diff_->cpu_data(), index);
  double v = 0;
  CREMA_DISPATCH_FLOAT(dtype_, T, v = cpu_diff<T>()[index]);
  return v;
}

namespace {
template <typename T>
double AsumOf(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::fabs(static_cast<double>(x[i]));
  return s;
}
template <typename T>
double SumsqOf(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(x[i]) * x[i];
  return s;
}
template <typename T>
void ScaleOf(T* x, int64_t n, double factor) {
  const T f = static_cast<T>(factor);
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}
}  // namespace

namespace {
// Whether the freshest copy of `mem` is on the GPU: then Blob's operations run there (Caffe).
// (Only a CUDA build asks.)
[[maybe_unused]] bool OnGpu(const SyncedMemory& mem) {
  return mem.head() == SyncedMemory::Head::kAtGpu || mem.head() == SyncedMemory::Head::kSynced;
}
}  // namespace

namespace {
// data -= diff (Blob::Update on the CPU).
template <typename T>
void SubtractInPlace(int64_t n, const T* diff, T* data) {
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) data[i] -= diff[i];
}
}  // namespace

void Blob::Update() {
  if (count_ == 0) return;
#ifdef CREMA_WITH_CUDA
  if (OnGpu(*data_)) {
    CREMA_DISPATCH_FLOAT(dtype_, T, gpu::BlobUpdate(count_, gpu_diff<T>(), mutable_gpu_data<T>()));
    return;
  }
#endif
  CREMA_DISPATCH_FLOAT(dtype_, T, SubtractInPlace(count_, cpu_diff<T>(), mutable_cpu_data<T>()));
}

namespace {
void ZeroMemory(SyncedMemory* mem, size_t bytes) {
#ifdef CREMA_WITH_CUDA
  if (OnGpu(*mem)) {
    gpu::Check(cudaMemsetAsync(mem->mutable_gpu_data(), 0, bytes, gpu::Stream()),
               "cudaMemsetAsync");
    return;
  }
#endif
  std::memset(mem->mutable_cpu_data(), 0, bytes);
}
}  // namespace

void Blob::SetDataZero() {
  if (count_ > 0) ZeroMemory(data_.get(), count_ * SizeOf(dtype_));
}
void Blob::SetDiffZero() {
  if (count_ > 0) ZeroMemory(diff_.get(), count_ * SizeOf(dtype_));
}
void Blob::SetDiffZeroLazily() {
  if (count_ > 0) diff_->ZeroLazily();
}

// Half storage is reduced on the host (these are for tests, logging and --check-nan).
#ifdef CREMA_WITH_CUDA
#define CREMA_BLOB_REDUCE(mem, gpu_fn, cpu_fn, gpu_ptr, cpu_ptr, squares)          \
  double s = 0;                                                                    \
  if (count_ == 0) return s;                                                       \
  if (IsHalf(dtype_)) return HalfReduce(dtype_, mem->cpu_data(), count_, squares); \
  if (OnGpu(*mem)) {                                                               \
    CREMA_DISPATCH_FLOAT(dtype_, T, s = gpu::gpu_fn(count_, gpu_ptr<T>()));        \
  } else {                                                                         \
    CREMA_DISPATCH_FLOAT(dtype_, T, s = cpu_fn(cpu_ptr<T>(), count_));             \
  }                                                                                \
  return s
#else
#define CREMA_BLOB_REDUCE(mem, gpu_fn, cpu_fn, gpu_ptr, cpu_ptr, squares)                        \
  double s = 0;                                                                                  \
  if (count_ > 0 && IsHalf(dtype_)) return HalfReduce(dtype_, mem->cpu_data(), count_, squares); \
  if (count_ > 0) CREMA_DISPATCH_FLOAT(dtype_, T, s = cpu_fn(cpu_ptr<T>(), count_));             \
  return s
#endif

double Blob::asum_data() const {
  CREMA_BLOB_REDUCE(data_, BlobAsum, AsumOf, gpu_data, cpu_data, false);
}
double Blob::asum_diff() const {
  CREMA_BLOB_REDUCE(diff_, BlobAsum, AsumOf, gpu_diff, cpu_diff, false);
}
double Blob::sumsq_data() const {
  CREMA_BLOB_REDUCE(data_, BlobSumsq, SumsqOf, gpu_data, cpu_data, true);
}
double Blob::sumsq_diff() const {
  CREMA_BLOB_REDUCE(diff_, BlobSumsq, SumsqOf, gpu_diff, cpu_diff, true);
}
#undef CREMA_BLOB_REDUCE

void Blob::scale_data(double factor) {
  if (count_ == 0) return;
#ifdef CREMA_WITH_CUDA
  if (OnGpu(*data_)) {
    CREMA_DISPATCH_FLOAT(dtype_, T, gpu::BlobScale(count_, factor, mutable_gpu_data<T>()));
    return;
  }
#endif
  CREMA_DISPATCH_FLOAT(dtype_, T, ScaleOf(mutable_cpu_data<T>(), count_, factor));
}
void Blob::scale_diff(double factor) {
  if (count_ == 0) return;
#ifdef CREMA_WITH_CUDA
  if (OnGpu(*diff_)) {
    CREMA_DISPATCH_FLOAT(dtype_, T, gpu::BlobScale(count_, factor, mutable_gpu_diff<T>()));
    return;
  }
#endif
  CREMA_DISPATCH_FLOAT(dtype_, T, ScaleOf(mutable_cpu_diff<T>(), count_, factor));
}

void Blob::ShareData(const Blob& other) {
  CREMA_ASSERT(count_ == other.count_ && dtype_ == other.dtype_, shape_string(), " vs ",
               other.shape_string());
  data_ = other.data_;
}

void Blob::ShareDiff(const Blob& other) {
  CREMA_ASSERT(count_ == other.count_ && dtype_ == other.dtype_, shape_string(), " vs ",
               other.shape_string());
  diff_ = other.diff_;
}

void Blob::ReshapeInto(const std::vector<int>& shape, std::shared_ptr<SyncedMemory> data,
                       std::shared_ptr<SyncedMemory> diff) {
  Reshape(std::vector<int>{0});  // checks nothing, allocates nothing (the buffers come next)
  int64_t count = 1;
  for (int d : shape) count *= d;
  const size_t bytes = static_cast<size_t>(count) * SizeOf(dtype_);
  CREMA_ASSERT(data && diff && data->size() >= bytes && diff->size() >= bytes, bytes);
  data_ = std::move(data);
  diff_ = std::move(diff);
  capacity_ = count;
  Reshape(shape);
}

void Blob::UseDataMemory(std::shared_ptr<SyncedMemory> memory) {
  CREMA_ASSERT(memory && memory->size() >= static_cast<size_t>(count_) * SizeOf(dtype_),
               shape_string());
  data_ = std::move(memory);
  // The capacity bounds both buffers now: growing past it reallocates them.
  capacity_ = count_;
}

void Blob::UseDiffMemory(std::shared_ptr<SyncedMemory> memory) {
  CREMA_ASSERT(memory && memory->size() >= static_cast<size_t>(count_) * SizeOf(dtype_),
               shape_string());
  diff_ = std::move(memory);
  capacity_ = count_;
}

void Blob::CopyFrom(const Blob& source, bool copy_diff, bool reshape) {
  if (source.count_ != count_ || source.shape_ != shape_) {
    if (!reshape)
      CREMA_THROW_CONFIG("cannot copy a blob of shape ", source.shape_string(),
                         " into one of shape ", shape_string());
    ReshapeLike(source);
  }
  if (count_ == 0) return;
  auto& src = copy_diff ? source.diff_ : source.data_;
  auto& dst = copy_diff ? diff_ : data_;
  if (source.dtype_ == dtype_) {
#ifdef CREMA_WITH_CUDA
    if (OnGpu(*src)) {
      gpu::Check(cudaMemcpyAsync(dst->mutable_gpu_data(), src->gpu_data(), count_ * SizeOf(dtype_),
                                 cudaMemcpyDeviceToDevice, gpu::Stream()),
                 "cudaMemcpyAsync (device to device)");
      return;
    }
#endif
    std::memcpy(dst->mutable_cpu_data(), src->cpu_data(), count_ * SizeOf(dtype_));
    return;
  }
  CREMA_DISPATCH_FLOAT(dtype_, D, {
    D* out = static_cast<D*>(dst->mutable_cpu_data());
    CREMA_DISPATCH_FLOAT(source.dtype_, S, {
      const S* in = static_cast<const S*>(src->cpu_data());
      for (int64_t i = 0; i < count_; ++i) out[i] = static_cast<D>(in[i]);
    });
  });
}

namespace {
bool HasLegacyShape(const BlobProto& proto) {
  return proto.has_num() || proto.has_channels() || proto.has_height() || proto.has_width();
}
std::vector<int64_t> ProtoShape(const BlobProto& proto) {
  if (HasLegacyShape(proto)) return {proto.num(), proto.channels(), proto.height(), proto.width()};
  return {proto.shape().dim().begin(), proto.shape().dim().end()};
}
std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}
template <typename D, typename S>
void CopyValues(const S* in, int64_t n, D* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<D>(in[i]);
}
}  // namespace

bool Blob::ShapeEquals(const BlobProto& other) const {
  if (HasLegacyShape(other)) {
    return num_axes() <= 4 && LegacyShape(-4) == other.num() &&
           LegacyShape(-3) == other.channels() && LegacyShape(-2) == other.height() &&
           LegacyShape(-1) == other.width();
  }
  if (other.shape().dim_size() != num_axes()) return false;
  for (int i = 0; i < num_axes(); ++i)
    if (other.shape().dim(i) != shape_[i]) return false;
  return true;
}

void Blob::FromProto(const BlobProto& proto, bool reshape) {
  if (reshape) {
    std::vector<int64_t> dims = ProtoShape(proto);
    BlobShape shape;
    for (int64_t d : dims) shape.add_dim(d);
    Reshape(shape);
  } else if (!ShapeEquals(proto)) {
    std::vector<int64_t> mine(shape_.begin(), shape_.end());
    CREMA_THROW_CONFIG("shape mismatch: the file has ", ShapeText(ProtoShape(proto)),
                       " but the net expects ", ShapeText(mine));
  }
  auto load = [&](const auto& floats, const auto& doubles, bool is_diff) {
    const int64_t nf = floats.size(), nd = doubles.size();
    if (nf == 0 && nd == 0) return;
    const int64_t n = nd > 0 ? nd : nf;
    if (n != count_)
      CREMA_THROW_CONFIG("blob ", is_diff ? "diff" : "data", " has ", n, " values but its shape ",
                         shape_string(), " needs ", count_);
    void* dst = is_diff ? diff_->mutable_cpu_data() : data_->mutable_cpu_data();
    CREMA_DISPATCH_FLOAT(dtype_, T, {
      if (nd > 0)
        CopyValues(doubles.data(), n, static_cast<T*>(dst));
      else
        CopyValues(floats.data(), n, static_cast<T*>(dst));
    });
  };
  load(proto.data(), proto.double_data(), false);
  load(proto.diff(), proto.double_diff(), true);
  if (proto.data_size() == 0 && proto.double_data_size() == 0 && proto.has_half_data()) {
    // fp16 weights (crema convert-weights --fp16), widened to this blob's type.
    const std::string& halves = proto.half_data();
    if (halves.size() % 2 != 0 || static_cast<int64_t>(halves.size() / 2) != count_)
      CREMA_THROW_CONFIG("blob half_data has ", halves.size(), " bytes but its shape ",
                         shape_string(), " needs ", 2 * count_);
    CREMA_DISPATCH_FLOAT(dtype_, T, {
      T* dst = static_cast<T*>(data_->mutable_cpu_data());
      for (int64_t i = 0; i < count_; ++i) dst[i] = static_cast<T>(UnpackHalf(halves, i));
    });
  }
}

void Blob::ToProto(BlobProto* proto, bool write_diff) const {
  proto->Clear();
  for (int d : shape_) proto->mutable_shape()->add_dim(d);
  auto store = [&](const std::shared_ptr<SyncedMemory>& mem, auto* floats, auto* doubles) {
    if (dtype_ == DataType::kFloat64) {
      doubles->Resize(static_cast<int>(count_), 0.0);
      if (count_ > 0) std::memcpy(doubles->mutable_data(), mem->cpu_data(), count_ * 8);
    } else {
      floats->Resize(static_cast<int>(count_), 0.0f);
      if (count_ > 0)
        CREMA_DISPATCH_FLOAT(
            dtype_, T,
            CopyValues(static_cast<const T*>(mem->cpu_data()), count_, floats->mutable_data()));
    }
  };
  store(data_, proto->mutable_data(), proto->mutable_double_data());
  if (write_diff) store(diff_, proto->mutable_diff(), proto->mutable_double_diff());
}

}  // namespace crema
