// The stored form of every database record: a small envelope around a JSON payload.
//
//   byte 0     format version (kRecordVersion)
//   byte 1     record type ('M' measurement, 'K' kernel, 'R' run, 'P' plan, 'N' tree node)
//   bytes 2-5  CRC-32 (little endian) of byte 0, byte 1 and the payload
//   bytes 6-   payload: the record as JSON text
//
// decode_* never throws on bad bytes: it returns false and says why, so that a corrupt record
// is reported with its key and skipped instead of stopping a run or `emmy eval`.
#pragma once

#include <string>
#include <string_view>

#include "store/records.hpp"

namespace emmy::store {

inline constexpr unsigned char kRecordVersion = 1;

std::string encode_record(const MeasurementRecord& r);
std::string encode_record(const KernelRecord& r);
std::string encode_record(const RunRecord& r);
std::string encode_record(const PlanRecord& r);

// Each returns true and fills `out`, or returns false with `why` set (out is then unspecified).
bool decode_record(std::string_view stored, MeasurementRecord& out, std::string& why);
bool decode_record(std::string_view stored, KernelRecord& out, std::string& why);
bool decode_record(std::string_view stored, RunRecord& out, std::string& why);
bool decode_record(std::string_view stored, PlanRecord& out, std::string& why);

}  // namespace emmy::store
