#pragma once
// NumPy .npy files (format versions 1.0, 2.0 and 3.0): read little-endian float32/float64 (and
// integer arrays, converted) in C order; write float32. Anything else -- big-endian data,
// Fortran order, object arrays, a truncated file -- is a ConfigError naming the file.
#include <cstdint>
#include <string>
#include <vector>

#include "crema/blob.hpp"

namespace crema {

struct NpyArray {
  std::vector<int64_t> shape;  // () for a scalar
  std::string descr;           // the dtype as written in the file, e.g. "<f4"
  std::vector<double> values;  // C order, count = product of shape
};

NpyArray ReadNpy(const std::string& path);
// Parses an in-memory .npy; `name` is used in error messages.
NpyArray ParseNpy(const std::string& bytes, const std::string& name);

// Reshapes `blob` to the array's shape and copies the values into its data (float32 or float64).
void ReadNpyIntoBlob(const std::string& path, Blob* blob);

std::string NpyBytesFloat32(const std::vector<int64_t>& shape, const float* data);
void WriteNpyFloat32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
// Writes the blob's data (or diff) as float32, whatever its element type.
void WriteBlobNpy(const std::string& path, const Blob& blob, bool diff = false);

}  // namespace crema
