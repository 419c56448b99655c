// Which stored kernel names a `--kernel NAME` means (emmy eval variants/failures): the names that
// `emmy trace` and `emmy tune` print ("input_layernorm", "self_attn.q_proj+k_proj+v_proj",
// "matmul") are what users type back, in full, spelled out, shortened or as a prefix.
#pragma once

#include <string>
#include <vector>

namespace emmy::store {

// The stored names `query` means, from `names` (the distinct kernel names of the database), by
// the first rule that matches any:
//   1. the exact name;
//   2. the same parts once a "+"-joined name is spelled out ("self_attn.q_proj+k_proj" is
//      "self_attn.q_proj+self_attn.k_proj"), each part of one a dot-suffix of the other's, so
//      "q_proj+k_proj" and "model.layers.0.self_attn.q_proj+model.layers.0.self_attn.k_proj"
//      both mean "self_attn.q_proj+k_proj";
//   3. every name that starts with `query` ("input_layer" -> "input_layernorm").
// Empty when nothing matches. The result is sorted.
std::vector<std::string> match_kernel_names(const std::string& query,
                                            const std::vector<std::string>& names);

// "self_attn.q_proj+k_proj" -> {"self_attn.q_proj", "self_attn.k_proj"}: each part of a
// "+"-joined name with the module prefix it shares with the part before written out.
std::vector<std::string> spelled_out_parts(const std::string& name);

}  // namespace emmy::store
