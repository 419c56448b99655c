#include "plugin_host/manifest_reader.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <system_error>
#include <vector>

#include "emmy/plugin.hpp"
#include "manifest_generated.h"

namespace emmy {
namespace {

namespace fb = emmy::manifest;

// Nesting in a valid manifest is at most Manifest > forks > Fork > knobs > string (5); the table
// count is one per fork, knob and option. Both bounds are far above any real plugin's needs and
// far below what would let a hostile file make verification slow.
constexpr flatbuffers::uoffset_t kMaxDepth = 16;
constexpr flatbuffers::uoffset_t kMaxTables = 10000;
constexpr size_t kMaxNameLength = 64;
constexpr size_t kMaxFieldLength = 4096;

// Manifest strings end up in terminals and JSON: control characters become '?'.
std::string text(const flatbuffers::String* s) {
  if (!s) return "";
  std::string out(s->c_str(), std::min<size_t>(s->size(), kMaxFieldLength));
  for (char& c : out) {
    auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) c = '?';
  }
  return out;
}

bool is_plugin_name(const std::string& s) {
  if (s.empty() || s.size() > kMaxNameLength || !(s[0] >= 'a' && s[0] <= 'z')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// A plain file name: the library must sit beside its manifest, never elsewhere.
bool is_plain_file_name(const std::string& s) {
  return !s.empty() && s.size() <= 255 && s != "." && s != ".." &&
         s.find('/') == std::string::npos && s.find('\\') == std::string::npos &&
         s.find('\0') == std::string::npos;
}

std::vector<std::string> strings(
    const flatbuffers::Vector<flatbuffers::Offset<flatbuffers::String>>* v) {
  std::vector<std::string> out;
  if (!v) return out;
  out.reserve(v->size());
  for (const auto* s : *v) out.push_back(text(s));
  return out;
}

// The verifier checks a vector's length prefix for 4-byte alignment, not its doubles for 8: a
// damaged manifest can place them anywhere (the long fuzz run found one, UBSan's misaligned
// load). Copied out byte-wise, alignment does not matter.
std::vector<double> doubles(const flatbuffers::Vector<double>& v) {
  std::vector<double> out(v.size());
  const uint8_t* data = v.Data();
  for (size_t i = 0; i < out.size(); ++i) {
    std::memcpy(&out[i], data + i * sizeof(double), sizeof(double));
    out[i] = flatbuffers::EndianScalar(out[i]);
  }
  return out;
}

PluginRecord refused(PluginRecord r, std::string reason) {
  r.ok = false;
  r.reason = std::move(reason);
  return r;
}

constexpr const char* kRegenerate = "rebuild the plugin with emmy_add_plugin(), which writes it";

}  // namespace

PluginRecord parse_manifest(const uint8_t* data, size_t size, const std::string& manifest_path) {
  PluginRecord r;
  r.manifest_path = manifest_path;
  if (size > kMaxManifestBytes)
    return refused(r, "manifest is " + std::to_string(size) + " bytes, over the " +
                          std::to_string(kMaxManifestBytes) +
                          "-byte limit: it is not an Emmy manifest");
  if (size < 8)
    return refused(r, "corrupt manifest: " + std::to_string(size) +
                          " bytes is too short for a FlatBuffer; " + kRegenerate);
  // A private, suitably aligned copy: the verifier checks alignment against the buffer start.
  std::vector<uint8_t> buffer(data, data + size);
  if (!flatbuffers::BufferHasIdentifier(buffer.data(), fb::ManifestIdentifier()))
    return refused(r, std::string("not an Emmy manifest (file identifier is not \"") +
                          fb::ManifestIdentifier() + "\"); " + kRegenerate);
  flatbuffers::Verifier::Options limits;
  limits.max_depth = kMaxDepth;
  limits.max_tables = kMaxTables;
  flatbuffers::Verifier verifier(buffer.data(), buffer.size(), limits);
  if (!fb::VerifyManifestBuffer(verifier))
    return refused(r,
                   "corrupt manifest: the FlatBuffers verifier rejects it (truncated, "
                   "damaged, or missing a required field); " +
                       std::string(kRegenerate));

  // Verified: fields may be read now.
  const fb::Manifest* m = fb::GetManifest(buffer.data());
  r.name = text(m->name());
  r.kind = text(m->kind());
  r.version = text(m->version());
  r.abi_version = m->abi_version();
  r.entry_symbol = text(m->entry_symbol());
  r.library = text(m->library());
  r.description = text(m->description());
  if (m->forks()) {
    for (const auto* f : *m->forks())
      r.forks.push_back({text(f->name()), text(f->kind()), strings(f->knobs())});
  }
  if (m->knobs()) {
    for (const auto* k : *m->knobs()) {
      ManifestKnob knob{text(k->name()), {}};
      if (k->values()) knob.values = doubles(*k->values());
      r.knobs.push_back(std::move(knob));
    }
  }
  if (m->options()) {
    for (const auto* o : *m->options())
      r.options.push_back({text(o->name()), text(o->default_value()), text(o->help())});
  }
  r.after = strings(m->after());
  r.before = strings(m->before());
  r.extends = text(m->extends());
  r.default_pipeline = m->default_pipeline();
  if (is_plain_file_name(r.library))
    r.library_path = (std::filesystem::path(manifest_path).parent_path() / r.library).string();

  // The ABI first: a manifest from another SDK may mean anything else differently.
  if (r.abi_version != EMMY_SDK_ABI_VERSION)
    return refused(r, "built for SDK ABI " + std::to_string(r.abi_version) + ", this emmy speaks " +
                          std::to_string(EMMY_SDK_ABI_VERSION) +
                          ": rebuild the plugin against this emmy's SDK");
  if (!is_plugin_name(r.name))
    return refused(r, "plugin name '" + r.name + "' is not [a-z][a-z0-9_]* (at most " +
                          std::to_string(kMaxNameLength) + " characters); " + kRegenerate);
  if (kind_code(r.kind) == 0)
    return refused(r, "unknown kind '" + r.kind + "' (expected " + std::string(kKnownKindsText) +
                          "); " + kRegenerate);
  if (r.version.empty() || r.version.size() > kMaxNameLength)
    return refused(r, "version '" + r.version + "' is empty or too long; " + kRegenerate);
  // The entry point is the SDK's, never the manifest's choice: a manifest naming any other
  // symbol (deflateEnd of a libz placed beside it) would make the host call a function of
  // unknown signature as if it returned an EmmyPluginInfo.
  if (r.entry_symbol != EMMY_PLUGIN_ENTRY_SYMBOL)
    return refused(r,
                   "entry symbol '" + r.entry_symbol + "' is not " + EMMY_PLUGIN_ENTRY_SYMBOL +
                       ", the only entry point emmy calls (defined by EMMY_PLUGIN(YourClass)); " +
                       kRegenerate);
  if (!is_plain_file_name(r.library))
    return refused(r,
                   "library '" + r.library +
                       "' is not a plain file name (the library must sit beside its manifest); " +
                       kRegenerate);
  // A template plugin is useless without its backend, and only templates extend one.
  if (r.kind == "template" && !is_plugin_name(r.extends))
    return refused(r, "template plugin names no backend it extends ('" + r.extends +
                          "'; emmy_add_plugin(... EXTENDS <backend>)); " + kRegenerate);
  if (r.kind != "template" && !r.extends.empty())
    return refused(r, "a " + r.kind + " plugin extends nothing (it names '" + r.extends +
                          "'; EXTENDS is for template plugins); " + kRegenerate);
  for (const auto& f : r.forks) {
    if (f.name.empty()) return refused(r, std::string("a fork has no name; ") + kRegenerate);
    if (f.kind != "structural" && f.kind != "in_place")
      return refused(r, "fork '" + f.name + "' has kind '" + f.kind +
                            "' (expected structural or in_place); " + kRegenerate);
  }
  for (const auto& k : r.knobs)
    if (k.name.empty()) return refused(r, std::string("a knob has no name; ") + kRegenerate);
  for (const auto& o : r.options)
    if (o.name.empty()) return refused(r, std::string("an option has no name; ") + kRegenerate);
  r.ok = true;
  return r;
}

PluginRecord read_manifest(const std::filesystem::path& manifest_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path path = fs::absolute(manifest_path, ec);
  if (ec) path = manifest_path;
  PluginRecord unread;
  unread.manifest_path = path.string();
  const auto size = fs::file_size(path, ec);
  if (ec) return refused(unread, "cannot read manifest: " + ec.message());
  if (size > kMaxManifestBytes)
    return refused(unread, "manifest is " + std::to_string(size) + " bytes, over the " +
                               std::to_string(kMaxManifestBytes) +
                               "-byte limit: it is not an Emmy manifest; remove it");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (!in || !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size)))
    return refused(unread, "cannot read manifest (permissions, or it changed while being read)");

  PluginRecord r = parse_manifest(bytes.data(), bytes.size(), path.string());
  if (!r.ok) return r;
  if (!fs::is_regular_file(r.library_path, ec))
    return refused(r, "library '" + r.library + "' is missing beside the manifest (" +
                          r.library_path + "): rebuild the plugin, or remove the stale manifest");
  return r;
}

}  // namespace emmy
