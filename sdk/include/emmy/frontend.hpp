// Frontends turn a source (model id, TorchScript file, inline expression) into a graph.
#pragma once

#include <map>
#include <string>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"

namespace emmy {

struct FrontendRequest {
  std::string source;                          // model id or file path ("" with --code)
  std::string code;                            // inline expression (--code)
  std::map<std::string, std::string> options;  // --layer, --batch, --seq, --dtype, --config, ...
};

class Frontend {
 public:
  virtual ~Frontend() = default;
  virtual std::string name() const = 0;
  // True when this frontend can read the request (so the host can pick one automatically).
  virtual bool accepts(const FrontendRequest& request) const noexcept = 0;
  virtual Status load(const FrontendRequest& request, ir::Graph& graph) noexcept = 0;
};

}  // namespace emmy
