#pragma once
// Small helpers over the HDF5 C API for Caffe's HDF5 files: weights (.caffemodel.h5: groups
// data/<layer>/<i>, diff/<layer>/<i>) and solver states (.solverstate.h5: scalar datasets "iter",
// "learned_net", "current_step" and group "history" with datasets "0", "1", ...). Blobs are float
// or double datasets shaped like the blob (H5LT); ints and strings are scalar datasets, as Caffe's
// hdf5_save_int / hdf5_save_string write them. Failures are RuntimeError (I/O) or ConfigError
// (missing object, shape or type mismatch) naming the file and the object path; HDF5's own
// error-stack printing is silenced while a helper runs and its innermost message is quoted.
#include <hdf5.h>

#include <string>
#include <vector>

#include "crema/blob.hpp"

namespace crema {

// An open HDF5 file, closed on destruction. RuntimeError naming the path on failure.
class Hdf5File {
 public:
  enum class Mode { kRead, kCreate, kReadWrite };
  Hdf5File(const std::string& path, Mode mode);
  ~Hdf5File();
  Hdf5File(const Hdf5File&) = delete;
  Hdf5File& operator=(const Hdf5File&) = delete;

  hid_t id() const { return id_; }
  const std::string& path() const { return path_; }
  // The caller closes the returned group with H5Gclose (or wraps it in an Hdf5Handle).
  hid_t OpenGroup(const std::string& name) const;
  hid_t CreateGroup(const std::string& name) const;
  // Flushes and closes now (RuntimeError on failure); the destructor then does nothing.
  void Close();

 private:
  std::string path_;
  hid_t id_ = -1;
};

// Owns any HDF5 identifier (group, dataset, attribute, type, space, file) and closes it with the
// matching H5*close.
class Hdf5Handle {
 public:
  Hdf5Handle() = default;
  explicit Hdf5Handle(hid_t id) : id_(id) {}
  ~Hdf5Handle();
  Hdf5Handle(Hdf5Handle&& other) noexcept : id_(other.id_) { other.id_ = -1; }
  Hdf5Handle& operator=(Hdf5Handle&& other) noexcept;
  Hdf5Handle(const Hdf5Handle&) = delete;
  Hdf5Handle& operator=(const Hdf5Handle&) = delete;
  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }

 private:
  hid_t id_ = -1;
};

// Groups below `loc`; RuntimeError (create) or ConfigError (missing) naming file and path.
Hdf5Handle CreateHdf5Group(hid_t loc, const std::string& name);
Hdf5Handle OpenHdf5Group(hid_t loc, const std::string& name);

// True when `path` is an existing HDF5 file.
bool IsHdf5File(const std::string& path);
// Whether `loc` has a direct child `name` (any object), or a dataset of that name.
bool Hdf5HasLink(hid_t loc, const std::string& name);
bool Hdf5HasDataset(hid_t loc, const std::string& name);
// Names of the links (groups, datasets) directly under `loc`, in HDF5's index order.
std::vector<std::string> Hdf5ChildNames(hid_t loc);
// "file.h5:/data/conv1/0": where an object is, for messages.
std::string Hdf5Where(hid_t loc, const std::string& name = "");
// The dataset's shape; ConfigError when missing or deeper than a blob.
std::vector<int> Hdf5DatasetShape(hid_t loc, const std::string& name);

// Writes the blob's data (or diff) as a dataset of its element type and shape, replacing an
// existing dataset of that name.
void WriteBlobToHDF5(hid_t loc, const std::string& name, const Blob& blob, bool diff);
// Reads a float, double or integer dataset into the blob's data (or diff), converting to the
// blob's element type. With `reshape` false a shape mismatch is a ConfigError naming both shapes.
void ReadBlobFromHDF5(hid_t loc, const std::string& name, Blob* blob, bool reshape,
                      bool diff = false);

// Scalar datasets (Caffe's hdf5_save_int / hdf5_load_int, hdf5_save_string / hdf5_load_string).
void WriteHdf5Int(hid_t loc, const std::string& name, int value);
int ReadHdf5Int(hid_t loc, const std::string& name);
void WriteHdf5Double(hid_t loc, const std::string& name, double value);
double ReadHdf5Double(hid_t loc, const std::string& name);
void WriteHdf5String(hid_t loc, const std::string& name, const std::string& value);
// Fixed- or variable-length (h5py) strings.
std::string ReadHdf5String(hid_t loc, const std::string& name);

// Attributes of the object `object` below `loc` ("." for `loc` itself).
bool Hdf5HasAttribute(hid_t loc, const std::string& object, const std::string& attribute);
void WriteHdf5IntAttribute(hid_t loc, const std::string& object, const std::string& attribute,
                           int value);
int ReadHdf5IntAttribute(hid_t loc, const std::string& object, const std::string& attribute);
void WriteHdf5StringAttribute(hid_t loc, const std::string& object, const std::string& attribute,
                              const std::string& value);
std::string ReadHdf5StringAttribute(hid_t loc, const std::string& object,
                                    const std::string& attribute);

}  // namespace crema
