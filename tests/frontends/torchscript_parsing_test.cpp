// The torchscript frontend's LibTorch-free helpers: input shape specs and --code rewriting.
#include <gtest/gtest.h>

#include "code_source.hpp"
#include "emmy/status.hpp"
#include "input_spec.hpp"

using emmy::frontends::parse_input_spec;
using emmy::ir::DType;
using emmy::ts::code_to_torchscript;

TEST(InputSpec, CompactFormWithDtypes) {
  auto types = parse_input_spec("1x128x64:f32, 1x128:i64,4:bfloat16");
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(emmy::ir::to_string(types[0]), "f32[1,128,64]");
  EXPECT_EQ(emmy::ir::to_string(types[1]), "i64[1,128]");
  EXPECT_EQ(emmy::ir::to_string(types[2]), "bf16[4]");
  EXPECT_EQ(parse_input_spec("8x8")[0].dtype, DType::f32);  // default dtype
  EXPECT_EQ(parse_input_spec("scalar:i64")[0].rank(), 0);
}

TEST(InputSpec, JsonForms) {
  auto types = parse_input_spec(
      R"([{"shape": [2, 16, 64], "dtype": "float32"}, {"shape": [16,16], "dtype": "bool"}])");
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(emmy::ir::to_string(types[0]), "f32[2,16,64]");
  EXPECT_EQ(types[1].dtype, DType::boolean);
  auto bare = parse_input_spec("[[4, 64], [3]]");
  ASSERT_EQ(bare.size(), 2u);
  EXPECT_EQ(emmy::ir::to_string(bare[1]), "f32[3]");
}

TEST(InputSpec, ErrorsNameTheEntry) {
  try {
    parse_input_spec("1x128:f32,1xQ:i64");
    FAIL() << "expected an error";
  } catch (const emmy::Error& e) {
    EXPECT_NE(std::string(e.what()).find("1xQ:i64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_input_spec("4:complex64"), emmy::Error);
  EXPECT_THROW(parse_input_spec(""), emmy::Error);
}

TEST(CodeSource, RewritesFunctionalAndDtypesOutsideStrings) {
  std::string src = code_to_torchscript(
      "F.silu(torch.nn.functional.gelu(torch.randn(4, dtype=torch.bfloat16, device='cuda')))");
  EXPECT_EQ(src.rfind("def forward():\n    return ", 0), 0u) << src;
  EXPECT_NE(src.find("torch.silu(torch.gelu("), std::string::npos) << src;
  EXPECT_NE(src.find("dtype=15"), std::string::npos) << src;
  EXPECT_NE(src.find("device='cuda'"), std::string::npos) << src;
  // torch.float32 vs torch.float, torch.int64 vs torch.int: the longest name wins.
  std::string dt =
      code_to_torchscript("(torch.float32, torch.float, torch.int64, torch.int, torch.half)");
  EXPECT_NE(dt.find("(6, 6, 4, 3, 5)"), std::string::npos) << dt;
  // A string literal is left alone.
  EXPECT_NE(code_to_torchscript("'torch.float32 F.x'").find("'torch.float32 F.x'"),
            std::string::npos);
}

// The bounds of a --code expression (issue 21: 7,000 nested parentheses overflowed the stack in
// LibTorch's parser), checked on the text before LibTorch sees it.
TEST(CodeSource, BoundsRefuseDeepOrHugeExpressions) {
  using emmy::ts::check_code_bounds;
  const auto message = [](const std::string& code) -> std::string {
    try {
      check_code_bounds(code);
    } catch (const emmy::Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string x = "torch.randn(2)";
  // At the bound, fine; one level more, refused, whatever the bracket.
  EXPECT_EQ(message(std::string(63, '(') + x + std::string(63, ')')), "");
  EXPECT_NE(
      message(std::string(64, '(') + x + std::string(64, ')')).find("nests deeper than 64 levels"),
      std::string::npos);
  EXPECT_NE(message(std::string(65, '[') + x).find("at character 65"), std::string::npos);
  // Prefix operators recurse like brackets; binary ones do not nest, but chain.
  EXPECT_NE(message(std::string(7000, '-') + x).find("nests deeper"), std::string::npos);
  EXPECT_EQ(message("-(-(" + x + "))"), "");
  EXPECT_EQ(message(x + "-" + x + "*-" + x), "");
  std::string chain = x;
  for (int i = 0; i < 513; ++i) chain += "+" + x;
  EXPECT_NE(message(chain).find("more than 512 operators"), std::string::npos);
  // Brackets and operators inside string literals are text.
  EXPECT_EQ(message("torch.randn(2, device='" + std::string(500, '(') + "')"), "");
  EXPECT_NE(message(std::string(16385, ' ')).find("16385 characters, over the limit of 16384"),
            std::string::npos);
}
