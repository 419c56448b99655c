// libemmy_runtime on a real export library: two kernels built by the cpu backend with export=1,
// written with their plan as `emmy export` writes them, loaded, bound by name (a weight as a
// view), run, and compared with the reference interpreter; and the refusals of a bad export.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "cpu_backend.hpp"
#include "emmy/runtime.hpp"
#include "export/plan_builder.hpp"
#include "ir/interpreter.hpp"
#include "templates.hpp"

namespace emmy {
namespace {

namespace fs = std::filesystem;

// y = silu(x @ w^T) * scale, in two kernels: the linear, then the pointwise tail.
ir::Program two_kernel_program() {
  ir::Program p;
  ir::Builder b(p.graph);
  p.graph.name = "mlp_tail";
  ir::ValueId scale = b.input("scale", {ir::DType::f32, {16}}, "weight");
  ir::ValueId x = b.input("x", {ir::DType::f32, {4, 8}});
  ir::ValueId w = b.input("w", {ir::DType::f32, {16, 8}}, "weight");
  ir::ValueId h = b.op(ir::Op::linear, {x, w}, {}, "proj");
  ir::ValueId s = b.unary(ir::Op::silu, h);
  ir::ValueId y = b.mul(s, scale);
  b.output(y);
  ir::Kernel k0, k1;
  k0.nodes = {h};
  k1.nodes = {s, y};
  k1.templ = "pointwise";
  k1.knobs = {{"vec", 8}};
  // Given out of order: the plan's launch order puts the producer first.
  p.grouping.kernels = {k1, k0};
  return p;
}

// Builds `program` with the cpu backend (export=1) into `dir`/export as `emmy export` writes it;
// returns the plan and the library's generated source.
std::pair<runtime::PlanData, std::string> export_program(const ir::Program& program,
                                                         const fs::path& dir) {
  fs::create_directories(dir / "export");
  cpu::CpuBackend backend({{"export", "1"}, {"cache_dir", (dir / "cache").string()}});
  const ir::Slice slice = exporter::program_slice(program.graph, program.grouping);
  Artifact artifact;
  MeasureResult failure;
  EXPECT_TRUE(backend.build(slice, Regime::deploy, artifact, failure).ok());
  EXPECT_EQ(failure.failure, FailureKind::none) << failure.message;
  runtime::PlanData plan = exporter::plan_data(slice.graph, slice.grouping, cpu::export_symbol);
  plan.backend = "cpu";
  plan.environment = backend.environment_fingerprint();
  plan.binary = "kernels.so";
  fs::copy_file(artifact.handle, dir / "export" / "kernels.so",
                fs::copy_options::overwrite_existing);
  plan.binary_digest = runtime::file_digest((dir / "export" / "kernels.so").string());
  std::ofstream(dir / "export" / runtime::kPlanFileName, std::ios::binary | std::ios::trunc)
      << runtime::encode_plan(plan);
  return {plan, artifact.source};
}

class RuntimeModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("emmy-runtime-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    program_ = two_kernel_program();
    plan_ = export_program(program_, dir_).first;
    ASSERT_FALSE(HasFailure());
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void write(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  }
  std::string folder() const { return (dir_ / "export").string(); }
  std::string load_error() const {
    try {
      runtime::Model::load(folder());
    } catch (const runtime::Error& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  ir::Program program_;
  runtime::PlanData plan_;
};

TEST_F(RuntimeModel, ThePlanLaunchesTheProducerFirstWithBuffersByName) {
  ASSERT_EQ(plan_.kernels.size(), 2u);
  EXPECT_EQ(plan_.kernels[0].name, "proj");
  EXPECT_EQ(plan_.kernels[0].symbol, "emmy_export_k0");
  ASSERT_EQ(plan_.inputs.size(), 3u);
  EXPECT_EQ(plan_.buffers[plan_.inputs[0]].name, "scale");
  EXPECT_EQ(plan_.buffers[plan_.inputs[0]].role, "weight");
  EXPECT_EQ(plan_.buffers[plan_.inputs[1]].role, "input");
  // The linear's result passes between the kernels in a buffer of its own.
  ASSERT_EQ(plan_.kernels[0].outputs.size(), 1u);
  EXPECT_EQ(plan_.buffers[plan_.kernels[0].outputs[0]].role, "intermediate");
  EXPECT_EQ(plan_.buffers[plan_.kernels[0].outputs[0]].bytes, 4u * 16u * 4u);
  EXPECT_EQ(plan_.kernels[1].inputs.size(), 2u);
}

TEST_F(RuntimeModel, WeightsBoundByNameGiveTheInterpretersResult) {
  runtime::Model model = runtime::Model::load(folder());
  std::vector<ir::HostTensor> inputs = ir::random_inputs(program_.graph, 7);
  EXPECT_EQ(model.unbound(), std::vector<std::string>({"scale", "x", "w"}));
  // Bound in another order than the graph's, the weights in place.
  model.bind_view("w", inputs[2].data.data(), inputs[2].data.size());
  model.bind("x", inputs[1].data.data(), inputs[1].data.size());
  model.bind_view("scale", inputs[0].data.data(), inputs[0].data.size());
  model.run();
  const std::vector<ir::HostTensor> expected = ir::evaluate(program_.graph, inputs);
  ir::HostTensor actual{expected[0].type, {}};
  const auto* out = static_cast<const unsigned char*>(model.output(0));
  actual.data.assign(out, out + expected[0].data.size());
  EXPECT_EQ(ir::compare(expected[0], actual), "");
  // Other weights, bound again by name: the next run uses them.
  std::vector<ir::HostTensor> other = ir::random_inputs(program_.graph, 8);
  model.bind("w", other[2].data.data(), other[2].data.size());
  model.run();
  inputs[2] = other[2];
  const std::vector<ir::HostTensor> again = ir::evaluate(program_.graph, inputs);
  actual.data.assign(out, out + again[0].data.size());
  EXPECT_EQ(ir::compare(again[0], actual), "");
  EXPECT_NE(ir::compare(expected[0], actual), "");
  EXPECT_EQ(model.output("output0"), model.output(0));  // an unnamed output is output<i>
}

TEST_F(RuntimeModel, MistakesInBindingAreNamed) {
  runtime::Model model = runtime::Model::load(folder());
  std::vector<float> x(32, 1.0f);
  try {
    model.run();
    FAIL() << "ran unbound";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not bound: scale, x, w"), std::string::npos) << e.what();
  }
  try {
    model.enqueue(0);
    FAIL() << "enqueued unbound";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("enqueue: 3 input(s) not bound: scale, x, w"),
              std::string::npos)
        << e.what();
  }
  try {
    model.bind("weights", x.data(), 128);
    FAIL();
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no input named 'weights' (its inputs: scale, x, w)"),
              std::string::npos)
        << e.what();
  }
  try {
    model.bind("x", x.data(), 100);
    FAIL();
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'x' is f32 of 128 bytes; 100 bytes were given"),
              std::string::npos)
        << e.what();
  }
}

// enqueue is the cuda form of run (a stream of the caller's): a cpu export says to run() instead.
TEST_F(RuntimeModel, ACpuExportIsNotEnqueuedOnAStream) {
  runtime::Model model = runtime::Model::load(folder());
  std::vector<std::vector<char>> data;
  for (const auto& b : model.inputs()) {
    data.emplace_back(b.bytes, 0);
    model.bind(b.name, data.back().data(), b.bytes);
  }
  try {
    model.enqueue(0);
    FAIL() << "a cpu export was enqueued";
  } catch (const runtime::Error& e) {
    EXPECT_NE(std::string(e.what()).find("runs on the host (run() instead)"), std::string::npos)
        << e.what();
  }
  model.run();  // what it takes instead
}

TEST_F(RuntimeModel, ADamagedOrMixedUpExportIsRefusedByName) {
  EXPECT_EQ(load_error(), "");
  // Another library under the plan.
  { std::ofstream(dir_ / "export" / "kernels.so", std::ios::binary | std::ios::app) << "x"; }
  EXPECT_NE(load_error().find("is not the library this plan was exported with"), std::string::npos)
      << load_error();
  // A damaged plan file.
  std::ifstream in(dir_ / "export" / runtime::kPlanFileName, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x40);
  write(dir_ / "export" / runtime::kPlanFileName, bytes);
  EXPECT_NE(load_error().find("damaged"), std::string::npos) << load_error();
  // No plan at all.
  fs::remove(dir_ / "export" / runtime::kPlanFileName);
  EXPECT_NE(load_error().find("no such file"), std::string::npos) << load_error();
}

TEST_F(RuntimeModel, AnExportForAnotherBackendIsRefusedByName) {
  runtime::PlanData other = plan_;
  other.backend = "metal";
  write(dir_ / "export" / runtime::kPlanFileName, runtime::encode_plan(other));
  EXPECT_NE(load_error().find("an export for the metal backend, which this runtime cannot run (it "
                              "runs cpu and cuda exports)"),
            std::string::npos)
      << load_error();
}

// Two layers of one shape, y = (x @ w0^T) @ w1^T with w0, w1 [8, 8]: both linears generate the
// same source, which the export library compiles once (a 28-layer model's kernels were 281
// copies of 23); each layer's symbol still runs with its own weights.
TEST(RuntimeExportRepeats, ARepeatedKernelIsCompiledOnceAndEveryLayerRuns) {
  ir::Program p;
  ir::Builder b(p.graph);
  p.graph.name = "two_layers";
  ir::ValueId x = b.input("x", {ir::DType::f32, {4, 8}});
  ir::ValueId w0 = b.input("w0", {ir::DType::f32, {8, 8}}, "weight");
  ir::ValueId h = b.op(ir::Op::linear, {x, w0}, {}, "layers.0");
  // Declared after h, as a frontend declares a layer's weights with the layer: the second part's
  // inputs are then (activation, weight) like the first's, and its source the same.
  ir::ValueId w1 = b.input("w1", {ir::DType::f32, {8, 8}}, "weight");
  ir::ValueId y = b.op(ir::Op::linear, {h, w1}, {}, "layers.1");
  b.output(y);
  ir::Kernel k0, k1;
  k0.nodes = {h};
  k1.nodes = {y};
  p.grouping.kernels = {k0, k1};
  const fs::path dir =
      fs::temp_directory_path() / ("emmy-runtime-repeats-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  auto [plan, source] = export_program(p, dir);
  ASSERT_FALSE(HasFailure());
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = source.find(what); at != std::string::npos; at = source.find(what, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(count("namespace emmy_k"), 2u) << "one namespace opened and closed, not two kernels";
  EXPECT_EQ(count("void emmy_export_k1(const void* const* inputs"), 1u) << source;
  ASSERT_EQ(plan.kernels.size(), 2u);

  runtime::Model model = runtime::Model::load((dir / "export").string());
  std::vector<ir::HostTensor> inputs = ir::random_inputs(p.graph, 11);
  for (size_t i = 0; i < inputs.size(); ++i)
    model.bind(model.inputs()[i].name, inputs[i].data.data(), inputs[i].data.size());
  model.run();
  const std::vector<ir::HostTensor> expected = ir::evaluate(p.graph, inputs);
  ir::HostTensor actual{expected[0].type, {}};
  const auto* out = static_cast<const unsigned char*>(model.output(0));
  actual.data.assign(out, out + expected[0].data.size());
  EXPECT_EQ(ir::compare(expected[0], actual), "");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace emmy
