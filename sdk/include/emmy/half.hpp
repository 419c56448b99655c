// 16-bit floating point conversions, round-to-nearest-even, header-only so that backends'
// generated host code, the interpreter and tests all round exactly the same way.
//   bf16: 1 sign, 8 exponent, 7 mantissa bits (the top half of an f32)
//   f16:  1 sign, 5 exponent, 10 mantissa bits (IEEE binary16, with subnormals)
#pragma once

#include <bit>
#include <cstdint>

namespace emmy {

inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // NaN
  uint32_t rounding = 0x7FFFu + ((x >> 16) & 1u);  // ties go to the even neighbour
  return static_cast<uint16_t>((x + rounding) >> 16);
}

inline float bf16_bits_to_f32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t f32_to_f16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);   // NaN
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 65520: inf
  int32_t exp = static_cast<int32_t>(abs >> 23) - 127 + 15;
  uint32_t mant = abs & 0x7FFFFFu;
  if (exp <= 0) {                // subnormal or zero in f16
    if (exp < -10) return sign;  // below half the smallest subnormal: rounds to zero
    mant |= 0x800000u;           // make the implicit bit explicit
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half_bits = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_bits & 1u))) ++half_bits;
    return static_cast<uint16_t>(sign | half_bits);
  }
  uint32_t half_bits = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (half_bits & 1u))) ++half_bits;  // may carry into exp
  return static_cast<uint16_t>(sign | half_bits);
}

inline float f16_bits_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf/NaN
  if (exp == 0) {
    if (mant == 0) return std::bit_cast<float>(sign);
    // Subnormal: value = mant * 2^-24.
    float v = static_cast<float>(mant) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 127 - 15) << 23) | (mant << 13));
}

// The nearest representable value, as an f32.
inline float round_to_bf16(float f) {
  return bf16_bits_to_f32(f32_to_bf16_bits(f));
}
inline float round_to_f16(float f) {
  return f16_bits_to_f32(f32_to_f16_bits(f));
}

}  // namespace emmy
