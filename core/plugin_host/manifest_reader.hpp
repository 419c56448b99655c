// Reading one *.emmy-manifest: size-limited, checked with the FlatBuffers verifier (bounded depth
// and table count) and the "EMMY" identifier before any field is read, then every field the host
// relies on is checked. Bad input never throws: it yields a refused record with a reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "plugin_host/plugin_record.hpp"

namespace emmy {

// Larger files are refused unread: a real manifest is a few hundred bytes.
inline constexpr size_t kMaxManifestBytes = 1u << 20;

// Parses manifest bytes. `manifest_path` is recorded (and the library path derived from its
// folder) but not read. Does not check that the library exists.
PluginRecord parse_manifest(const uint8_t* data, size_t size, const std::string& manifest_path);

// Reads the file, parses it, and checks that the library it names exists beside it.
PluginRecord read_manifest(const std::filesystem::path& manifest_path);

}  // namespace emmy
