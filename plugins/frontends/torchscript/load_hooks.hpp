// What a TorchScript file would run while LibTorch loads it. torch::jit::load calls the
// `__setstate__` method of every object whose class defines one, with code that the file itself
// carries (its code/ entries): loading an untrusted .pt file runs its author's code (issue 21:
// one wrote a file outside EMMY_HOME during `emmy trace evil.pt`). The archive is read here with
// LibTorch's own zip reader, which unpickles and compiles nothing, before torch::jit::load.
#pragma once

#include <string>
#include <vector>

namespace emmy::ts {

// The code entries of the archive at `path` that define a method run on load, as
// "code/__torch__.py (__setstate__)"; empty when there are none. Throws emmy::Error when the
// file is not a TorchScript archive.
std::vector<std::string> load_hooks(const std::string& path);

// Throws emmy::Error naming the hooks and --trust unless `trusted` or there are none.
void refuse_load_hooks(const std::string& path, bool trusted);

}  // namespace emmy::ts
