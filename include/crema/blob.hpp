#pragma once
// Blob: an N-D array with data and diff, each in lazily synced host/device memory (as Caffe).
// The element type is a run-time property of the blob (float32 by default; float64 for gradient
// checks; float16/bfloat16 for the activations of mixed precision, which layers never see:
// the net converts them, math/convert.hpp). Typed accessors check it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "crema/error.hpp"

namespace crema {

class BlobProto;
class BlobShape;

enum class DataType : int { kFloat32 = 0, kFloat64 = 1, kFloat16 = 2, kBFloat16 = 3 };

size_t SizeOf(DataType type);
const char* DataTypeName(DataType type);

template <typename T>
struct DataTypeOf;
template <>
struct DataTypeOf<float> {
  static constexpr DataType value = DataType::kFloat32;
};
template <>
struct DataTypeOf<double> {
  static constexpr DataType value = DataType::kFloat64;
};

// Calls `body` with a value of the C++ type matching `type` (float or double).
#define CREMA_DISPATCH_FLOAT(type, T, ...)                                    \
  switch (type) {                                                             \
    case ::crema::DataType::kFloat32: {                                       \
      using T = float;                                                        \
      __VA_ARGS__;                                                            \
      break;                                                                  \
    }                                                                         \
    case ::crema::DataType::kFloat64: {                                       \
      using T = double;                                                       \
      __VA_ARGS__;                                                            \
      break;                                                                  \
    }                                                                         \
    default:                                                                  \
      CREMA_THROW_CONFIG("element type ", ::crema::DataTypeName(type),        \
                         " is not supported here (float32 and float64 are)"); \
  }

// Host and (when built with CUDA) device copies of one buffer; copies happen on first access
// from the side that is stale, as in Caffe.
class SyncedMemory {
 public:
  enum class Head { kUninitialized, kAtCpu, kAtGpu, kSynced };

  SyncedMemory() = default;
  explicit SyncedMemory(size_t size_bytes);
  ~SyncedMemory();
  SyncedMemory(const SyncedMemory&) = delete;
  SyncedMemory& operator=(const SyncedMemory&) = delete;

  const void* cpu_data();
  void* mutable_cpu_data();
  const void* gpu_data();
  void* mutable_gpu_data();
  // Uses `data` (owned by the caller, at least size() bytes) as the host buffer.
  void set_cpu_data(void* data);
  Head head() const { return head_; }
  size_t size() const { return size_; }
  // Around a CUDA graph replay (net/iteration_graph.hpp), which reads and writes the device copy
  // behind the head's back: before it, a newer host copy goes to the device; after it, the device
  // copy is the newer one.
  void PushToDevice();
  void DeviceWritten();
  // Zeroes the host copy without writing it now: the next access writes the zeros, unless it is
  // mutable_cpu_data_to_add's, whose caller overwrites the buffer instead of adding into it (so a
  // gradient cleared before each pass is written once, not zeroed, read and written). Where the
  // device copy is the newer one, zeroes at once on the device.
  void ZeroLazily();
  // The host buffer for a caller that adds into it (gradients accumulate): `*zero` says whether
  // it is zeroed lazily, in which case the caller must write every element rather than add.
  void* mutable_cpu_data_to_add(bool* zero);
  // A number that changes whenever the buffer may have been written: mutable_cpu_data(),
  // mutable_gpu_data(), set_cpu_data(), DeviceWritten() and MarkWritten() each take a new one,
  // unique across all buffers of the process. Caches of values derived from a buffer (oneDNN's
  // reordered weights) compare it; whoever writes through a pointer obtained earlier calls
  // MarkWritten().
  uint64_t generation() const { return generation_; }
  void MarkWritten();
  // The layout of the host copy inside an inference net (src/net/net_layout.cpp): 0, Caffe's
  // plain row-major; B > 0, 4-D data channel-blocked by B (oneDNN's nChw8c / nChw16c), which only
  // the net's own layers read and which the net puts back to plain before anything else does.
  int channel_block() const { return channel_block_; }
  void set_channel_block(int block) { channel_block_ = block; }

  // A view of `size` bytes at `offset` into `arena` (which the view keeps alive): its host and
  // device memory are the arena's, allocated on first need, while the view has a head of its own
  // and copies only its own bytes. Views that are never in use at the same time may cover the
  // same bytes: the activation memory plan places its blobs in one arena this way.
  static std::shared_ptr<SyncedMemory> View(std::shared_ptr<SyncedMemory> arena, size_t offset,
                                            size_t size);
  // The arena a view is in (null for memory of its own).
  const SyncedMemory* arena() const { return arena_.get(); }

 private:
  void ToCpu();
  void ToGpu();
  // The memory a view at `offset` of this arena starts at, allocated (not initialised) when
  // missing; the arena's own head is not used.
  char* HostBase();
  char* DeviceBase();
  void* cpu_ptr_ = nullptr;
  void* gpu_ptr_ = nullptr;
  size_t size_ = 0;
  Head head_ = Head::kUninitialized;
  bool own_cpu_data_ = false;
  bool own_gpu_data_ = false;
  int gpu_device_ = -1;
  std::shared_ptr<SyncedMemory> arena_;  // views only
  size_t offset_ = 0;
  int channel_block_ = 0;
  bool zero_pending_ = false;  // ZeroLazily: the host copy is zeros not yet written
  uint64_t generation_ = NewGeneration();
  static uint64_t NewGeneration();
};

class Blob {
 public:
  static constexpr int kMaxAxes = 32;

  explicit Blob(DataType type = DataType::kFloat32) : dtype_(type) {}
  explicit Blob(const std::vector<int>& shape, DataType type = DataType::kFloat32);
  Blob(int num, int channels, int height, int width, DataType type = DataType::kFloat32);
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Changes the shape; memory is reallocated only when the count grows beyond the capacity.
  void Reshape(const std::vector<int>& shape);
  void Reshape(const BlobShape& shape);
  void Reshape(int num, int channels, int height, int width);
  void ReshapeLike(const Blob& other) { Reshape(other.shape()); }

  DataType dtype() const { return dtype_; }
  // Changes the element type; the contents are discarded.
  void set_dtype(DataType type);

  const std::vector<int>& shape() const { return shape_; }
  int shape(int index) const { return shape_[CanonicalAxisIndex(index)]; }
  int num_axes() const { return static_cast<int>(shape_.size()); }
  int64_t count() const { return count_; }
  int64_t count(int start_axis, int end_axis) const;
  int64_t count(int start_axis) const { return count(start_axis, num_axes()); }
  // Maps a negative axis (-1 = last) to its positive index; ConfigError when out of range.
  int CanonicalAxisIndex(int axis_index) const;
  std::string shape_string() const;

  // Caffe's legacy 4-D accessors (missing trailing axes read as 1).
  int num() const { return LegacyShape(0); }
  int channels() const { return LegacyShape(1); }
  int height() const { return LegacyShape(2); }
  int width() const { return LegacyShape(3); }
  int LegacyShape(int index) const;
  int64_t offset(int n, int c = 0, int h = 0, int w = 0) const;
  int64_t offset(const std::vector<int>& indices) const;

  template <typename T>
  const T* cpu_data() const {
    CheckType<T>();
    return static_cast<const T*>(data_->cpu_data());
  }
  template <typename T>
  T* mutable_cpu_data() {
    CheckType<T>();
    return static_cast<T*>(data_->mutable_cpu_data());
  }
  template <typename T>
  const T* cpu_diff() const {
    CheckType<T>();
    return static_cast<const T*>(diff_->cpu_data());
  }
  template <typename T>
  T* mutable_cpu_diff() {
    CheckType<T>();
    return static_cast<T*>(diff_->mutable_cpu_data());
  }
  // The diff for a writer that adds into it (parameter gradients: Net::ClearParamDiffs zeroes
  // them lazily on the CPU): when `*zero` comes back true the writer overwrites every element
  // instead of adding, the same values without reading or zeroing the buffer first.
  template <typename T>
  T* mutable_cpu_diff_to_add(bool* zero) {
    CheckType<T>();
    return static_cast<T*>(diff_->mutable_cpu_data_to_add(zero));
  }
  template <typename T>
  const T* gpu_data() const {
    CheckType<T>();
    return static_cast<const T*>(data_->gpu_data());
  }
  template <typename T>
  T* mutable_gpu_data() {
    CheckType<T>();
    return static_cast<T*>(data_->mutable_gpu_data());
  }
  template <typename T>
  const T* gpu_diff() const {
    CheckType<T>();
    return static_cast<const T*>(diff_->gpu_data());
  }
  template <typename T>
  T* mutable_gpu_diff() {
    CheckType<T>();
    return static_cast<T*>(diff_->mutable_gpu_data());
  }
  // Element `index` of data/diff read as double, whatever the element type (tests, logging).
  double data_at(int64_t index) const;
  double diff_at(int64_t index) const;

  // Takes `shape` with `data` and `diff` as its buffers (each at least count * element size
  // bytes, owned elsewhere): mixed precision's float32 stand-ins live in a net's scratch this way.
  void ReshapeInto(const std::vector<int>& shape, std::shared_ptr<SyncedMemory> data,
                   std::shared_ptr<SyncedMemory> diff);

  const std::shared_ptr<SyncedMemory>& data() const { return data_; }
  // The data buffer's SyncedMemory::generation() (0 without one).
  uint64_t data_generation() const { return data_ ? data_->generation() : 0; }
  const std::shared_ptr<SyncedMemory>& diff() const { return diff_; }
  // The data's and the diff's SyncedMemory::channel_block() (0: plain), and whether the net lets
  // the layers that write this blob's data and diff write them channel-blocked
  // (src/net/net_layout.cpp).
  int cpu_channel_block() const { return data_ ? data_->channel_block() : 0; }
  int cpu_diff_channel_block() const { return diff_ ? diff_->channel_block() : 0; }
  bool channel_block_allowed() const { return channel_block_allowed_; }
  void set_channel_block_allowed(bool allowed) { channel_block_allowed_ = allowed; }

  // data -= diff (the plain SGD step once the solver has put the update into diff).
  void Update();
  // Fills with zeros.
  void SetDataZero();
  void SetDiffZero();
  // SetDiffZero through SyncedMemory::ZeroLazily (see mutable_cpu_diff_to_add).
  void SetDiffZeroLazily();
  double asum_data() const;
  double asum_diff() const;
  double sumsq_data() const;
  double sumsq_diff() const;
  void scale_data(double factor);
  void scale_diff(double factor);

  // Makes this blob use `other`'s data (or diff) memory; the counts must match.
  void ShareData(const Blob& other);
  void ShareDiff(const Blob& other);
  // Makes this blob use `memory` (at least count() elements) for its data (or diff), as the
  // net's memory planner does; a later Reshape beyond count() gives it its own memory again.
  void UseDataMemory(std::shared_ptr<SyncedMemory> memory);
  void UseDiffMemory(std::shared_ptr<SyncedMemory> memory);
  // Copies data (or diff) from `source`, reshaping this blob when `reshape` is true.
  void CopyFrom(const Blob& source, bool copy_diff = false, bool reshape = false);

  bool ShapeEquals(const BlobProto& other) const;
  // Reads shape and values (float or double, new or legacy 4-D shape). Without `reshape`, a
  // shape mismatch is a ConfigError naming both shapes.
  void FromProto(const BlobProto& proto, bool reshape = true);
  void ToProto(BlobProto* proto, bool write_diff = false) const;

 private:
  template <typename T>
  void CheckType() const {
    if (DataTypeOf<T>::value != dtype_) TypeMismatch(DataTypeOf<T>::value);
  }
  [[noreturn]] void TypeMismatch(DataType requested) const;

  DataType dtype_;
  std::shared_ptr<SyncedMemory> data_;
  std::shared_ptr<SyncedMemory> diff_;
  std::vector<int> shape_;
  int64_t count_ = 0;
  int64_t capacity_ = 0;
  bool channel_block_allowed_ = false;
};

using BlobVec = std::vector<Blob*>;
using BlobPtr = std::shared_ptr<Blob>;

}  // namespace crema
