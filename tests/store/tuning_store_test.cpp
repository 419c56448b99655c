// The tuning database in one process: cache round trip, failures cached, the regime asymmetry,
// corrupt records, one writer, readers beside the writer.
#include "store/tuning_store.hpp"

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <set>

#include "store/crc32.hpp"
#include "store/kernel_names.hpp"
#include "store/keys.hpp"
#include "store/record_codec.hpp"
#include "store/test_records.hpp"

namespace emmy::store {
namespace {

using testing::kEnv;
using testing::make_record;
using testing::same_record;
using testing::TempDir;

// Opens the database with plain RocksDB (every column family), as a tool outside emmy would.
struct RawDb {
  std::unique_ptr<rocksdb::DB> db;
  std::map<std::string, rocksdb::ColumnFamilyHandle*> cf;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;

  explicit RawDb(const std::string& path) {
    std::vector<std::string> names;
    EXPECT_TRUE(rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names).ok());
    std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
    for (const auto& n : names) descriptors.emplace_back(n, rocksdb::ColumnFamilyOptions());
    rocksdb::DB* raw = nullptr;
    rocksdb::Status s = rocksdb::DB::Open(rocksdb::DBOptions(), path, descriptors, &handles, &raw);
    EXPECT_TRUE(s.ok()) << s.ToString();
    db.reset(raw);
    for (auto* h : handles) cf[h->GetName()] = h;
  }
  ~RawDb() {
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
  }
  bool has(const char* family, const std::string& key) {
    std::string v;
    return db->Get(rocksdb::ReadOptions(), cf.at(family), key, &v).ok();
  }
  size_t count(const char* family) {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), cf.at(family)));
    size_t n = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) ++n;
    return n;
  }
};

TEST(ConfigKey, IsCanonicalWhateverTheOrderOfDecisions) {
  std::map<std::string, double> a, b;
  a["vec"] = 4;
  a["tile_m"] = 64;
  a["alpha"] = 0.5;
  b["alpha"] = 0.5;
  b["tile_m"] = 64;
  b["vec"] = 4;
  EXPECT_EQ(config_key("matmul", a), config_key("matmul", b));
  EXPECT_EQ(config_key("matmul", a), "matmul|alpha=0.5;tile_m=64;vec=4");
  EXPECT_NE(config_key("matmul", a), config_key("rmsnorm", a));
  b["vec"] = 8;
  EXPECT_NE(config_key("matmul", a), config_key("matmul", b));
  EXPECT_EQ(format_number(1e-7), "1e-07");
  EXPECT_EQ(format_number(-0.0), "0");
}

TEST(TuningStore, MeasurementRoundTripsAndSurvivesReopen) {
  TempDir dir;
  const std::string db = dir.sub("tuning.db");
  MeasurementRecord r = make_record(7);
  {
    auto store = TuningStore::open_writer(db);
    EXPECT_FALSE(store->lookup(r.env, r.structural_key, r.config_key, r.regime));
    store->put_measurement(r);
    auto got = store->lookup(r.env, r.structural_key, r.config_key, emmy::Regime::rank);
    ASSERT_TRUE(got);
    EXPECT_TRUE(same_record(*got, r));
  }
  auto store = TuningStore::open_writer(db);
  auto got = store->lookup(r.env, r.structural_key, r.config_key, emmy::Regime::rank);
  ASSERT_TRUE(got);
  EXPECT_TRUE(same_record(*got, r));
  // Another environment never sees it: results are not reused on other hardware/software.
  EXPECT_FALSE(
      store->lookup("cuda|H200|nvcc 13.0", r.structural_key, r.config_key, emmy::Regime::rank));
  EXPECT_TRUE(store->corrupt_records().empty());
}

TEST(TuningStore, FillsInTheConfigKeyWhenMissing) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  MeasurementRecord r = make_record(3);
  std::string expected = r.config_key;
  r.config_key.clear();
  store->put_measurement(r);
  auto got = store->lookup(r.env, r.structural_key, expected, emmy::Regime::rank);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->config_key, expected);
}

TEST(TuningStore, FailuresAreCachedLikeSuccesses) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  MeasurementRecord failed = make_record(4, emmy::Regime::rank, emmy::FailureKind::build_error);
  store->put_measurement(failed);
  auto got =
      store->lookup(failed.env, failed.structural_key, failed.config_key, emmy::Regime::rank);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->failure, emmy::FailureKind::build_error);
  EXPECT_EQ(got->message, failed.message);
  EXPECT_FALSE(got->ok());
  auto listed = store->failures();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(same_record(listed[0], failed));
}

TEST(TuningStore, DeployMeasurementsGoToTheSearchTreeNeverToMeasurements) {
  TempDir dir;
  const std::string db = dir.sub("db");
  MeasurementRecord deploy = make_record(5, emmy::Regime::deploy);
  MeasurementRecord rank = make_record(6, emmy::Regime::rank);
  {
    auto store = TuningStore::open_writer(db);
    store->put_measurement(deploy);
    store->put_measurement(rank);
    ASSERT_TRUE(
        store->lookup(deploy.env, deploy.structural_key, deploy.config_key, emmy::Regime::deploy));
    // The same configuration has no rank measurement: the deploy row must not answer for it.
    EXPECT_FALSE(
        store->lookup(deploy.env, deploy.structural_key, deploy.config_key, emmy::Regime::rank));
    EXPECT_FALSE(
        store->lookup(rank.env, rank.structural_key, rank.config_key, emmy::Regime::deploy));
  }
  RawDb raw(db);
  EXPECT_TRUE(
      raw.has(kSearchTreeCF, deploy_key(deploy.env, deploy.structural_key, deploy.config_key)));
  EXPECT_FALSE(raw.has(kMeasurementsCF,
                       measurement_key(deploy.env, deploy.structural_key, deploy.config_key)));
  EXPECT_EQ(raw.count(kMeasurementsCF), 1u);  // the rank row only
  EXPECT_TRUE(
      raw.has(kMeasurementsCF, measurement_key(rank.env, rank.structural_key, rank.config_key)));
}

TEST(TuningStore, MeasurementAndIndexEntriesAreWrittenTogether) {
  TempDir dir;
  const std::string db = dir.sub("db");
  MeasurementRecord r = make_record(1);
  r.kernel_name = "rmsnorm";
  TuningStore::open_writer(db)->put_measurement(r);
  RawDb raw(db);
  EXPECT_TRUE(raw.has(kKernelsCF, name_index_key("rmsnorm", r.env, r.structural_key)));
  EXPECT_TRUE(raw.has(kKernelsCF, skey_index_key(r.structural_key, r.env)));
}

TEST(TuningStore, VariantsFindByKernelNameOrKeyPrefixInBothTables) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  for (int i = 0; i < 9; ++i) store->put_measurement(make_record(i));
  store->put_measurement(make_record(0, emmy::Regime::deploy));
  MeasurementRecord other = make_record(1);
  other.kernel_name = "softmax";
  other.structural_key = "zz-softmax";
  store->put_measurement(other);

  auto by_name = store->variants("matmul");
  EXPECT_EQ(by_name.size(), 10u);
  EXPECT_EQ(std::count_if(by_name.begin(), by_name.end(),
                          [](const auto& r) { return r.regime == emmy::Regime::deploy; }),
            1);
  // "sk1" is a prefix of one of the three matmul structural keys (i % 3 == 1: i = 1, 4, 7).
  auto by_prefix = store->variants("sk1");
  EXPECT_EQ(by_prefix.size(), 3u);
  for (const auto& r : by_prefix) EXPECT_EQ(r.structural_key.rfind("sk1", 0), 0u);
  EXPECT_EQ(store->variants("softmax").size(), 1u);
  EXPECT_TRUE(store->variants("nothing").empty());
  EXPECT_EQ(store->all_measurements().size(), 11u);
}

// `--kernel NAME` takes the names trace and tune print, spelled out, shortened or as a prefix.
TEST(KernelNames, MatchThePrintedNamesTheirSpellingsAndPrefixes) {
  const std::vector<std::string> names = {"input_layernorm",
                                          "self_attn",
                                          "self_attn.q_norm",
                                          "self_attn.k_norm",
                                          "self_attn.q_proj+k_proj+v_proj",
                                          "mlp.gate_proj+up_proj",
                                          "matmul"};
  using V = std::vector<std::string>;
  EXPECT_EQ(match_kernel_names("self_attn", names), V{"self_attn"});  // exact beats prefix
  EXPECT_EQ(match_kernel_names("input_layernorm", names), V{"input_layernorm"});
  EXPECT_EQ(match_kernel_names("self_attn.q_proj+k_proj+v_proj", names),
            V{"self_attn.q_proj+k_proj+v_proj"});
  EXPECT_EQ(match_kernel_names("q_proj+k_proj+v_proj", names), V{"self_attn.q_proj+k_proj+v_proj"});
  EXPECT_EQ(match_kernel_names("self_attn.q_proj+self_attn.k_proj+self_attn.v_proj", names),
            V{"self_attn.q_proj+k_proj+v_proj"});
  EXPECT_EQ(match_kernel_names("model.layers.0.mlp.gate_proj+model.layers.0.mlp.up_proj", names),
            V{"mlp.gate_proj+up_proj"});
  EXPECT_EQ(match_kernel_names("q_norm", names), V{"self_attn.q_norm"});
  EXPECT_EQ(match_kernel_names("input_layer", names), V{"input_layernorm"});
  EXPECT_EQ(match_kernel_names("self_attn.", names),
            (V{"self_attn.k_norm", "self_attn.q_norm", "self_attn.q_proj+k_proj+v_proj"}));
  EXPECT_TRUE(match_kernel_names("q_proj", names).empty());  // a part is not the kernel
  EXPECT_TRUE(match_kernel_names("attn", names).empty());  // "attn" is no dot-suffix of "self_attn"
  EXPECT_TRUE(match_kernel_names("", names).empty());
  EXPECT_EQ(spelled_out_parts("a.b.c+d+e.f"), (V{"a.b.c", "a.b.d", "e.f"}));
}

TEST(TuningStore, VariantsFindTheNamesTraceAndTunePrint) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  int i = 0;
  for (const char* name : {"input_layernorm", "self_attn.q_proj+k_proj+v_proj", "self_attn"}) {
    MeasurementRecord r = make_record(i);
    r.kernel_name = name;
    r.structural_key = "key-" + std::to_string(i++);
    store->put_measurement(r);
  }
  EXPECT_EQ(store->variants("input_layernorm").size(), 1u);
  EXPECT_EQ(store->variants("input_layer").size(), 1u);
  EXPECT_EQ(store->variants("q_proj+k_proj+v_proj").size(), 1u);
  EXPECT_EQ(store->variants("q_proj+k_proj+v_proj")[0].kernel_name,
            "self_attn.q_proj+k_proj+v_proj");
  EXPECT_EQ(store->variants("self_attn")[0].kernel_name, "self_attn");
  EXPECT_EQ(store->variants("self_attn").size(), 1u);
  EXPECT_EQ(store->variants("self_").size(), 2u);
  EXPECT_EQ(store->failures("input_layernorm").size(), 0u);
}

TEST(TuningStore, KernelsRunsAndPlansRoundTrip) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  store->put_kernel({"sk0-matmul", "matmul", "matmul f32[512,512] x f32[512,512]"});
  RunRecord run{"run-1",
                1700000000,
                "torch.matmul(...)",
                "cpu",
                kEnv,
                3,
                2,
                120.5,
                122.0,
                1.24,
                "ok",
                "",
                {"fuse@%3=fuse: set aside: its total is at least 1e+04 us"}};
  store->put_run(run);
  PlanRecord plan;
  plan.env = kEnv;
  plan.graph_key = "g1";
  plan.run_id = "run-1";
  plan.total_us = 120.5;
  plan.kernels.push_back({"sk0-matmul",
                          "matmul",
                          "matmul_tiled",
                          "matmul_tiled|tile_m=64",
                          {{"tile_m", 64}},
                          2,
                          60.25});
  plan.grouping = R"({"fuse":[0,1]})";
  // The program it deploys (what emmy export builds, issue 22); a plan without one is g0's.
  PlanRecord older = plan;
  older.graph_key = "g0";
  store->put_plan(older);
  plan.program_graph =
      "graph g {\n  %0 = input() : f32[4]\n  %1 = neg(%0) : f32[4]\n  outputs(%1)\n}\n";
  emmy::ir::Kernel deployed;
  deployed.nodes = {1};
  deployed.templ = "pointwise";
  deployed.knobs = {{"vec", 8}, {"threads", 2}};
  plan.program_kernels = {deployed};
  store->put_plan(plan);

  auto k = store->kernel("sk0-matmul");
  ASSERT_TRUE(k);
  EXPECT_EQ(k->description, "matmul f32[512,512] x f32[512,512]");
  auto r = store->run("run-1");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->validation_gap_pct, 1.24);
  EXPECT_EQ(r->distinct_kernels, 2);
  EXPECT_EQ(r->set_aside, run.set_aside);  // a re-run's reader knows why (issue 24)
  auto p = store->plan(kEnv, "g1");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->kernels.size(), 1u);
  EXPECT_EQ(p->kernels[0].count, 2);
  EXPECT_EQ(p->kernels[0].knobs.at("tile_m"), 64);
  EXPECT_EQ(p->grouping, plan.grouping);
  EXPECT_EQ(p->program_graph, plan.program_graph);
  ASSERT_EQ(p->program_kernels.size(), 1u);
  EXPECT_EQ(p->program_kernels[0].nodes, deployed.nodes);
  EXPECT_EQ(p->program_kernels[0].templ, "pointwise");
  EXPECT_EQ(p->program_kernels[0].knobs, deployed.knobs);
  auto p0 = store->plan(kEnv, "g0");
  ASSERT_TRUE(p0);
  EXPECT_TRUE(p0->program_graph.empty());
  EXPECT_TRUE(p0->program_kernels.empty());
  EXPECT_TRUE(store->all_measurements().empty());
  EXPECT_EQ(store->runs().size(), 1u);
  EXPECT_EQ(store->plans().size(), 2u);
  EXPECT_EQ(store->kernels().size(), 1u);
}

// A run whose assembled graph was not measured stores a null gap and the reason; records
// written before that rule (gap 0, no reason) read back as not measured, never as a 0 % gap.
TEST(RunRecordCodec, AnUnmeasuredGapIsNullNotZeroAndOldRecordsStillDecode) {
  RunRecord unmeasured;
  unmeasured.run_id = "run-2";
  unmeasured.backend = "cuda";
  unmeasured.best_total_us = 9000.0;
  unmeasured.status = "ok";
  unmeasured.validation_note = "runtime_fault: device 0: the worker exited with status 3";
  ASSERT_TRUE(std::isnan(unmeasured.validation_gap_pct)) << "the default must be 'not measured'";
  std::string stored = encode_record(unmeasured);
  EXPECT_NE(stored.find("\"validation_gap_pct\":null"), std::string::npos) << stored;
  RunRecord back;
  std::string why;
  ASSERT_TRUE(decode_record(stored, back, why)) << why;
  EXPECT_TRUE(std::isnan(back.validation_gap_pct));
  EXPECT_EQ(back.validation_note, unmeasured.validation_note);
  EXPECT_EQ(back.status, "ok");

  // The layout of version-1 run records before the note existed, sealed as the codec does.
  const std::string old_text =
      R"({"assembled_us":0.0,"backend":"cpu","best_total_us":120.5,"distinct_kernels":2,)"
      R"("env":"e","kernels":3,"run_id":"run-0","source":"s","status":"ok","unix_time":1,)"
      R"("validation_gap_pct":0.0})";
  std::string old_record;
  old_record.push_back(static_cast<char>(kRecordVersion));
  old_record.push_back('R');
  old_record.append(4, '\0');
  old_record += old_text;
  uint32_t c = crc32(std::string_view(old_record.data(), 2));
  c = crc32(std::string_view(old_record.data() + 6 /* version, type, crc32 */, old_text.size()), c);
  for (int i = 0; i < 4; ++i) old_record[2 + i] = static_cast<char>((c >> (8 * i)) & 0xFFu);
  RunRecord old;
  ASSERT_TRUE(decode_record(old_record, old, why)) << why;
  EXPECT_EQ(old.best_total_us, 120.5);
  EXPECT_TRUE(std::isnan(old.validation_gap_pct)) << old.validation_gap_pct;
  EXPECT_EQ(old.validation_note, "");
  EXPECT_TRUE(old.set_aside.empty());
  EXPECT_EQ(old.status, "ok");

  // A measured gap of exactly 0 stays 0.
  RunRecord measured = unmeasured;
  measured.assembled_us = 9000.0;
  measured.validation_gap_pct = 0.0;
  measured.validation_note.clear();
  ASSERT_TRUE(decode_record(encode_record(measured), back, why)) << why;
  EXPECT_EQ(back.validation_gap_pct, 0.0);
}

TEST(TuningStore, RejectsKeyPartsThatWouldBreakTheLayout) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  MeasurementRecord r = make_record(1);
  r.structural_key = std::string("a\x1f") + "b";
  EXPECT_THROW(store->put_measurement(r), emmy::Error);
  r = make_record(1);
  r.env.clear();
  EXPECT_THROW(store->put_measurement(r), emmy::Error);
}

TEST(TuningStore, CorruptRecordsAreReportedWithTheirKeyAndSkipped) {
  TempDir dir;
  const std::string db = dir.sub("db");
  MeasurementRecord good = make_record(0), garbage = make_record(3), flipped = make_record(6),
                    deploy = make_record(9, emmy::Regime::deploy);
  {
    auto store = TuningStore::open_writer(db);
    for (const auto& r : {good, garbage, flipped, deploy}) store->put_measurement(r);
  }
  std::string garbage_key =
      measurement_key(garbage.env, garbage.structural_key, garbage.config_key);
  std::string flipped_key =
      measurement_key(flipped.env, flipped.structural_key, flipped.config_key);
  std::string deploy_k = deploy_key(deploy.env, deploy.structural_key, deploy.config_key);
  {
    RawDb raw(db);
    ASSERT_TRUE(raw.db
                    ->Put(rocksdb::WriteOptions(), raw.cf.at(kMeasurementsCF), garbage_key,
                          "\x01\x02 not a record")
                    .ok());
    std::string v;
    ASSERT_TRUE(
        raw.db->Get(rocksdb::ReadOptions(), raw.cf.at(kMeasurementsCF), flipped_key, &v).ok());
    v[v.size() / 2] ^= 0x20;  // one flipped bit in the payload
    ASSERT_TRUE(
        raw.db->Put(rocksdb::WriteOptions(), raw.cf.at(kMeasurementsCF), flipped_key, v).ok());
    ASSERT_TRUE(raw.db->Put(rocksdb::WriteOptions(), raw.cf.at(kSearchTreeCF), deploy_k, "").ok());
  }
  auto store = TuningStore::open_reader(db);
  std::vector<std::string> warnings;
  store->set_warning_sink([&](const std::string& m) { warnings.push_back(m); });

  EXPECT_FALSE(
      store->lookup(garbage.env, garbage.structural_key, garbage.config_key, emmy::Regime::rank));
  EXPECT_FALSE(
      store->lookup(flipped.env, flipped.structural_key, flipped.config_key, emmy::Regime::rank));
  EXPECT_TRUE(store->lookup(good.env, good.structural_key, good.config_key, emmy::Regime::rank));
  auto corrupt = store->corrupt_records();
  ASSERT_EQ(corrupt.size(), 2u);
  EXPECT_EQ(corrupt[0].column_family, kMeasurementsCF);
  EXPECT_EQ(corrupt[0].key, printable_key(garbage_key));
  EXPECT_EQ(corrupt[1].key, printable_key(flipped_key));
  EXPECT_NE(corrupt[1].reason.find("checksum"), std::string::npos) << corrupt[1].reason;
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_NE(warnings[0].find(printable_key(garbage_key)), std::string::npos) << warnings[0];

  // Listings skip them too and go on with the rest.
  auto listed = store->variants("matmul");
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(same_record(listed[0], good));
  EXPECT_EQ(store->all_measurements().size(), 1u);
  std::set<std::string> keys;
  for (const auto& c : store->corrupt_records()) keys.insert(c.key);
  EXPECT_TRUE(keys.count(printable_key(deploy_k)));
}

TEST(TuningStore, ASecondWriterIsRefusedWithAClearMessage) {
  TempDir dir;
  const std::string db = dir.sub("db");
  auto first = TuningStore::open_writer(db);
  try {
    TuningStore::open_writer(db);
    FAIL() << "a second writer opened the database";
  } catch (const DatabaseBusy& e) {
    EXPECT_EQ(std::string(e.what()), "database " + db +
                                         " is in use by another `emmy tune` (lock held); wait "
                                         "for it or use --db");
  }
  first->put_measurement(make_record(1));  // the first writer is unharmed
  first.reset();
  EXPECT_NO_THROW(TuningStore::open_writer(db));
}

TEST(TuningStore, AReaderWorksBesideTheWriterAndCatchesUp) {
  TempDir dir;
  const std::string db = dir.sub("db");
  auto writer = TuningStore::open_writer(db);
  writer->put_measurement(make_record(0));
  auto reader = TuningStore::open_reader(db);
  EXPECT_TRUE(reader->is_reader());
  EXPECT_EQ(reader->variants("matmul").size(), 1u);
  writer->put_measurement(make_record(1));
  writer->put_measurement(make_record(2, emmy::Regime::deploy));
  reader->refresh();
  EXPECT_EQ(reader->variants("matmul").size(), 3u);
  EXPECT_THROW(reader->put_measurement(make_record(3)), emmy::Error);
  reader.reset();
  writer->put_measurement(make_record(3));  // the writer goes on undisturbed
  EXPECT_EQ(writer->all_measurements().size(), 4u);
}

TEST(TuningStore, ReadingAMissingDatabaseSaysSo) {
  TempDir dir;
  const std::string db = dir.sub("nowhere.db");
  try {
    TuningStore::open_reader(db);
    FAIL() << "opened a missing database";
  } catch (const DatabaseMissing& e) {
    EXPECT_EQ(std::string(e.what()), "no tuning database at " + db + "; run emmy tune first");
  }
  EXPECT_FALSE(std::filesystem::exists(db));  // reading never creates one
}

// `emmy eval failures --forget`: failure rows go (by kind, by kernel, or all), successes stay, and
// a kernel's index entries go only with its last row (its successes stay findable by name).
TEST(TuningStore, ForgettingFailuresKeepsSuccessesAndTheirIndex) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  // matmul: i = 0..5 over three structural keys; i = 1, 4 fail (build_error, timeout), i = 2
  // fails at deploy too.
  for (int i = 0; i < 6; ++i) {
    auto kind = i == 1   ? emmy::FailureKind::build_error
                : i == 4 ? emmy::FailureKind::timeout
                         : emmy::FailureKind::none;
    store->put_measurement(make_record(i, emmy::Regime::rank, kind));
  }
  store->put_measurement(make_record(2, emmy::Regime::deploy, emmy::FailureKind::runtime_fault));
  // softmax: one kernel with nothing but a failure.
  MeasurementRecord lone = make_record(7, emmy::Regime::rank, emmy::FailureKind::runtime_fault);
  lone.kernel_name = "softmax";
  lone.structural_key = "zz-softmax";
  store->put_measurement(lone);
  ASSERT_EQ(store->failures().size(), 4u);

  EXPECT_EQ(store->forget_failures("", emmy::FailureKind::wrong_result), 0u);
  EXPECT_EQ(store->forget_failures("", emmy::FailureKind::timeout), 1u);
  EXPECT_EQ(store->failures().size(), 3u);
  EXPECT_EQ(store->forget_failures("matmul"), 2u);  // build_error (rank), runtime_fault (deploy)
  ASSERT_EQ(store->failures().size(), 1u);
  EXPECT_EQ(store->failures()[0].kernel_name, "softmax");
  EXPECT_EQ(store->variants("matmul").size(), 4u);  // the four successes, still indexed
  EXPECT_EQ(store->variants("softmax").size(), 1u);

  EXPECT_EQ(store->forget_failures(), 1u);  // everything left
  EXPECT_TRUE(store->failures().empty());
  EXPECT_EQ(store->all_measurements().size(), 4u);
  EXPECT_TRUE(store->variants("softmax").empty());  // its index entries went with its last row
  store.reset();
  RawDb raw(dir.sub("db"));
  EXPECT_FALSE(raw.has(kKernelsCF, skey_index_key("zz-softmax", kEnv)));
  EXPECT_FALSE(raw.has(kKernelsCF, name_index_key("softmax", kEnv, "zz-softmax")));
  EXPECT_TRUE(raw.has(kKernelsCF, name_index_key("matmul", kEnv, make_record(0).structural_key)));

  auto reader = TuningStore::open_reader(dir.sub("db"));
  EXPECT_THROW(reader->forget_failures(), emmy::Error);
}

// A timeout row keeps the limit it was measured under; rows from before it was kept read as 0.
TEST(TuningStore, ATimeoutRowKeepsItsLimit) {
  TempDir dir;
  auto store = TuningStore::open_writer(dir.sub("db"));
  MeasurementRecord hung = make_record(1, emmy::Regime::rank, emmy::FailureKind::timeout);
  hung.timeout_s = 0.5;
  store->put_measurement(hung);
  MeasurementRecord old = make_record(2, emmy::Regime::rank, emmy::FailureKind::timeout);
  store->put_measurement(old);
  auto got = store->lookup(hung.env, hung.structural_key, hung.config_key, emmy::Regime::rank);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->timeout_s, 0.5);
  got = store->lookup(old.env, old.structural_key, old.config_key, emmy::Regime::rank);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->timeout_s, 0);
}

}  // namespace
}  // namespace emmy::store
