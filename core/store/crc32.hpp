// CRC-32 (the IEEE 802.3 / zlib polynomial) over stored bytes: every record in the tuning
// database and every checkpoint file carries one, so corruption is detected on read.
#pragma once

#include <cstdint>
#include <string_view>

namespace emmy::store {

// `seed` continues a previous call: crc32(b, crc32(a)) == crc32(a + b).
uint32_t crc32(std::string_view bytes, uint32_t seed = 0);

}  // namespace emmy::store
