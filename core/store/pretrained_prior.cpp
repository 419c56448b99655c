#include "store/pretrained_prior.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace emmy::store {
namespace {

constexpr char kMagic[] = "EMMY-PRETRAINED-PRIOR 1";

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Names that go into a file name and a header line: no spaces, no path separators.
void check_word(const std::string& what, const std::string& v) {
  if (v.empty() || v.find_first_of(" \t\n/\\") != std::string::npos)
    throw Error("pretrained prior: " + what + " '" + v + "' must be one word without '/'");
}

}  // namespace

std::string pretrained_file_name(const std::string& prior, const std::string& backend,
                                 const std::string& arch) {
  return prior + "-pretrained-" + backend + "-" + arch + ".ckpt";
}

PretrainedPrior read_pretrained_prior(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read the pretrained prior " + path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string where = "pretrained prior " + path + ": ";
  size_t pos = 0;
  auto next_line = [&]() -> std::string {
    const size_t end = text.find('\n', pos);
    if (end == std::string::npos) throw Error(where + "ends inside its header");
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    return line;
  };
  if (text.compare(0, sizeof kMagic - 1, kMagic) != 0 || next_line() != kMagic)
    throw Error(where + "not a pretrained prior file (no '" + std::string(kMagic) + "' line)");
  std::map<std::string, std::string> fields;
  for (;;) {
    const std::string line = next_line();
    const size_t space = line.find(' ');
    const std::string key = line.substr(0, space);
    fields[key] = space == std::string::npos ? "" : line.substr(space + 1);
    if (key == "state") break;
    if (fields.size() > 32) throw Error(where + "no 'state' line in its header");
  }
  PretrainedPrior p;
  auto field = [&](const char* key) -> const std::string& {
    auto it = fields.find(key);
    if (it == fields.end() || it->second.empty())
      throw Error(where + "its header has no '" + key + "' value");
    return it->second;
  };
  auto number = [&](const char* key) {
    const std::string& v = field(key);
    if (v.find_first_not_of("0123456789") != std::string::npos || v.size() > 19)
      throw Error(where + "'" + key + " " + v + "' is not a count");
    return static_cast<uint64_t>(std::stoull(v));
  };
  p.prior = field("prior");
  p.backend = field("backend");
  p.arch = field("arch");
  p.rows = number("rows");
  p.seed = number("seed");
  p.data = fields.count("data") ? fields["data"] : "";
  const uint64_t size = number("state");
  if (text.size() - pos != size)
    throw Error(where + "its state is " + std::to_string(text.size() - pos) +
                " bytes, its header says " + std::to_string(size) + " (truncated or altered)");
  p.state = text.substr(pos);
  return p;
}

void write_pretrained_prior(const std::string& path, const PretrainedPrior& p) {
  check_word("prior", p.prior);
  check_word("backend", p.backend);
  check_word("arch", p.arch);
  if (p.data.find('\n') != std::string::npos)
    throw Error("pretrained prior: the data description must be one line");
  std::ostringstream os;
  os << kMagic << "\nprior " << p.prior << "\nbackend " << p.backend << "\narch " << p.arch
     << "\nrows " << p.rows << "\nseed " << p.seed << "\ndata " << p.data << "\nstate "
     << p.state.size() << "\n";
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << os.str() << p.state;
    if (!out.flush()) throw Error("cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("cannot write " + path + ": " + ec.message());
}

std::vector<std::string> device_arch_names(const std::string& fingerprint) {
  std::vector<std::string> names;
  struct utsname u {};
  if (uname(&u) == 0) names.push_back(lower(u.machine));
  std::string word;
  for (char c : fingerprint + "|") {
    if (c == '|' || std::isspace(static_cast<unsigned char>(c))) {
      if (!word.empty()) names.push_back(lower(word));
      word.clear();
    } else {
      word += c;
    }
  }
  return names;
}

PretrainedChoice find_pretrained_prior(const std::string& dir, const std::string& prior,
                                       const std::string& backend, const std::string& fingerprint) {
  namespace fs = std::filesystem;
  PretrainedChoice out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  const std::string prefix = prior + "-pretrained-";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && e.path().extension() == ".ckpt") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());  // the same choice whatever the directory order
  const std::vector<std::string> archs = device_arch_names(fingerprint);
  for (const auto& f : files) {
    PretrainedPrior p;
    try {
      p = read_pretrained_prior(f.string());
    } catch (const Error& e) {
      out.notes.push_back(std::string(e.what()) + ": not used");
      continue;
    }
    if (p.prior != prior || p.backend != backend ||
        std::find(archs.begin(), archs.end(), lower(p.arch)) == archs.end()) {
      out.notes.push_back("pretrained prior " + f.string() + " is for prior " + p.prior +
                          ", backend " + p.backend + ", arch " + p.arch + "; this run's is " +
                          prior + " on " + backend + " (" + fingerprint + "): not used");
      continue;
    }
    if (!out.chosen) {
      out.chosen = std::move(p);
      out.path = f.string();
    }
  }
  return out;
}

}  // namespace emmy::store
