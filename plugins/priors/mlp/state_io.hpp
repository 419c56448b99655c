// The mlp prior's state as a plain binary string (fast to write and read; no torch::save): a
// magic tag, fixed-width native-endian numbers, length-prefixed strings and vectors, and an
// FNV-1a checksum of everything before it. StateReader throws emmy::Error naming what it found
// wrong, so load() of garbage fails cleanly instead of reading past the end.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "emmy/status.hpp"

namespace emmy::priors {

inline uint64_t fnv1a(const char* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

class StateWriter {
 public:
  template <typename T>
  void put(T value) {
    static_assert(std::is_arithmetic_v<T>);
    out_.append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    out_ += s;
  }
  template <typename T>
  void put_vector(const std::vector<T>& v) {
    static_assert(std::is_arithmetic_v<T>);
    put<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  // Appends the checksum and returns the finished state.
  std::string finish() {
    put<uint64_t>(fnv1a(out_.data(), out_.size()));
    return std::move(out_);
  }

 private:
  std::string out_;
};

class StateReader {
 public:
  // Checks the trailing checksum first, so a truncated or altered state is refused whole.
  explicit StateReader(const std::string& state) : data_(state) {
    if (state.size() < sizeof(uint64_t))
      throw Error("mlp prior state is too short (" + std::to_string(state.size()) + " bytes)");
    end_ = state.size() - sizeof(uint64_t);
    uint64_t stored;
    std::memcpy(&stored, state.data() + end_, sizeof stored);
    if (stored != fnv1a(state.data(), end_))
      throw Error("mlp prior state fails its checksum (truncated, altered, or not an mlp state)");
  }
  template <typename T>
  T get() {
    static_assert(std::is_arithmetic_v<T>);
    need(sizeof(T));
    T value;
    std::memcpy(&value, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string get_string() {
    const uint64_t n = get<uint64_t>();
    need(n);
    std::string s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  template <typename T>
  std::vector<T> get_vector() {
    const uint64_t n = get<uint64_t>();
    if (n > (end_ - pos_) / sizeof(T))
      throw Error("mlp prior state: vector length runs past the end");
    std::vector<T> v(n);
    std::memcpy(v.data(), data_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  bool at_end() const { return pos_ == end_; }

 private:
  void need(uint64_t n) const {
    if (n > end_ - pos_) throw Error("mlp prior state ends early (corrupt or truncated)");
  }
  const std::string& data_;
  size_t pos_ = 0;
  size_t end_ = 0;
};

}  // namespace emmy::priors
