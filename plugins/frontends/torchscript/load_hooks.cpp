#include "load_hooks.hpp"

#include <caffe2/serialize/inline_container.h>

#include <regex>
#include <set>

#include "emmy/status.hpp"

namespace emmy::ts {

namespace {

// The methods the TorchScript unpickler calls while restoring objects. __setstate__ is the only
// one LibTorch runs from file code today; __reduce__-style names are refused as well, so that a
// later LibTorch calling them does not silently widen what loading runs.
const std::regex& hook_definition() {
  static const std::regex r(
      R"(\bdef\s+(__setstate__|__reduce__|__reduce_ex__|__getnewargs__)\s*\()");
  return r;
}

bool is_code_entry(const std::string& name) {
  // Entries are named without the archive's root folder: "code/__torch__/foo.py".
  return name.size() > 3 && name.compare(name.size() - 3, 3, ".py") == 0;
}

}  // namespace

std::vector<std::string> load_hooks(const std::string& path) {
  std::vector<std::string> found;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    for (const std::string& name : reader.getAllRecords()) {
      if (!is_code_entry(name)) continue;
      auto [data, size] = reader.getRecord(name);
      const std::string text(static_cast<const char*>(data.get()), size);
      std::set<std::string> methods;
      for (auto it = std::sregex_iterator(text.begin(), text.end(), hook_definition());
           it != std::sregex_iterator(); ++it)
        methods.insert((*it)[1].str());
      for (const auto& m : methods) found.push_back(name + " (" + m + ")");
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("'" + path + "' is not a TorchScript archive LibTorch can read: " +
                std::string(e.what()).substr(0, std::string(e.what()).find('\n')));
  }
  return found;
}

void refuse_load_hooks(const std::string& path, bool trusted) {
  if (trusted) return;
  const std::vector<std::string> hooks = load_hooks(path);
  if (hooks.empty()) return;
  std::string list;
  for (const auto& h : hooks) list += (list.empty() ? "" : ", ") + h;
  throw Error("'" + path + "' carries code that LibTorch runs while loading it (" + list +
              "); emmy runs no code from a file it was not told to trust: if you trust the file "
              "and its author, pass --trust (docs/SECURITY.md)");
}

}  // namespace emmy::ts
