// Fuzz-style: truncated, mutated and random manifest bytes fed to the reader and to discovery.
// Every input must give an accepted record whose fields hold the reader's promises, or a refusal
// with a reason; none may crash (this test is built with AddressSanitizer and UBSan when the
// compiler has them, so an out-of-bounds read fails it too).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>

#include "plugin_host/discovery.hpp"
#include "plugin_host/manifest_reader.hpp"
#include "test_support.hpp"

namespace emmy {
namespace {

using test::fs::path;

const path kFixtures = EMMY_FIXTURE_DIR;

// EMMY_FUZZ_SCALE=N multiplies every loop's count (the long run of docs/SECURITY.md); CI runs 1.
int scale() {
  const char* s = std::getenv("EMMY_FUZZ_SCALE");
  const int n = s ? std::atoi(s) : 1;
  return n >= 1 ? n : 1;
}

// Whatever the input, the record is either refused with a reason or satisfies every check.
void expect_sound(const PluginRecord& r, const std::string& what) {
  if (!r.ok) {
    EXPECT_FALSE(r.reason.empty()) << what;
    return;
  }
  EXPECT_TRUE(r.reason.empty()) << what;
  EXPECT_EQ(r.abi_version, EMMY_SDK_ABI_VERSION) << what;
  EXPECT_NE(kind_code(r.kind), 0u) << what;
  EXPECT_FALSE(r.name.empty()) << what;
  EXPECT_EQ(r.library.find('/'), std::string::npos) << what;
  EXPECT_EQ(r.entry_symbol, EMMY_PLUGIN_ENTRY_SYMBOL) << what;
  for (const auto& f : r.forks) EXPECT_TRUE(f.kind == "structural" || f.kind == "in_place") << what;
  // Strings reach terminals and JSON: no control characters survive the reader.
  for (const std::string* s : {&r.name, &r.kind, &r.version, &r.library, &r.description})
    for (char c : *s) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << what;
}

// Seeds: the manifest emmy_add_plugin() wrote for the good fixture, and a richer one.
std::vector<std::vector<uint8_t>> seeds() {
  test::ManifestSpec rich;
  rich.name = "rich";
  rich.forks = {{"in_place", "tile_m"}, {"structural", "fuse"}, {"in_place", "unroll"}};
  return {test::read_file(kFixtures / "fixture_good.emmy-manifest"), test::build_manifest(rich)};
}

PluginRecord parse(const std::vector<uint8_t>& bytes) {
  return parse_manifest(bytes.data(), bytes.size(), "/nowhere/fuzz.emmy-manifest");
}

TEST(ManifestFuzz, SeedsAreAccepted) {
  for (const auto& seed : seeds()) {
    ASSERT_GT(seed.size(), 16u);
    PluginRecord r = parse(seed);
    EXPECT_TRUE(r.ok) << r.reason;
  }
}

// A cut that removes only the trailing alignment padding leaves every byte the manifest uses;
// any other cut must be refused.
TEST(ManifestFuzz, EveryTruncationIsRefusedOrLosesOnlyPadding) {
  size_t count = 0, refused = 0;
  for (const auto& seed : seeds()) {
    const PluginRecord whole = parse(seed);
    for (size_t n = 0; n < seed.size(); ++n, ++count) {
      std::vector<uint8_t> cut(seed.begin(), seed.begin() + static_cast<std::ptrdiff_t>(n));
      PluginRecord r = parse(cut);
      if (!r.ok) {
        ++refused;
        EXPECT_FALSE(r.reason.empty());
        continue;
      }
      EXPECT_GE(n + 4, seed.size())
          << "truncated to " << n << " of " << seed.size() << " bytes was accepted";
      EXPECT_EQ(r.name, whole.name);
      EXPECT_EQ(r.kind, whole.kind);
      EXPECT_EQ(r.library, whole.library);
      EXPECT_EQ(r.forks.size(), whole.forks.size());
      EXPECT_EQ(r.options.size(), whole.options.size());
    }
  }
  EXPECT_GT(count, 300u);
  EXPECT_GE(refused + 8, count);  // at most 3 padding bytes per starting manifest
}

TEST(ManifestFuzz, RandomMutationsGiveOkOrRefusal) {
  std::mt19937 rng(20261129);  // fixed seed: the same inputs every run
  size_t refused = 0, total = 0;
  for (const auto& seed : seeds()) {
    for (int i = 0; i < 4000 * scale(); ++i, ++total) {
      std::vector<uint8_t> bytes = seed;
      const int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits && !bytes.empty(); ++e) {
        const size_t at = rng() % bytes.size();
        switch (rng() % 5) {
          case 0:
            bytes[at] = static_cast<uint8_t>(rng());
            break;  // random byte
          case 1:
            bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
            break;  // bit flip
          case 2:
            bytes[at] = (rng() % 2) ? 0xFF : 0x00;
            break;  // extreme values
          case 3:
            bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                         static_cast<uint8_t>(rng()));
            break;
          case 4:
            bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at));
            break;
        }
      }
      PluginRecord r = parse(bytes);
      expect_sound(r, "mutation " + std::to_string(i));
      refused += !r.ok;
    }
  }
  // Most mutations hit offsets, lengths or checked fields; some only change a character.
  EXPECT_GT(refused, total / 4);
}

TEST(ManifestFuzz, RandomBytesWithTheIdentifierAreRefused) {
  std::mt19937 rng(7);
  for (int i = 0; i < 3000 * scale(); ++i) {
    std::vector<uint8_t> bytes(8 + rng() % 256);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // A plausible root offset half of the time, the identifier always.
    if (i % 2)
      bytes[0] = static_cast<uint8_t>(8 + 4 * (rng() % 8)), bytes[1] = bytes[2] = bytes[3] = 0;
    std::copy_n("EMMY", 4, bytes.begin() + 4);
    PluginRecord r = parse(bytes);
    expect_sound(r, "random buffer " + std::to_string(i));
  }
}

// Field-level mutations: well-formed FlatBuffers whose fields hold hostile values (another entry
// symbol, paths, control characters, huge or empty strings, NaN knob values, absent optional
// fields, thousands of forks). The verifier passes them all, so each is decided by the field
// checks: refused with a reason, or accepted holding every promise of expect_sound.
std::string pick(std::mt19937& rng, const std::vector<std::string>& pool) {
  return pool[rng() % pool.size()];
}

std::vector<uint8_t> random_manifest(std::mt19937& rng) {
  namespace fbm = emmy::manifest;
  static const std::vector<std::string> names = {"good_name",
                                                 "",
                                                 "Bad-Name",
                                                 "x",
                                                 std::string(65, 'a'),
                                                 std::string(64, 'a'),
                                                 "a\nb",
                                                 "tab\there",
                                                 std::string("nul\0in", 6),
                                                 "\x1b[31mred",
                                                 "ok_1",
                                                 "../up",
                                                 "9lead"};
  static const std::vector<std::string> kinds = {"pass", "prior",     "backend", "frontend",
                                                 "",     "optimizer", "PASS",    "pass\n"};
  static const std::vector<std::string> versions = {"0.1.0", "", std::string(65, '9'), "1\x7f"};
  static const std::vector<std::string> symbols = {
      EMMY_PLUGIN_ENTRY_SYMBOL, "deflateEnd",        "", "main", "emmy_plugin_info ", "system",
      std::string(300, 'e'),    "emmy_plugin_info\n"};
  static const std::vector<std::string> libraries = {"libemmy_x.so",
                                                     "",
                                                     ".",
                                                     "..",
                                                     "/usr/lib/x86_64-linux-gnu/libz.so.1",
                                                     "../libz.so",
                                                     "a\\b.so",
                                                     std::string(256, 'l'),
                                                     "libz.so.1",
                                                     "lib\nnew.so"};
  static const std::vector<std::string> fork_kinds = {"structural", "in_place", "", "sideways"};
  static const std::vector<double> odd_values = {std::numeric_limits<double>::quiet_NaN(),
                                                 std::numeric_limits<double>::infinity(), -1e308,
                                                 -0.0};
  static const std::vector<uint32_t> abis = {EMMY_SDK_ABI_VERSION, 0, EMMY_SDK_ABI_VERSION + 1,
                                             0xFFFFFFFFu};
  const auto chance = [&rng](int percent) { return static_cast<int>(rng() % 100) < percent; };
  // The values most often valid, so that accepted manifests are common too.
  const auto field = [&](const std::vector<std::string>& pool) {
    return chance(70) ? pool[0] : pick(rng, pool);
  };

  flatbuffers::FlatBufferBuilder fbb;
  std::vector<flatbuffers::Offset<fbm::Fork>> forks;
  std::vector<flatbuffers::Offset<fbm::Knob>> knobs;
  const size_t fork_count = chance(5) ? 2000 + rng() % 2000 : rng() % 4;
  for (size_t f = 0; f < fork_count; ++f) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> fork_knobs;
    for (size_t k = rng() % 3; k > 0; --k) fork_knobs.push_back(fbb.CreateString(field(names)));
    const std::string fork_name = chance(90) ? "fork" + std::to_string(f) : field(names);
    forks.push_back(fbm::CreateForkDirect(fbb, chance(5) ? nullptr : fork_name.c_str(),
                                          field(fork_kinds).c_str(),
                                          chance(10) ? nullptr : &fork_knobs));
    std::vector<double> values;
    for (size_t v = rng() % 4; v > 0; --v)
      values.push_back(chance(80) ? double(rng() % 64) : odd_values[rng() % odd_values.size()]);
    const std::string knob_name = chance(90) ? "knob" + std::to_string(f) : field(names);
    knobs.push_back(fbm::CreateKnobDirect(fbb, knob_name.c_str(), chance(10) ? nullptr : &values));
  }
  std::vector<flatbuffers::Offset<fbm::Option>> options;
  for (size_t o = rng() % 3; o > 0; --o) {
    const std::string option_name = field(names);
    options.push_back(fbm::CreateOptionDirect(fbb, option_name.c_str(), chance(50) ? nullptr : "1",
                                              chance(50) ? nullptr : "help\ttext"));
  }
  std::vector<flatbuffers::Offset<flatbuffers::String>> after{fbb.CreateString(field(names))};
  const std::string name = field(names), kind = field(kinds), version = field(versions);
  const std::string symbol = field(symbols), library = field(libraries);
  const std::string description = chance(5) ? std::string(100000, 'd') : "fuzzed\x01";
  auto root = fbm::CreateManifestDirect(
      fbb, name.c_str(), kind.c_str(), version.c_str(),
      chance(80) ? abis[0] : abis[rng() % abis.size()], symbol.c_str(), library.c_str(),
      chance(50) ? nullptr : description.c_str(), chance(20) ? nullptr : &forks,
      chance(20) ? nullptr : &knobs, chance(30) ? nullptr : &options, chance(50) ? nullptr : &after,
      chance(50) ? nullptr : &after);
  fbm::FinishManifestBuffer(fbb, root);
  return {fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize()};
}

TEST(ManifestFuzz, FieldLevelMutationsGiveOkOrRefusal) {
  std::mt19937 rng(2112);
  size_t accepted = 0, refused = 0;
  const int cases = 4000 * scale();
  for (int i = 0; i < cases; ++i) {
    std::vector<uint8_t> bytes = random_manifest(rng);
    // Half of them also get a byte-level edit on top, inside the now well-formed layout.
    if (i % 2 && !bytes.empty())
      bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    PluginRecord r = parse(bytes);
    expect_sound(r, "field mutation " + std::to_string(i));
    (r.ok ? accepted : refused) += 1;
  }
  // Both outcomes are common: the checks are exercised, not only the verifier.
  EXPECT_GT(accepted, static_cast<size_t>(cases) / 20);
  EXPECT_GT(refused, static_cast<size_t>(cases) / 4);
  std::cout << "[ fuzz ] " << cases << " field-level mutations: " << accepted << " accepted, "
            << refused << " refused\n";
}

// The fault the long run found: the verifier checks a vector's length prefix for 4-byte alignment
// but not its doubles for 8. Here a knob's offset to its values is moved 4 bytes on, so that the
// first double's low word (1) reads as the length and the one element sits 4 bytes off 8-byte
// alignment: the reader must copy it out without a misaligned load (UBSan fails this test if not).
TEST(ManifestFuzz, MisalignedKnobValuesAreReadSafely) {
  namespace fbm = emmy::manifest;
  const uint64_t low_word_one = 0x3FF0000000000001ull;  // 1.0000000000000002, low 4 bytes = 1
  double first;
  std::memcpy(&first, &low_word_one, sizeof first);
  flatbuffers::FlatBufferBuilder fbb;
  std::vector<double> values{first, 2.0, 4.0};
  std::vector<flatbuffers::Offset<fbm::Knob>> knobs{fbm::CreateKnobDirect(fbb, "k", &values)};
  auto root = fbm::CreateManifestDirect(fbb, "misaligned", "pass", "0.1.0", EMMY_SDK_ABI_VERSION,
                                        EMMY_PLUGIN_ENTRY_SYMBOL, "libemmy_misaligned.so", nullptr,
                                        nullptr, &knobs);
  fbm::FinishManifestBuffer(fbb, root);
  std::vector<uint8_t> bytes(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  ASSERT_TRUE(parse(bytes).ok);

  // The values vector: its length 3, then the first double.
  size_t vector_at = 0;
  for (size_t p = 0; p + 12 <= bytes.size(); p += 4) {
    uint32_t length;
    std::memcpy(&length, &bytes[p], 4);
    if (length == 3 && std::memcmp(&bytes[p + 4], &low_word_one, 8) == 0) vector_at = p;
  }
  ASSERT_NE(vector_at, 0u);
  ASSERT_EQ((vector_at + 4) % 8, 0u) << "the builder aligns doubles";
  // The offset field pointing at it (an offset is relative to its own position).
  size_t field_at = 0;
  for (size_t p = 0; p + 4 <= vector_at; p += 4) {
    uint32_t offset;
    std::memcpy(&offset, &bytes[p], 4);
    if (p + offset == vector_at) field_at = p;
  }
  ASSERT_NE(field_at, 0u);
  const uint32_t moved = static_cast<uint32_t>(vector_at + 4 - field_at);
  std::memcpy(&bytes[field_at], &moved, 4);

  PluginRecord r = parse(bytes);
  expect_sound(r, "misaligned knob values");
  ASSERT_TRUE(r.ok) << r.reason;  // the verifier passes it: the reader alone must cope
  ASSERT_EQ(r.knobs.size(), 1u);
  ASSERT_EQ(r.knobs[0].values.size(), 1u);
  double expected;
  std::memcpy(&expected, &bytes[vector_at + 8], sizeof expected);
  EXPECT_EQ(std::memcmp(&r.knobs[0].values[0], &expected, sizeof expected), 0);
}

TEST(ManifestFuzz, OversizedFileIsRefusedUnread) {
  test::ScratchDir scratch;
  const path dir = scratch.sub("plugins");
  std::vector<uint8_t> big = seeds()[0];
  big.resize(kMaxManifestBytes + 1, 0);
  test::write_file(dir / "big.emmy-manifest", big);
  auto found = discover_plugins({dir.string()});
  ASSERT_EQ(found.records.size(), 1u);
  EXPECT_FALSE(found.records[0].ok);
  EXPECT_NE(found.records[0].reason.find("over the 1048576-byte limit"), std::string::npos)
      << found.records[0].reason;
}

// Through discovery, files on disk: mutated manifests beside a real library; each file gets one
// record, and an accepted one must name a library that exists.
TEST(ManifestFuzz, DiscoveryOfMutatedFiles) {
  test::ScratchDir scratch;
  const path dir = scratch.sub("plugins");
  test::fs::copy_file(kFixtures / "libemmy_fixture_good.so", dir / "libemmy_fixture_good.so");
  const std::vector<uint8_t> seed = seeds()[0];
  std::mt19937 rng(99);
  const int files = 300;
  for (int i = 0; i < files; ++i) {
    std::vector<uint8_t> bytes = seed;
    if (i % 3 == 0) {
      bytes.resize(rng() % bytes.size());
    } else {
      for (int e = 0; e < 1 + i % 4; ++e) bytes[rng() % bytes.size()] = static_cast<uint8_t>(rng());
    }
    test::write_file(dir / ("m" + std::to_string(i) + ".emmy-manifest"), bytes);
  }
  auto found = discover_plugins({dir.string()});
  ASSERT_EQ(found.records.size(), static_cast<size_t>(files));
  size_t accepted = 0;
  for (const auto& r : found.records) {
    expect_sound(r, r.manifest_path);
    if (r.ok) {
      ++accepted;
      EXPECT_TRUE(test::fs::is_regular_file(r.library_path)) << r.manifest_path;
    }
  }
  // Identical names: at most one accepted per name, the rest refused as duplicates.
  std::map<std::string, int> per_name;
  for (const auto& r : found.records)
    if (r.ok) {
      EXPECT_EQ(++per_name[r.name], 1) << r.name;
    }
  EXPECT_LT(accepted, static_cast<size_t>(files));
}

}  // namespace
}  // namespace emmy
