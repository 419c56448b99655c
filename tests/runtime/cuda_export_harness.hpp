// A cuda export made as `emmy export` makes it, without the tuner or a database: a program built
// by the cuda backend with export=1 (NVRTC runs offline; `arch` given, no worker started unless
// `arch` is empty, the GPU tests' case) and written by exporter::write_export into a folder.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "cuda_backend.hpp"
#include "emmy/runtime_plan.hpp"
#include "export/exporter.hpp"
#include "export/plan_builder.hpp"

namespace emmy::test {

struct CudaExport {
  Artifact artifact;
  runtime::PlanData plan;  // as written
  std::string folder;
};

// y = silu(x @ w^T) * scale in two kernels (the generated matmul, then a pointwise tail).
inline ir::Program two_kernel_program(ir::DType dtype) {
  ir::Program p;
  ir::Builder b(p.graph);
  p.graph.name = "mlp_tail";
  ir::ValueId scale = b.input("scale", {dtype, {64}}, "weight");
  ir::ValueId x = b.input("x", {dtype, {32, 128}});
  ir::ValueId w = b.input("w", {dtype, {64, 128}}, "weight");
  ir::ValueId h = b.op(ir::Op::linear, {x, w}, {}, "proj");
  ir::ValueId s = b.unary(ir::Op::silu, h);
  ir::ValueId y = b.mul(s, scale);
  b.output(y);
  ir::Kernel k0, k1;
  k0.nodes = {h};
  k1.nodes = {s, y};
  p.grouping.kernels = {k0, k1};
  return p;
}

// Builds `program` with a cuda backend (export=1, `options` added; `templ` added as a template
// plugin when given) and writes the export into `folder` (created).
inline CudaExport make_cuda_export(const ir::Program& program, const std::filesystem::path& folder,
                                   std::map<std::string, std::string> options,
                                   std::shared_ptr<KernelTemplate> templ = nullptr) {
  CudaExport out;
  options["export"] = "1";
  cuda::CudaBackend backend(options);
  if (templ) {
    Status added = backend.add_template(templ);
    EXPECT_TRUE(added.ok()) << added.message();
  }
  const ir::Slice slice = exporter::program_slice(program.graph, program.grouping);
  MeasureResult failure;
  Status st = backend.build(slice, Regime::deploy, out.artifact, failure);
  if (!st.ok()) throw Error("build: " + st.message());
  if (failure.failure != FailureKind::none) throw Error("build failed: " + failure.message);
  out.plan = exporter::plan_data(slice.graph, slice.grouping,
                                 [](size_t i) { return "k" + std::to_string(i); });
  out.plan.backend = "cuda";
  out.plan.environment = backend.environment_fingerprint();
  std::filesystem::create_directories(folder);
  exporter::write_export(folder.string(), "cuda", out.plan, out.artifact);
  out.folder = folder.string();
  return out;
}

}  // namespace emmy::test
