#pragma once
// IEEE 754 binary16 <-> binary32 on the CPU, bit-exact: FloatToHalf rounds to nearest, ties to
// even (overflow to infinity, subnormals kept, NaN stays NaN); HalfToFloat is exact. Used for
// fp16 weights in .caffemodel files (BlobProto.half_data, two little-endian bytes per value) and
// mixed precision (math/convert.hpp). bfloat16 (the upper half of a binary32) likewise.
#include <cstdint>
#include <cstring>
#include <string>

namespace crema {

inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf or NaN
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  } else if (mantissa == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: normalise the mantissa.
    int e = -1;
    do {
      ++e;
      mantissa <<= 1;
    } while ((mantissa & 0x400u) == 0);
    bits = sign | static_cast<uint32_t>(112 - e) << 23 | ((mantissa & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToHalf(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf, or NaN (kept quiet and non-zero)
    return sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u | ((abs >> 13) & 0x3ffu) : 0u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: infinity
  const int exponent = static_cast<int>(abs >> 23) - 127;
  if (exponent < -25) return sign;  // below half the smallest subnormal: +-0
  uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  // The number of low bits of the 24-bit mantissa that do not fit.
  const int shift = exponent < -14 ? 13 + (-14 - exponent) : 13;
  const uint32_t kept = mantissa >> shift;
  const uint32_t rest = mantissa & ((1u << shift) - 1);
  const uint32_t half_way = 1u << (shift - 1);
  uint32_t rounded = kept + ((rest > half_way || (rest == half_way && (kept & 1u))) ? 1u : 0u);
  if (exponent < -14) return sign | static_cast<uint16_t>(rounded);  // subnormal (may carry up)
  // Normal: the carry of the rounding may bump the exponent, which the addition handles.
  rounded = (static_cast<uint32_t>(exponent + 15) << 10) + (rounded - 0x400u);
  return sign | static_cast<uint16_t>(rounded);
}

inline float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToBFloat16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  // Round to nearest, ties to even; a carry out of the mantissa bumps the exponent (up to inf).
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// `count` values packed as two little-endian bytes each.
inline std::string PackHalves(const float* values, int64_t count) {
  std::string bytes(static_cast<size_t>(count) * 2, '\0');
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t h = FloatToHalf(values[i]);
    bytes[2 * i] = static_cast<char>(h & 0xff);
    bytes[2 * i + 1] = static_cast<char>(h >> 8);
  }
  return bytes;
}

inline float UnpackHalf(const std::string& bytes, int64_t index) {
  const auto lo = static_cast<unsigned char>(bytes[2 * index]);
  const auto hi = static_cast<unsigned char>(bytes[2 * index + 1]);
  return HalfToFloat(static_cast<uint16_t>(lo | (hi << 8)));
}

}  // namespace crema
