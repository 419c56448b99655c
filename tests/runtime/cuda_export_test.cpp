// The cuda backend's exports offline (issue 22, cuda): a program built by the backend with
// export=1 into a cubin (NVRTC, no GPU) and written as `emmy export` writes it, its plan lines
// read into the plan; the new plan fields' round trip and refusals; and libemmy_runtime refusing
// a cuda export by name where it cannot run it (no driver here, another architecture, a step
// library missing or of another ABI version), never crashing.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "cublaslt_plugin.hpp"
#include "cuda_export_harness.hpp"
#include "emmy/runtime.hpp"

namespace emmy {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string load_error(const std::string& folder) {
  try {
    runtime::Model::load(folder);
  } catch (const runtime::Error& e) {
    return e.what();
  }
  return "";
}

class CudaExportOffline : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("emmy-cuda-export-test-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::map<std::string, std::string> offline() const {
    return {
        {"arch", "sm_90a"}, {"worker", "/nonexistent"}, {"cache_dir", (dir_ / "cache").string()}};
  }
  fs::path dir_;
};

TEST_F(CudaExportOffline, TheProgramIsACubinAndItsPlanLinesAreThePlans) {
  const ir::Program program = test::two_kernel_program(ir::DType::f32);
  const test::CudaExport e = test::make_cuda_export(program, dir_ / "mm.emmy", offline());
  const std::string cubin = read(dir_ / "mm.emmy" / "program.cubin");
  ASSERT_GT(cubin.size(), 4u);
  EXPECT_EQ(cubin.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_NE(e.artifact.source.find("//@emmy export arch sm_90a"), std::string::npos);

  const runtime::PlanData plan =
      runtime::decode_plan(read(dir_ / "mm.emmy" / runtime::kPlanFileName), "plan.emmyplan");
  EXPECT_EQ(plan.backend, "cuda");
  EXPECT_EQ(plan.arch, "sm_90a");
  EXPECT_EQ(plan.device, "none");  // no device here: the fingerprint says so too
  EXPECT_EQ(plan.binary, "program.cubin");
  EXPECT_EQ(plan.binary_digest, runtime::digest(cubin));
  // Every kernel of the cubin waits for its producers: the runtime may overlap the launches.
  EXPECT_TRUE(plan.kernels_await_producers);
  ASSERT_EQ(plan.kernels.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_FALSE(plan.kernels[k].launches.empty()) << k;
    for (const runtime::LaunchInfo& l : plan.kernels[k].launches) {
      EXPECT_FALSE(l.is_step);
      // The program module prefixes each kernel's functions with its place in launch order.
      EXPECT_EQ(l.symbol.rfind("k" + std::to_string(k) + "_", 0), 0u) << l.symbol;
      EXPECT_NE(cubin.find(l.symbol), std::string::npos) << l.symbol << " is not in the cubin";
      ASSERT_EQ(l.grid.size(), 3u);
      ASSERT_EQ(l.block.size(), 3u);
      EXPECT_GT(l.grid[0] * l.block[0], 0u);
    }
  }
  // The device table: the graph's inputs, its output, then scratch, the first the matmul's
  // result, which the program keeps in a buffer of its own (f32 32x64 = 8192 bytes).
  ASSERT_GE(plan.device_buffers.size(), 5u);
  EXPECT_EQ(std::vector<uint32_t>(plan.device_buffers.begin(), plan.device_buffers.begin() + 3),
            plan.inputs);
  EXPECT_EQ(plan.device_buffers[3], plan.outputs[0]);
  for (size_t i = 4; i < plan.device_buffers.size(); ++i) {
    const runtime::BufferInfo& scratch = plan.buffers[plan.device_buffers[i]];
    EXPECT_EQ(scratch.role, "scratch");
    EXPECT_EQ(scratch.dtype, "u8");
  }
  EXPECT_EQ(plan.buffers[plan.device_buffers[4]].bytes, 32u * 64u * 4u);
  EXPECT_TRUE(plan.step_libraries.empty());
}

TEST_F(CudaExportOffline, LaunchesTensorMapsAndStepsSurviveThePlanFile) {
  const ir::Program program = test::two_kernel_program(ir::DType::f32);
  const test::CudaExport e = test::make_cuda_export(program, dir_ / "mm.emmy", offline());
  runtime::PlanData p = e.plan;
  runtime::LaunchInfo step;
  step.is_step = true;
  step.step = {"libstep.so", "emmy_x_step", "m=1 n=2", {0, 4, 3}};
  p.kernels[1].launches.push_back(step);
  p.step_libraries.push_back({"libstep.so", "0123456789abcdef", 1});
  p.tensor_maps.push_back({4, "bf16", 128, {64, 32}, {128}, {64, 16}});
  const std::string table = std::to_string(p.device_buffers.size());
  p.device = "NVIDIA H200";
  const runtime::PlanData back = runtime::decode_plan(runtime::encode_plan(p), "round trip");
  EXPECT_EQ(back.device, "NVIDIA H200");
  EXPECT_EQ(back.arch, "sm_90a");
  EXPECT_TRUE(back.kernels_await_producers);
  p.kernels_await_producers = false;  // an export of before the rule reads back as such
  EXPECT_FALSE(runtime::decode_plan(runtime::encode_plan(p), "old").kernels_await_producers);
  EXPECT_EQ(back.device_buffers, p.device_buffers);
  ASSERT_EQ(back.kernels.size(), p.kernels.size());
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    ASSERT_EQ(back.kernels[k].launches.size(), p.kernels[k].launches.size());
    for (size_t l = 0; l < p.kernels[k].launches.size(); ++l) {
      const runtime::LaunchInfo &a = p.kernels[k].launches[l], &b = back.kernels[k].launches[l];
      EXPECT_EQ(b.symbol, a.symbol);
      EXPECT_EQ(b.grid, a.grid);
      EXPECT_EQ(b.block, a.block);
      EXPECT_EQ(b.shared_bytes, a.shared_bytes);
      EXPECT_EQ(b.is_step, a.is_step);
      EXPECT_EQ(b.step.library, a.step.library);
      EXPECT_EQ(b.step.prefix, a.step.prefix);
      EXPECT_EQ(b.step.plan, a.step.plan);
      EXPECT_EQ(b.step.buffers, a.step.buffers);
    }
  }
  ASSERT_EQ(back.tensor_maps.size(), 1u);
  EXPECT_EQ(back.tensor_maps[0].buffer, 4u);
  EXPECT_EQ(back.tensor_maps[0].dtype, "bf16");
  EXPECT_EQ(back.tensor_maps[0].swizzle_bytes, 128u);
  EXPECT_EQ(back.tensor_maps[0].dims, (std::vector<uint64_t>{64, 32}));
  EXPECT_EQ(back.tensor_maps[0].strides_bytes, (std::vector<uint64_t>{128}));
  EXPECT_EQ(back.tensor_maps[0].box, (std::vector<uint32_t>{64, 16}));
  ASSERT_EQ(back.step_libraries.size(), 1u);
  EXPECT_EQ(back.step_libraries[0].digest, "0123456789abcdef");
  EXPECT_EQ(back.step_libraries[0].abi_version, 1u);

  // Inconsistent cuda fields are refused by name, on writing as on reading.
  auto refusal = [](const runtime::PlanData& bad) {
    try {
      runtime::encode_plan(bad);
    } catch (const runtime::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  runtime::PlanData bad = p;
  bad.tensor_maps[0].buffer = 99;
  EXPECT_NE(refusal(bad).find("tensor map 0 is inconsistent (buffer 99 of a table of " + table),
            std::string::npos)
      << refusal(bad);
  bad = p;
  bad.step_libraries.clear();
  EXPECT_NE(refusal(bad).find("calls library 'libstep.so', which the plan lists not"),
            std::string::npos)
      << refusal(bad);
  bad = p;
  bad.kernels[1].launches.back().step.buffers = {99};
  EXPECT_NE(refusal(bad).find("names device buffer 99 of " + table), std::string::npos)
      << refusal(bad);
  bad = p;
  bad.kernels[0].launches[0].grid = {1};
  EXPECT_NE(refusal(bad).find("not three grid and block sizes"), std::string::npos) << refusal(bad);
}

TEST_F(CudaExportOffline, TheRuntimeRefusesWhatItCannotRunByName) {
  const ir::Program program = test::two_kernel_program(ir::DType::f32);
  test::CudaExport e = test::make_cuda_export(program, dir_ / "mm.emmy", offline());
  // Here, without a driver: named as such (on a GPU machine, the architecture below is named).
  e.plan.arch = "sm_00";
  std::ofstream(dir_ / "mm.emmy" / runtime::kPlanFileName, std::ios::binary)
      << runtime::encode_plan(e.plan);
  const std::string why = load_error(e.folder);
  EXPECT_TRUE(why.find("no usable CUDA") != std::string::npos ||
              why.find("the export was built for sm_00") != std::string::npos)
      << why;
  // A replaced cubin is not the plan's.
  std::ofstream(dir_ / "mm.emmy" / "program.cubin", std::ios::app) << "tail";
  EXPECT_NE(load_error(e.folder).find("is not the cubin this plan was exported with"),
            std::string::npos)
      << load_error(e.folder);
}

// The cublaslt plugin's steps name its self-contained step library; the export copies it, and
// the runtime refuses the export when it is missing or speaks another ABI version.
TEST_F(CudaExportOffline, AStepLibraryIsCopiedAndCheckedByName) {
  ir::Program p;
  ir::Builder b(p.graph);
  ir::ValueId x = b.input("x", {ir::DType::bf16, {64, 128}});
  ir::ValueId w = b.input("w", {ir::DType::bf16, {96, 128}}, "weight");
  b.output(b.op(ir::Op::linear, {x, w}, {}, "proj"));
  ir::Kernel k;
  k.nodes = {p.graph.outputs[0]};
  k.templ = "cublaslt";
  k.knobs = {{"algo", 0}, {"workspace", 32}};
  p.grouping.kernels = {k};
  auto templ = cuda::make_cublaslt_template(EMMY_STEP_LIBRARY);
  test::CudaExport e;
  try {
    e = test::make_cuda_export(p, dir_ / "lt.emmy", offline(), templ);
  } catch (const Error& err) {
    FAIL() << err.what();
  }
  ASSERT_EQ(e.plan.step_libraries.size(), 1u);
  EXPECT_EQ(e.plan.step_libraries[0].file, "libemmy_cublaslt_step.so");
  EXPECT_EQ(read(dir_ / "lt.emmy" / "libemmy_cublaslt_step.so"), read(EMMY_STEP_LIBRARY));
  bool has_step = false;
  for (const runtime::LaunchInfo& l : e.plan.kernels[0].launches)
    has_step |= l.is_step && l.step.prefix == "emmy_cublaslt_step" &&
                l.step.library == "libemmy_cublaslt_step.so";
  EXPECT_TRUE(has_step);

  // Another ABI version: refused by name, with or without a driver (checked before it).
  const std::string foreign = read(EMMY_FOREIGN_STEP_LIBRARY);
  std::ofstream(dir_ / "lt.emmy" / "libemmy_cublaslt_step.so", std::ios::binary | std::ios::trunc)
      << foreign;
  e.plan.step_libraries[0].digest = runtime::digest(foreign);
  std::ofstream(dir_ / "lt.emmy" / runtime::kPlanFileName, std::ios::binary | std::ios::trunc)
      << runtime::encode_plan(e.plan);
  EXPECT_NE(load_error(e.folder).find("speaks library step ABI version 99, this runtime version 1"),
            std::string::npos)
      << load_error(e.folder);
  fs::remove(dir_ / "lt.emmy" / "libemmy_cublaslt_step.so");
  EXPECT_NE(load_error(e.folder).find(
                "libemmy_cublaslt_step.so: the library step library the plan names is missing"),
            std::string::npos)
      << load_error(e.folder);
}

}  // namespace
}  // namespace emmy
