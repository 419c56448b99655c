// Hostile and mistaken input to the real `emmy` binary (issue 21): every case ends in a clean
// exit with a message naming what is wrong (exit 2 for bad input), never in a crash, a hang, an
// allocation failure, code run from a file, or an option silently ignored.
//
// EMMY_HOSTILE_CASES=N additionally runs N generated cases across these classes (the long run
// recorded in docs/SECURITY.md); CI runs the fixed cases only.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "process.hpp"

using emmy::test::Completed;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

class HostileInput : public ::testing::Test, protected emmy::test::EmmyHome {
 protected:
  // emmy ARGS with this home, without --db (so that --db cases choose their own).
  Completed emmy_plain(std::vector<std::string> args, std::vector<std::string> env = {}) const {
    args.insert(args.begin(), EMMY_BIN);
    env.push_back(this->env()[0]);
    return emmy::test::run(args, env);
  }
  // A bad-input exit whose message names `part`.
  static void expect_refused(const Completed& c, const std::string& part) {
    EXPECT_EQ(c.exit_code, 2) << c.err << c.out;
    EXPECT_TRUE(contains(c.err, part)) << "expected '" << part << "' in: " << c.err;
  }
};

// --- Item 3: code in a .pt file runs only with --trust -------------------------------------

#ifdef EMMY_HAVE_TORCHSCRIPT
// Runs emmy in `dir` (the fixture's __setstate__ creates emmy_evil_was_here in the current folder).
Completed emmy_in(const std::string& dir, const std::vector<std::string>& args,
                  const std::vector<std::string>& env) {
  std::string command = "cd '" + dir + "' && exec '" + std::string(EMMY_BIN) + "'";
  for (const auto& a : args) command += " '" + a + "'";
  return emmy::test::run({"/bin/sh", "-c", command}, env);
}

TEST_F(HostileInput, TorchScriptLoadHooksRunOnlyWithTrust) {
  emmy::test::TempDir cwd;
  const std::string evil = EMMY_EVIL_PT;
  const std::string planted = cwd.path() + "/emmy_evil_was_here";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"trace", evil},
           {"tune", evil, "--backend", "cpu", "--db", db(), "--no-progress", "--patience", "1"}}) {
    Completed c = emmy_in(cwd.path(), args, env());
    expect_refused(
        c, "carries code that LibTorch runs while loading it (code/__torch__.py (__setstate__))");
    EXPECT_TRUE(contains(c.err, "--trust")) << c.err;
    EXPECT_FALSE(fs::exists(planted)) << args[0] << " ran the file's code";
  }
  EXPECT_FALSE(fs::exists(db())) << "a refused source writes nothing";
  expect_refused(emmy_in(cwd.path(), {"trace", evil, "--trust", "--seq", "8"}, env()),
                 "--seq does not apply to a TorchScript file");
  EXPECT_FALSE(fs::exists(planted)) << "an option refused after the file's code ran";
  // The fixture really runs code when loaded: with --trust it does, and the model converts.
  Completed trusted = emmy_in(cwd.path(), {"trace", evil, "--trust"}, env());
  EXPECT_EQ(trusted.exit_code, 0) << trusted.err;
  EXPECT_TRUE(fs::exists(planted))
      << "the fixture no longer runs code on load: the refusal above proves nothing";
  // --trust means a file: with --code it is an option that does not apply.
  expect_refused(emmy_plain({"trace", "--code", "torch.randn(2)", "--trust"}),
                 "--trust does not apply to --code");
}
#endif

// --- Item 6: bounded input, checked before allocating or recursing ------------------------

TEST_F(HostileInput, DeeplyNestedCodeIsRefusedBeforeTheParser) {
  const std::string nested = std::string(7000, '(') + "torch.randn(2)" + std::string(7000, ')');
  expect_refused(emmy_plain({"trace", "--code", nested}), "--code nests deeper than 64 levels");
  expect_refused(emmy_plain({"tune", "--backend", "cpu", "--db", db(), "--code", nested}),
                 "--code nests deeper than 64 levels");
  const std::string negated = std::string(7000, '-') + "torch.randn(2)";
  expect_refused(emmy_plain({"trace", "--code", negated}), "--code nests deeper than 64 levels");
  std::string chain = "torch.randn(2)";
  for (int i = 0; i < 600; ++i) chain += "+torch.randn(2)";
  expect_refused(emmy_plain({"trace", "--code", chain}), "--code has more than 512 operators");
  expect_refused(emmy_plain({"trace", "--code", std::string(20000, ' ') + "torch.randn(2)"}),
                 "--code is 20014 characters, over the limit of 16384");
  // Within the bounds, the same shapes of expression still work.
  std::string ok = std::string(60, '(') + "torch.randn(2)" + std::string(60, ')');
  for (int i = 0; i < 100; ++i) ok += "+torch.randn(2)";
  Completed fine = emmy_plain({"trace", "--code", ok});
  EXPECT_EQ(fine.exit_code, 0) << fine.err;
}

TEST_F(HostileInput, HugeTensorsAreRefusedBeforeAllocation) {
  expect_refused(
      emmy_plain({"tune", "--backend", "cpu", "--db", db(), "--no-progress", "--code",
                  "torch.randn(1000000,1000000)"}),
      "f32[1000000,1000000] needs 4000000000000 bytes, over the limit of 17179869184 bytes");
  expect_refused(
      emmy_plain({"trace", "--code", "torch.matmul(torch.randn(100000,1), torch.randn(1,100000))"}),
      "the result f32[100000,100000] needs 40000000000 bytes");
  // A size beyond int64 is refused, not wrapped.
  Completed wrap = emmy_plain({"trace", "--code", "torch.randn(99999999999999999999)"});
  EXPECT_EQ(wrap.exit_code, 2) << wrap.err;
}

TEST_F(HostileInput, HugeModelConfigNumbersAreRefusedByName) {
  const std::string config = path("huge.json");
  write(config, R"({"model_type": "qwen3", "hidden_size": 256, "num_hidden_layers": 1000000000,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 512,
    "vocab_size": 1000})");
  expect_refused(emmy_plain({"tune", "x/y", "--model-config", config, "--backend", "cpu", "--db",
                             db(), "--no-progress"}),
                 "field 'num_hidden_layers' is 1000000000, over the limit of 1024");
  expect_refused(emmy_plain({"trace", "x/y", "--model-config", "/dev/zero"}), "not a regular file");
}

// --- Item 7: options that do not apply are errors --------------------------------------------

TEST_F(HostileInput, ConfigFileMistakesAreNamed) {
  const std::string file = path("emmy.ini");
  write(file, "[tune]\npatience = 5\npatiense = 10\n");
  expect_refused(emmy_plain({"--config", file, "tune", "--code", "torch.randn(2)"}),
                 "line 3: 'patiense' is not an option of emmy tune");
  write(file, "[tunes]\npatience = 5\n");
  expect_refused(emmy_plain({"--config", file, "plugins"}), "line 1: unknown section [tunes]");
  write(file, "patience = 5\n");  // outside a section: for every command, so plugins refuses it
  expect_refused(emmy_plain({"--config", file, "plugins"}),
                 "'patience' is not an option of emmy plugins");
  write(file, "just some words\n");
  expect_refused(emmy_plain({"--config", file, "plugins"}),
                 "line 1: 'just some words' is not KEY = VALUE");
  expect_refused(emmy_plain({"--config", "/etc", "plugins"}), "--config '/etc' is a folder");
  expect_refused(emmy_plain({"--config", "/dev/zero", "plugins"}),
                 "--config '/dev/zero' is not a regular file");
  expect_refused(emmy_plain({"--config", path("missing.ini"), "plugins"}), "no such file");
  write(path("model.json"), "{}");
  expect_refused(emmy_plain({"--config", path("model.json"), "tune", "--code", "torch.randn(2)"}),
                 "only emmy trace takes as --config; emmy tune takes it as --model-config");
  std::ofstream(path("huge.ini")) << std::string(2 << 20, '#');
  expect_refused(emmy_plain({"--config", path("huge.ini"), "plugins"}),
                 "a config file is at most 1048576 bytes");
  // Another command's section is that command's business; this one's keys apply.
  write(file, "[eval]\nwhatever = 1\n[plugins]\nkind = pass\n");
  Completed ok = emmy_plain({"--config", file, "plugins"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(contains(ok.out, "fuse_pointwise")) << ok.out;
  EXPECT_FALSE(contains(ok.out, "roofline")) << "[plugins] kind = pass was ignored: " << ok.out;
  // Each eval subcommand has its section; [eval] applies to all of them.
  write(file, "[eval.failures]\nkind = timeout\n[eval.runs]\nlimit = 2\n[eval]\njson = true\n");
  Completed runs = emmy_plain({"--config", file, "eval", "runs", "--help"});
  EXPECT_EQ(runs.exit_code, 0) << runs.err;
  write(file, "[eval]\nkind = timeout\n");
  expect_refused(emmy_plain({"--config", file, "eval", "runs", "--help"}),
                 "'kind' is not an option of emmy eval runs (keys outside a section apply");
}

// A prefix of an option is not that option: `--model X` (a user's guess at how to name a model)
// once became --model-config X, and `--pat 3` --patience 3.
TEST_F(HostileInput, OptionPrefixesAreNotGuessed) {
  expect_refused(emmy_plain({"tune", "--backend", "cpu", "--db", db(), "--model", "x.json"}),
                 "unrecognised option '--model'");
  expect_refused(emmy_plain({"tune", "--backend", "cpu", "--db", db(), "--pat", "3", "--code",
                             "torch.randn(2)"}),
                 "unrecognised option '--pat'");
  expect_refused(emmy_plain({"eval", "prior", "--fold", "2"}), "unrecognised option '--fold'");
}

TEST_F(HostileInput, ModelOptionsWithCodeAreRefused) {
  for (const std::string opt : {"--layer", "--batch", "--seq", "--dtype", "--attention",
                                "--input-shape", "--model-config"}) {
    expect_refused(emmy_plain({"tune", "--backend", "cpu", "--db", db(), "--code", "torch.randn(2)",
                               opt, "1"}),
                   opt + " does not apply to --code");
    expect_refused(emmy_plain({"trace", "--code", "torch.randn(2)", opt, "1"}),
                   opt + " does not apply to --code");
    expect_refused(emmy_plain({"export", "--backend", "cpu", "--db", db(), "--code",
                               "torch.randn(2)", opt, "1"}),
                   opt + " does not apply to --code");
  }
  // The commands that read a model declare the same model options, with the same words.
  std::string tune_help = emmy_plain({"tune", "--help"}).out;
  for (const char* command : {"trace", "export"}) {
    const std::string help = emmy_plain({command, "--help"}).out;
    for (const std::string opt : {"--layer arg", "--batch arg", "--seq arg", "--dtype arg",
                                  "--attention arg", "--input-shape arg", "--trust"}) {
      const size_t at = help.find(opt), at_tune = tune_help.find(opt);
      ASSERT_NE(at, std::string::npos) << command << " --help has no " << opt << ":\n" << help;
      ASSERT_NE(at_tune, std::string::npos) << opt;
      // The option's entry up to the next option, white space folded (each command's column
      // width depends on its longest option).
      auto entry = [](const std::string& text, size_t from) {
        const std::string raw = text.substr(from, text.find("\n  -", from) - from);
        std::string out;
        for (char c : raw)
          if (!std::isspace(static_cast<unsigned char>(c)))
            out += c;
          else if (!out.empty() && out.back() != ' ')
            out += ' ';
        return out;
      };
      EXPECT_EQ(entry(help, at), entry(tune_help, at_tune)) << command << " " << opt;
    }
  }
  // From the environment too: the message says where it may have come from.
  expect_refused(emmy_plain({"tune", "--backend", "cpu", "--db", db(), "--code", "torch.randn(2)"},
                            {"EMMY_SEQ=32"}),
                 "--seq does not apply to --code (it is for a model id or a file; given on the "
                 "command line, as EMMY_SEQ");
  EXPECT_FALSE(fs::exists(db())) << "refused before the database was opened";
}

// The frontends refuse the options of other sources too: a file has no layers, a model id no
// input shapes.
TEST_F(HostileInput, OptionsOfOtherSourcesAreRefusedByTheFrontend) {
  const std::string pt2 =
      std::string(EMMY_SOURCE_DIR) + "/tests/frontends/pt2/fixtures/mlp_f32.pt2";
  expect_refused(emmy_plain({"trace", pt2, "--layer", "0"}),
                 "--layer does not apply to a .pt2 file");
  expect_refused(
      emmy_plain({"tune", pt2, "--backend", "cpu", "--db", db(), "--model-config", path("c.json")}),
      "--model-config does not apply to a .pt2 file");
  expect_refused(emmy_plain({"trace", pt2, "--trust"}), "--trust does not apply to a .pt2 file");
  expect_refused(
      emmy_plain({"trace", "Qwen/Qwen3-0.6B", "--layer", "0", "--input-shape", "2x8:f32"}),
      "--input-shape does not apply to a model id");
  EXPECT_FALSE(fs::exists(db())) << "refused before the database was opened";
}

TEST_F(HostileInput, DbThatIsNotADatabaseIsNeverFilled) {
  emmy::test::TempDir folder;
  write(folder.path() + "/notes.txt", "mine\n");
  const auto before = listing(folder.path());
  expect_refused(
      emmy_plain({"tune", "--backend", "cpu", "--no-progress", "--db", folder.path(), "--code",
                  "torch.randn(2)"}),
      "is a folder that is not a tuning database (no RocksDB CURRENT file; it holds 'notes.txt'");
  EXPECT_EQ(listing(folder.path()), before) << "emmy wrote into a folder that is not a database";
  expect_refused(emmy_plain({"tune", "--backend", "cpu", "--db", folder.path() + "/notes.txt",
                             "--code", "torch.randn(2)"}),
                 "is not a folder");
}

TEST_F(HostileInput, UnwritableJsonPathIsRefusedBeforeTheTune) {
  expect_refused(emmy_plain({"tune", "--backend", "cpu", "--db", db(), "--code", "torch.randn(2)",
                             "--json", path("no/such/folder/report.json")}),
                 "--json '" + path("no/such/folder/report.json") + "' cannot be created: folder");
  expect_refused(emmy_plain({"tune", "--backend", "cpu", "--db", db(), "--code", "torch.randn(2)",
                             "--json", path("")}),
                 "is a folder");
  EXPECT_FALSE(fs::exists(db())) << "refused before the database was opened";
}

// --- The long run: generated cases of every class --------------------------------------------

int long_cases() {
  const char* s = std::getenv("EMMY_HOSTILE_CASES");
  return s ? std::atoi(s) : 0;
}

TEST_F(HostileInput, GeneratedCases) {
  const int cases = long_cases();
  if (cases <= 0) GTEST_SKIP() << "set EMMY_HOSTILE_CASES=N for the long run";
  std::mt19937 rng(21);
  std::map<std::string, int> per_class, crashes;
  const std::string ini = path("gen.ini"), json = path("gen.json");
  for (int i = 0; i < cases; ++i) {
    std::vector<std::string> args;
    std::string cls;
    int expect = 2;  // the exit code the case must end with; -1: 0 or 2, never a crash
    switch (i % 5) {
      case 0: {  // nesting of every kind, over and under the bound
        cls = "nested code";
        const int depth = 1 + static_cast<int>(rng() % 10000);
        const char* open[] = {"(", "[", "-", "~", "torch.neg("};
        const int kind = static_cast<int>(rng() % 5);
        std::string code;
        for (int d = 0; d < depth; ++d) code += open[kind];
        code += "torch.randn(2)";
        if (kind == 0 || kind == 4)
          for (int d = 0; d < depth; ++d) code += ")";
        if (kind == 1)
          for (int d = 0; d < depth; ++d) code += "]";
        args = {"trace", "--code", code};
        // Within the bounds, brackets and negation convert; ~ on floats and lists of tensors
        // are TorchScript's or the frontend's errors.
        // A run of prefix operators ends at its operand; a bracket also opens randn's.
        const int deepest = kind == 2 || kind == 3 ? depth : depth + 1;
        if (deepest <= 64) expect = kind == 0 || kind == 2 || kind == 4 ? 0 : -1;
        break;
      }
      case 1: {  // sizes: huge, negative, overflowing, fine
        cls = "tensor sizes";
        const std::vector<std::string> sizes = {"1000000,1000000",       "-1,4",
                                                "4294967296,4294967296", "99999999999999999999",
                                                "65536,65536,2",         "3,4"};
        const std::string s = sizes[rng() % sizes.size()];
        args = {"trace", "--code", "torch.randn(" + s + ") * 2"};
        if (s == "3,4") expect = 0;
        break;
      }
      case 2: {  // model configs with one number out of range
        cls = "model config";
        const std::vector<std::string> keys = {"hidden_size",         "num_hidden_layers",
                                               "num_attention_heads", "intermediate_size",
                                               "vocab_size",          "head_dim"};
        const std::string key = keys[rng() % keys.size()];
        std::map<std::string, std::string> v = {
            {"hidden_size", "256"}, {"num_hidden_layers", "2"},   {"num_attention_heads", "4"},
            {"head_dim", "64"},     {"intermediate_size", "512"}, {"vocab_size", "1000"}};
        const std::vector<std::string> bad = {"1000000000",
                                              "-5",
                                              "0",
                                              "1e30",
                                              "\"many\"",
                                              "18446744073709551615",
                                              "99999999999999999999999"};
        v[key] = bad[rng() % bad.size()];
        std::string text = "{\"model_type\": \"qwen3\", \"num_key_value_heads\": 2";
        for (const auto& [k, x] : v) text += ", \"" + k + "\": " + x;
        write(json, text + "}");
        args = {"trace", "x/y", "--model-config", json, "--layer", "0", "--seq", "8"};
        break;
      }
      case 3: {  // config files: unknown keys, sections, garbage, non-files
        cls = "config file";
        const std::vector<std::string> texts = {
            "[plugins]\nbogus = 1\n", "[nope]\n",      "kind\n", "[plugins\n",
            "\x01\x02\x03 = 4\n",     "patience = 5\n"};
        const int pick = static_cast<int>(rng() % (texts.size() + 2));
        std::string file = ini;
        if (pick == static_cast<int>(texts.size()))
          file = "/dev/zero";
        else if (pick == static_cast<int>(texts.size()) + 1)
          file = "/tmp";
        else
          write(ini, texts[static_cast<size_t>(pick)]);
        args = {"--config", file, "plugins"};
        break;
      }
      default: {  // options that do not apply, bad paths
        cls = "bad options";
        const std::vector<std::vector<std::string>> opts = {{"--layer", "0"},
                                                            {"--seq", "8"},
                                                            {"--dtype", "f16"},
                                                            {"--batch", "2"},
                                                            {"--json", "/nonexistent/x.json"},
                                                            {"--db", "/etc"},
                                                            {"--trust"}};
        const auto& o = opts[rng() % opts.size()];
        args = {"tune", "--backend", "cpu", "--no-progress", "--code", "torch.randn(2)"};
        args.insert(args.end(), o.begin(), o.end());
        if (o[0] != "--db") args.insert(args.end(), {"--db", db()});
        break;
      }
    }
    Completed c = emmy_plain(args);
    ++per_class[cls];
    if (c.exit_code >= 128 || c.exit_code < 0) ++crashes[cls];
    EXPECT_LT(c.exit_code, 128) << cls << " case " << i << " crashed: " << c.err.substr(0, 400);
    if (expect >= 0)
      EXPECT_EQ(c.exit_code, expect) << cls << " case " << i << ": " << c.err.substr(0, 400);
    else
      EXPECT_TRUE(c.exit_code == 0 || c.exit_code == 2)
          << cls << " case " << i << ": " << c.err.substr(0, 400);
  }
  int total_crashes = 0;
  for (const auto& [cls, n] : per_class) {
    std::cout << "[ hostile ] " << cls << ": " << n << " cases, " << crashes[cls] << " crashes\n";
    total_crashes += crashes[cls];
  }
  std::cout << "[ hostile ] total: " << cases << " cases, " << total_crashes << " crashes\n";
}

}  // namespace
