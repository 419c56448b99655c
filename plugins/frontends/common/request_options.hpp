// Request options a frontend has no use for are refused, not ignored: `emmy tune model.pt2
// --layer 0` would otherwise tune the whole program while the user believes they tuned a layer.
#pragma once

#include <initializer_list>
#include <string>

#include "emmy/frontend.hpp"
#include "emmy/status.hpp"

namespace emmy::frontends {

// Throws emmy::Error for the first of `keys` present in the request, naming it as the command
// line spells it ("config" is --model-config) and saying it does not apply to `what`.
inline void refuse_request_options(const FrontendRequest& r,
                                   std::initializer_list<const char*> keys,
                                   const std::string& what) {
  for (const char* key : keys) {
    if (!r.options.count(key)) continue;
    const std::string flag =
        std::string(key) == "config" ? "--model-config" : "--" + std::string(key);
    throw Error(flag + " does not apply to " + what);
  }
}

}  // namespace emmy::frontends
