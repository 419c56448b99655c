// Status: how every call across the plugin boundary reports failure.
// No exception may cross the boundary (docs/DESIGN.md, Plugins), so plugin entry points catch
// everything and return a Status; `guard` is the one helper that does the catching.
#pragma once

#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace emmy {

class Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }

  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }

 private:
  explicit Status(std::string message) : failed_(true), message_(std::move(message)) {}
  bool failed_ = false;
  std::string message_;
};

// Runs `body` (which returns Status or void) and turns any exception into an error Status.
template <typename F>
Status guard(F&& body) noexcept {
  try {
    if constexpr (std::is_void_v<decltype(body())>) {
      body();
      return Status::Ok();
    } else {
      return body();
    }
  } catch (const std::exception& e) {
    return Status::Error(e.what());
  } catch (...) {
    return Status::Error("unknown exception");
  }
}

// Thrown inside the SDK/core for errors; converted to Status at the boundary.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace emmy
