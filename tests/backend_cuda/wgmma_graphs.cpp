#include "wgmma_graphs.hpp"

namespace emmy::cuda::wgmma_test {

std::map<std::string, double> wgmma(int64_t tile_m, int64_t tile_n, int64_t stages, int64_t tile_k,
                                    int64_t warps) {
  return {{"tile_m", double(tile_m)}, {"tile_n", double(tile_n)},
          {"tile_k", double(tile_k)}, {"warps", double(warps ? warps : tile_m / 16)},
          {"stages", double(stages)}, {"wgmma", 1}};
}

std::map<std::string, double> specialized(int64_t tile_m, int64_t tile_n, int64_t stages,
                                          int64_t splits, int64_t tile_k, int64_t warps,
                                          int64_t cluster) {
  std::map<std::string, double> k = wgmma(tile_m, tile_n, stages, tile_k, warps);
  k["wgmma"] = 2;
  k["splits"] = double(splits);
  k["cluster"] = double(cluster);
  return k;
}

std::map<std::string, double> with_knobs(std::map<std::string, double> knobs,
                                         const std::map<std::string, double>& extra) {
  for (const auto& [name, value] : extra) knobs[name] = value;
  return knobs;
}

void add_with(std::vector<std::map<std::string, double>>& knobs,
              const std::vector<std::map<std::string, double>>& tiles,
              const std::map<std::string, double>& extra) {
  for (const auto& k : tiles) knobs.push_back(with_knobs(k, extra));
}

void add_persistent(std::vector<std::map<std::string, double>>& knobs,
                    const std::vector<std::map<std::string, double>>& tiles) {
  for (const auto& k : tiles)
    for (double staged : {0.0, 1.0})
      knobs.push_back(with_knobs(k, {{"persistent", 1}, {"staged", staged}}));
}

void add_pingpong(std::vector<std::map<std::string, double>>& knobs,
                  const std::vector<std::map<std::string, double>>& tiles) {
  for (const auto& k : tiles)
    for (double staged : {0.0, 1.0})
      knobs.push_back(with_knobs(k, {{"persistent", 1}, {"pingpong", 1}, {"staged", staged}}));
}

ir::Slice two_wgmma_linears(int64_t m, int64_t k, int64_t n1, int64_t n2) {
  ir::Slice s;
  ir::Builder b(s.graph);
  auto x = b.input("x", {ir::DType::bf16, {m, k}});
  auto w1 = b.input("w1", {ir::DType::bf16, {n1, k}}, "weight");
  auto w2 = b.input("w2", {ir::DType::bf16, {n2, n1}}, "weight");
  auto h = b.linear(x, w1);
  auto y = b.linear(h, w2);
  s.graph.outputs = {y};
  ir::Kernel k1, k2;
  k1.nodes = {h};
  k2.nodes = {y};
  k1.templ = k2.templ = "matmul";
  k1.knobs = wgmma(64, 64, 2);
  k2.knobs = wgmma(128, 64, 3, 32);
  s.grouping.kernels = {k2, k1};  // not in dependency order: the program orders them
  for (size_t v = 0; v < s.graph.nodes.size(); ++v) s.origin.push_back(static_cast<ir::ValueId>(v));
  return s;
}

}  // namespace emmy::cuda::wgmma_test
