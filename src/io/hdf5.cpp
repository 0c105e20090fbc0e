#include "io/hdf5.hpp"

#include <hdf5_hl.h>

#include <cstring>
#include <filesystem>
#include <limits>

#include "crema/error.hpp"

namespace crema {
namespace {

// HDF5 prints its error stack to stderr by default; crema turns failures into exceptions with
// the innermost HDF5 message instead, so printing is off while a helper runs.
class QuietHDF5 {
 public:
  QuietHDF5() {
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietHDF5() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietHDF5(const QuietHDF5&) = delete;
  QuietHDF5& operator=(const QuietHDF5&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

herr_t KeepInnermost(unsigned /*n*/, const H5E_error2_t* error, void* out) {
  if (error->desc != nullptr && error->desc[0] != '\0')
    *static_cast<std::string*>(out) = error->desc;
  return 0;
}

// The most specific message of the current HDF5 error stack (then cleared), as ": message".
std::string HDF5Reason() {
  std::string reason;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, KeepInnermost, &reason);
  H5Eclear2(H5E_DEFAULT);
  return reason.empty() ? "" : ": " + reason;
}

std::string ShapeText(const std::vector<int>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + ")";
}

void DeleteIfPresent(hid_t loc, const std::string& name) {
  if (H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0 &&
      H5Ldelete(loc, name.c_str(), H5P_DEFAULT) < 0)
    CREMA_THROW_RUNTIME("cannot replace HDF5 object ", Hdf5Where(loc, name), HDF5Reason());
}

void RequireDataset(hid_t loc, const std::string& name) {
  if (!Hdf5HasDataset(loc, name))
    CREMA_THROW_CONFIG("HDF5 dataset ", Hdf5Where(loc, name), " does not exist");
}

}  // namespace

// Closes any identifier with the matching H5*close; returns HDF5's status.
static herr_t CloseHdf5Id(hid_t id) {
  switch (H5Iget_type(id)) {
    case H5I_FILE:
      return H5Fclose(id);
    case H5I_GROUP:
      return H5Gclose(id);
    case H5I_DATASET:
      return H5Dclose(id);
    case H5I_ATTR:
      return H5Aclose(id);
    case H5I_DATATYPE:
      return H5Tclose(id);
    case H5I_DATASPACE:
      return H5Sclose(id);
    default:
      return H5Idec_ref(id);
  }
}

Hdf5Handle::~Hdf5Handle() {
  if (id_ < 0) return;
  QuietHDF5 quiet;
  CloseHdf5Id(id_);
  H5Eclear2(H5E_DEFAULT);
}

Hdf5Handle& Hdf5Handle::operator=(Hdf5Handle&& other) noexcept {
  if (this != &other) {
    Hdf5Handle old(id_);
    id_ = other.id_;
    other.id_ = -1;
  }
  return *this;
}

Hdf5File::Hdf5File(const std::string& path, Mode mode) : path_(path) {
  QuietHDF5 quiet;
  if (mode == Mode::kCreate) {
    id_ = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (id_ < 0) CREMA_THROW_RUNTIME("cannot create HDF5 file ", path, HDF5Reason());
    return;
  }
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    CREMA_THROW_RUNTIME("cannot open HDF5 file ", path, ": no such file");
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    CREMA_THROW_RUNTIME("cannot open ", path, ": not an HDF5 file");
  }
  id_ = H5Fopen(path.c_str(), mode == Mode::kRead ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT);
  if (id_ < 0) CREMA_THROW_RUNTIME("cannot open HDF5 file ", path, HDF5Reason());
}

Hdf5File::~Hdf5File() {
  if (id_ < 0) return;
  QuietHDF5 quiet;
  H5Fclose(id_);
  H5Eclear2(H5E_DEFAULT);
}

void Hdf5File::Close() {
  if (id_ < 0) return;
  QuietHDF5 quiet;
  const hid_t id = id_;
  id_ = -1;
  if (H5Fclose(id) < 0) CREMA_THROW_RUNTIME("cannot close HDF5 file ", path_, HDF5Reason());
}

hid_t Hdf5File::OpenGroup(const std::string& name) const {
  QuietHDF5 quiet;
  if (!Hdf5HasLink(id_, name)) CREMA_THROW_CONFIG(path_, ": HDF5 group /", name, " does not exist");
  const hid_t group = H5Gopen2(id_, name.c_str(), H5P_DEFAULT);
  if (group < 0) CREMA_THROW_RUNTIME(path_, ": cannot open HDF5 group /", name, HDF5Reason());
  return group;
}

hid_t Hdf5File::CreateGroup(const std::string& name) const {
  QuietHDF5 quiet;
  const hid_t group = H5Gcreate2(id_, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0) CREMA_THROW_RUNTIME(path_, ": cannot create HDF5 group /", name, HDF5Reason());
  return group;
}

bool IsHdf5File(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  QuietHDF5 quiet;
  const bool yes = H5Fis_hdf5(path.c_str()) > 0;
  H5Eclear2(H5E_DEFAULT);
  return yes;
}

Hdf5Handle CreateHdf5Group(hid_t loc, const std::string& name) {
  QuietHDF5 quiet;
  hid_t group = H5Gcreate2(loc, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (group < 0)
    CREMA_THROW_RUNTIME("cannot create HDF5 group ", Hdf5Where(loc, name), HDF5Reason());
  return Hdf5Handle(group);
}

Hdf5Handle OpenHdf5Group(hid_t loc, const std::string& name) {
  QuietHDF5 quiet;
  if (!Hdf5HasLink(loc, name))
    CREMA_THROW_CONFIG("HDF5 group ", Hdf5Where(loc, name), " does not exist");
  hid_t group = H5Gopen2(loc, name.c_str(), H5P_DEFAULT);
  if (group < 0) CREMA_THROW_RUNTIME("cannot open HDF5 group ", Hdf5Where(loc, name), HDF5Reason());
  return Hdf5Handle(group);
}

bool Hdf5HasLink(hid_t loc, const std::string& name) {
  if (name.empty()) return false;
  QuietHDF5 quiet;
  const bool yes = H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0;
  H5Eclear2(H5E_DEFAULT);
  return yes;
}

bool Hdf5HasDataset(hid_t loc, const std::string& name) {
  if (!Hdf5HasLink(loc, name)) return false;
  QuietHDF5 quiet;
  const hid_t object = H5Oopen(loc, name.c_str(), H5P_DEFAULT);
  if (object < 0) {
    H5Eclear2(H5E_DEFAULT);
    return false;
  }
  const bool yes = H5Iget_type(object) == H5I_DATASET;
  H5Oclose(object);
  return yes;
}

// By index rather than H5Literate, whose callback signature differs between HDF5 1.10 and 1.12.
std::vector<std::string> Hdf5ChildNames(hid_t loc) {
  QuietHDF5 quiet;
  H5G_info_t info;
  if (H5Gget_info(loc, &info) < 0)
    CREMA_THROW_RUNTIME("cannot list HDF5 group ", Hdf5Where(loc), HDF5Reason());
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t length =
        H5Lget_name_by_idx(loc, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (length < 0) CREMA_THROW_RUNTIME("cannot list HDF5 group ", Hdf5Where(loc), HDF5Reason());
    std::string name(length + 1, '\0');
    H5Lget_name_by_idx(loc, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), name.size(),
                       H5P_DEFAULT);
    name.resize(length);
    names.push_back(name);
  }
  return names;
}

std::string Hdf5Where(hid_t loc, const std::string& name) {
  QuietHDF5 quiet;
  std::string file, object;
  const ssize_t file_len = H5Fget_name(loc, nullptr, 0);
  if (file_len > 0) {
    file.resize(file_len + 1);
    H5Fget_name(loc, file.data(), file.size());
    file.resize(file_len);
  }
  const ssize_t object_len = H5Iget_name(loc, nullptr, 0);
  if (object_len > 0) {
    object.resize(object_len + 1);
    H5Iget_name(loc, object.data(), object.size());
    object.resize(object_len);
  }
  H5Eclear2(H5E_DEFAULT);
  if (!name.empty()) object += (object.empty() || object.back() != '/' ? "/" : "") + name;
  if (file.empty()) return object.empty() ? "(HDF5)" : object;
  return file + ":" + (object.empty() ? "/" : object);
}

void WriteBlobToHDF5(hid_t loc, const std::string& name, const Blob& blob, bool diff) {
  QuietHDF5 quiet;
  DeleteIfPresent(loc, name);
  std::vector<hsize_t> dims(blob.shape().begin(), blob.shape().end());
  const hsize_t* dims_ptr = dims.empty() ? nullptr : dims.data();
  const int rank = static_cast<int>(dims.size());
  herr_t status = -1;
  switch (blob.dtype()) {
    case DataType::kFloat32: {
      static const float kNone = 0;
      const float* values =
          blob.count() == 0 ? &kNone : (diff ? blob.cpu_diff<float>() : blob.cpu_data<float>());
      status = H5LTmake_dataset_float(loc, name.c_str(), rank, dims_ptr, values);
      break;
    }
    case DataType::kFloat64: {
      static const double kNone = 0;
      const double* values =
          blob.count() == 0 ? &kNone : (diff ? blob.cpu_diff<double>() : blob.cpu_data<double>());
      status = H5LTmake_dataset_double(loc, name.c_str(), rank, dims_ptr, values);
      break;
    }
    default:
      CREMA_THROW_CONFIG("cannot write a ", DataTypeName(blob.dtype()), " blob to HDF5 (",
                         Hdf5Where(loc, name), "): float32 and float64 are supported");
  }
  if (status < 0)
    CREMA_THROW_RUNTIME("cannot write HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
}

std::vector<int> Hdf5DatasetShape(hid_t loc, const std::string& name) {
  QuietHDF5 quiet;
  RequireDataset(loc, name);
  int rank = 0;
  if (H5LTget_dataset_ndims(loc, name.c_str(), &rank) < 0)
    CREMA_THROW_RUNTIME("cannot read HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
  if (rank > Blob::kMaxAxes)
    CREMA_THROW_CONFIG("HDF5 dataset ", Hdf5Where(loc, name), " has ", rank,
                       " axes; a blob has at most ", Blob::kMaxAxes);
  std::vector<hsize_t> dims(std::max(rank, 1));
  H5T_class_t type_class;
  size_t type_size = 0;
  if (H5LTget_dataset_info(loc, name.c_str(), dims.data(), &type_class, &type_size) < 0)
    CREMA_THROW_RUNTIME("cannot read HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
  std::vector<int> shape;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] > static_cast<hsize_t>(std::numeric_limits<int>::max()))
      CREMA_THROW_CONFIG("HDF5 dataset ", Hdf5Where(loc, name), " axis ", i, " is too long (",
                         dims[i], ")");
    shape.push_back(static_cast<int>(dims[i]));
  }
  return shape;
}

void ReadBlobFromHDF5(hid_t loc, const std::string& name, Blob* blob, bool reshape, bool diff) {
  QuietHDF5 quiet;
  const std::vector<int> shape = Hdf5DatasetShape(loc, name);
  std::vector<hsize_t> dims(std::max<size_t>(shape.size(), 1));
  H5T_class_t type_class;
  size_t type_size = 0;
  if (H5LTget_dataset_info(loc, name.c_str(), dims.data(), &type_class, &type_size) < 0)
    CREMA_THROW_RUNTIME("cannot read HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
  if (type_class != H5T_FLOAT && type_class != H5T_INTEGER)
    CREMA_THROW_CONFIG("HDF5 dataset ", Hdf5Where(loc, name),
                       " is not numeric (float or integer data expected)");
  if (reshape) {
    blob->Reshape(shape);
  } else if (blob->shape() != shape) {
    CREMA_THROW_CONFIG("shape mismatch: HDF5 dataset ", Hdf5Where(loc, name), " has shape ",
                       ShapeText(shape), " but the blob has shape ", ShapeText(blob->shape()));
  }
  if (blob->count() == 0) return;
  herr_t status = -1;
  // H5LT converts from the stored type (float, double or integer) to the requested one.
  switch (blob->dtype()) {
    case DataType::kFloat32:
      status = H5LTread_dataset_float(
          loc, name.c_str(),
          diff ? blob->mutable_cpu_diff<float>() : blob->mutable_cpu_data<float>());
      break;
    case DataType::kFloat64:
      status = H5LTread_dataset_double(
          loc, name.c_str(),
          diff ? blob->mutable_cpu_diff<double>() : blob->mutable_cpu_data<double>());
      break;
    default:
      CREMA_THROW_CONFIG("cannot read HDF5 dataset ", Hdf5Where(loc, name), " into a ",
                         DataTypeName(blob->dtype()), " blob: float32 and float64 are supported");
  }
  if (status < 0)
    CREMA_THROW_RUNTIME("cannot read HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
}

void WriteHdf5Int(hid_t loc, const std::string& name, int value) {
  QuietHDF5 quiet;
  DeleteIfPresent(loc, name);
  if (H5LTmake_dataset_int(loc, name.c_str(), 0, nullptr, &value) < 0)
    CREMA_THROW_RUNTIME("cannot write HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
}

int ReadHdf5Int(hid_t loc, const std::string& name) {
  QuietHDF5 quiet;
  RequireDataset(loc, name);
  int value = 0;
  if (H5LTread_dataset_int(loc, name.c_str(), &value) < 0)
    CREMA_THROW_RUNTIME("cannot read integer HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
  return value;
}

void WriteHdf5Double(hid_t loc, const std::string& name, double value) {
  QuietHDF5 quiet;
  DeleteIfPresent(loc, name);
  if (H5LTmake_dataset_double(loc, name.c_str(), 0, nullptr, &value) < 0)
    CREMA_THROW_RUNTIME("cannot write HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
}

double ReadHdf5Double(hid_t loc, const std::string& name) {
  QuietHDF5 quiet;
  RequireDataset(loc, name);
  double value = 0;
  if (H5LTread_dataset_double(loc, name.c_str(), &value) < 0)
    CREMA_THROW_RUNTIME("cannot read HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
  return value;
}

void WriteHdf5String(hid_t loc, const std::string& name, const std::string& value) {
  QuietHDF5 quiet;
  DeleteIfPresent(loc, name);
  if (H5LTmake_dataset_string(loc, name.c_str(), value.c_str()) < 0)
    CREMA_THROW_RUNTIME("cannot write HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
}

std::string ReadHdf5String(hid_t loc, const std::string& name) {
  QuietHDF5 quiet;
  RequireDataset(loc, name);
  Hdf5Handle dataset(H5Dopen2(loc, name.c_str(), H5P_DEFAULT));
  if (!dataset.valid())
    CREMA_THROW_RUNTIME("cannot open HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
  Hdf5Handle type(H5Dget_type(dataset.get()));
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING)
    CREMA_THROW_CONFIG("HDF5 dataset ", Hdf5Where(loc, name), " is not a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    // Variable-length strings (h5py's default): read the pointer, copy, reclaim.
    Hdf5Handle memtype(H5Tcopy(H5T_C_S1));
    H5Tset_size(memtype.get(), H5T_VARIABLE);
    char* text = nullptr;
    if (H5Dread(dataset.get(), memtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, &text) < 0)
      CREMA_THROW_RUNTIME("cannot read HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
    std::string value = text != nullptr ? text : "";
    Hdf5Handle space(H5Dget_space(dataset.get()));
    H5Dvlen_reclaim(memtype.get(), space.get(), H5P_DEFAULT, &text);
    return value;
  }
  std::vector<char> buffer(H5Tget_size(type.get()) + 1, '\0');
  if (H5LTread_dataset_string(loc, name.c_str(), buffer.data()) < 0)
    CREMA_THROW_RUNTIME("cannot read HDF5 dataset ", Hdf5Where(loc, name), HDF5Reason());
  return std::string(buffer.data());
}

void WriteHdf5IntAttribute(hid_t loc, const std::string& object_name, const std::string& attribute,
                           int value) {
  QuietHDF5 quiet;
  if (H5LTset_attribute_int(loc, object_name.c_str(), attribute.c_str(), &value, 1) < 0)
    CREMA_THROW_RUNTIME("cannot write HDF5 attribute ", attribute, " of ",
                        Hdf5Where(loc, object_name), HDF5Reason());
}

int ReadHdf5IntAttribute(hid_t loc, const std::string& object_name, const std::string& attribute) {
  QuietHDF5 quiet;
  if (!Hdf5HasAttribute(loc, object_name, attribute))
    CREMA_THROW_CONFIG("HDF5 object ", Hdf5Where(loc, object_name), " has no attribute ",
                       attribute);
  int value = 0;
  if (H5LTget_attribute_int(loc, object_name.c_str(), attribute.c_str(), &value) < 0)
    CREMA_THROW_RUNTIME("cannot read HDF5 attribute ", attribute, " of ",
                        Hdf5Where(loc, object_name), HDF5Reason());
  return value;
}

void WriteHdf5StringAttribute(hid_t loc, const std::string& object_name,
                              const std::string& attribute, const std::string& value) {
  QuietHDF5 quiet;
  if (H5LTset_attribute_string(loc, object_name.c_str(), attribute.c_str(), value.c_str()) < 0)
    CREMA_THROW_RUNTIME("cannot write HDF5 attribute ", attribute, " of ",
                        Hdf5Where(loc, object_name), HDF5Reason());
}

std::string ReadHdf5StringAttribute(hid_t loc, const std::string& object_name,
                                    const std::string& attribute) {
  QuietHDF5 quiet;
  if (!Hdf5HasAttribute(loc, object_name, attribute))
    CREMA_THROW_CONFIG("HDF5 object ", Hdf5Where(loc, object_name), " has no attribute ",
                       attribute);
  Hdf5Handle attr(
      H5Aopen_by_name(loc, object_name.c_str(), attribute.c_str(), H5P_DEFAULT, H5P_DEFAULT));
  Hdf5Handle type(attr.valid() ? H5Aget_type(attr.get()) : -1);
  if (!type.valid() || H5Tget_class(type.get()) != H5T_STRING)
    CREMA_THROW_CONFIG("HDF5 attribute ", attribute, " of ", Hdf5Where(loc, object_name),
                       " is not a string");
  if (H5Tis_variable_str(type.get()) > 0) {
    Hdf5Handle memtype(H5Tcopy(H5T_C_S1));
    H5Tset_size(memtype.get(), H5T_VARIABLE);
    char* text = nullptr;
    if (H5Aread(attr.get(), memtype.get(), &text) < 0)
      CREMA_THROW_RUNTIME("cannot read HDF5 attribute ", attribute, " of ",
                          Hdf5Where(loc, object_name), HDF5Reason());
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  std::vector<char> buffer(H5Tget_size(type.get()) + 1, '\0');
  if (H5LTget_attribute_string(loc, object_name.c_str(), attribute.c_str(), buffer.data()) < 0)
    CREMA_THROW_RUNTIME("cannot read HDF5 attribute ", attribute, " of ",
                        Hdf5Where(loc, object_name), HDF5Reason());
  return std::string(buffer.data());
}

bool Hdf5HasAttribute(hid_t loc, const std::string& object_name, const std::string& attribute) {
  QuietHDF5 quiet;
  const bool yes = H5Aexists_by_name(loc, object_name.c_str(), attribute.c_str(), H5P_DEFAULT) > 0;
  H5Eclear2(H5E_DEFAULT);
  return yes;
}

}  // namespace crema
