// Fuzz-style: truncated, mutated and random manifest bytes fed to the reader and to discovery.
// Every input must give an accepted record whose fields hold the reader's promises, or a refusal
// with a reason; none may crash (this test is built with AddressSanitizer and UBSan when the
// compiler has them, so an out-of-bounds read fails it too).
#include <gtest/gtest.h>

#include <random>

#include "plugin_host/discovery.hpp"
#include "plugin_host/manifest_reader.hpp"
#include "test_support.hpp"

namespace emmy {
namespace {

using test::fs::path;

const path kFixtures = EMMY_FIXTURE_DIR;

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
  for (const auto& f : r.forks) EXPECT_TRUE(f.kind == "structural" || f.kind == "in_place") << what;
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
      EXPECT_GE(n + 4, seed.size()) << "truncated to " << n << " of " << seed.size() << " bytes was accepted";
      EXPECT_EQ(r.name, whole.name);
      EXPECT_EQ(r.kind, whole.kind);
      EXPECT_EQ(r.library, whole.library);
      EXPECT_EQ(r.forks.size(), whole.forks.size());
      EXPECT_EQ(r.options.size(), whole.options.size());
    }
  }
  EXPECT_GT(count, 300u);
  EXPECT_GE(refused + 8, count);  // at most 3 padding bytes per seed
}

TEST(ManifestFuzz, RandomMutationsGiveOkOrRefusal) {
  std::mt19937 rng(20261129);  // fixed seed: the same inputs every run
  size_t refused = 0, total = 0;
  for (const auto& seed : seeds()) {
    for (int i = 0; i < 4000; ++i, ++total) {
      std::vector<uint8_t> bytes = seed;
      const int edits = 1 + static_cast<int>(rng() % 8);
      for (int e = 0; e < edits && !bytes.empty(); ++e) {
        const size_t at = rng() % bytes.size();
        switch (rng() % 5) {
          case 0: bytes[at] = static_cast<uint8_t>(rng()); break;              // random byte
          case 1: bytes[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;  // bit flip
          case 2: bytes[at] = (rng() % 2) ? 0xFF : 0x00; break;                 // extreme values
          case 3: bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng())); break;
          case 4: bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at)); break;
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
  for (int i = 0; i < 3000; ++i) {
    std::vector<uint8_t> bytes(8 + rng() % 256);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    // A plausible root offset half of the time, the identifier always.
    if (i % 2) bytes[0] = static_cast<uint8_t>(8 + 4 * (rng() % 8)), bytes[1] = bytes[2] = bytes[3] = 0;
    std::copy_n("EMMY", 4, bytes.begin() + 4);
    PluginRecord r = parse(bytes);
    expect_sound(r, "random buffer " + std::to_string(i));
  }
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
