// The measurement table the prior benchmark replays: one JSON object per line,
//   {"kernel":"matmul_64x64x64","op_class":"matmul","dtype":"f32","shape":[64,64],
//    "flops":524288,"bytes":49152,"regime":"rank","time_us":12.5,"knobs":{"mr":6,...}}
// written by emmy-prior-measure (no JSON library needed there), read by emmy-prior-bench.
#pragma once

#include <cstdio>
#include <string>

#include "emmy/ir.hpp"
#include "emmy/prior.hpp"
#include "emmy/templates.hpp"

namespace emmy::prior_bench {

struct TableRow {
  std::string kernel;  // which kernel of the table (rows of one kernel differ only in knobs)
  PriorRow row;
};

inline std::string json_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Names here are identifiers and op names: no characters that need escaping.
inline std::string to_json_line(const TableRow& t) {
  const auto& f = t.row.features;
  std::string s = "{\"kernel\":\"" + t.kernel + "\",\"op_class\":\"" + f.op_class +
                  "\",\"dtype\":\"" + f.dtype + "\",\"shape\":[";
  for (size_t i = 0; i < f.shape.size(); ++i) s += (i ? "," : "") + std::to_string(f.shape[i]);
  s += "],\"flops\":" + json_number(f.flops) + ",\"bytes\":" + json_number(f.bytes) +
       ",\"regime\":\"" + to_string(t.row.regime) + "\",\"time_us\":" + json_number(t.row.time_us) +
       ",\"knobs\":{";
  bool first = true;
  for (const auto& [k, v] : t.row.knobs) {
    s += (first ? "\"" : ",\"") + k + "\":" + json_number(v);
    first = false;
  }
  return s + "}}";
}

// The features the tuner gives the prior for a kernel (core/search/prior_row.cpp's
// kernel_features, repeated here so this header needs the SDK only): the template as op class,
// FLOPs and boundary bytes, the first output's shape and dtype.
inline KernelFeatures features_of(const ir::Graph& g, const ir::Kernel& k) {
  KernelFeatures f;
  f.op_class = k.templ.empty() ? best_template(g, k) : k.templ;
  const ir::KernelStats stats = ir::kernel_stats(g, k);
  f.flops = stats.flops;
  f.bytes = stats.bytes;
  const ir::KernelBoundary b = ir::boundary(g, k);
  if (!b.outputs.empty()) {
    const ir::TensorType& t = g.type(b.outputs.front());
    f.shape = t.shape;
    f.dtype = std::string(ir::to_string(t.dtype));
  }
  return f;
}

}  // namespace emmy::prior_bench
