// Structural keys, groupings, boundaries, kernel names/stats and slices.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <set>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"
#include "ir/interpreter.hpp"

namespace emmy::ir {
namespace {

struct RmsOptions {
  int64_t hidden = 64;
  DType dtype = DType::f32;
  double eps = 1e-6;
  Op square = Op::mul;         // x*x (mutation: pow)
  int64_t keepdim = 1;         // (mutation: 0 with an unsqueeze after)
  bool weight_first = false;   // commutative spelling: weight * (x * r) instead of (x * r) * weight
  bool square_scaled = false;  // dataflow mutation: (x*x) * r instead of x * r
};

// RMSNorm: x * rsqrt(mean(x*x, -1, keepdim) + eps) * weight. Returns its node ids.
std::vector<ValueId> rmsnorm(Builder& b, ValueId x, ValueId w, const RmsOptions& o,
                             const std::string& prefix, ValueId* out) {
  std::vector<ValueId> ids;
  auto keep = [&](ValueId v) {
    ids.push_back(v);
    return v;
  };
  ValueId sq = keep(o.square == Op::mul ? b.op(Op::mul, {x, x}, {}, prefix + ".sq")
                                        : b.op(Op::pow, {x, b.constant(2.0)}, {}, prefix + ".sq"));
  ValueId m =
      keep(b.op(Op::mean, {sq}, {{"dims", std::vector<int64_t>{-1}}, {"keepdim", o.keepdim}},
                prefix + ".mean"));
  if (!o.keepdim) m = keep(b.op(Op::unsqueeze, {m}, {{"dim", int64_t(-1)}}));
  ValueId e = keep(b.op(Op::add, {m, b.constant(o.eps)}, {}, prefix + ".eps"));
  ValueId r = keep(b.op(Op::rsqrt, {e}, {}, prefix + ".rsqrt"));
  ValueId n = keep(b.op(Op::mul, {o.square_scaled ? sq : x, r}, {}, prefix + ".norm"));
  ValueId y = keep(o.weight_first ? b.op(Op::mul, {w, n}, {}, prefix + ".out")
                                  : b.op(Op::mul, {n, w}, {}, prefix + ".out"));
  *out = y;
  std::sort(ids.begin(), ids.end());
  return ids;
}

// A two-layer graph: rmsnorm -> linear -> rmsnorm, the norms with different names and ids.
struct TwoNorms {
  Graph g;
  Kernel first, second, lin;
};
TwoNorms two_norms(const RmsOptions& o1, const RmsOptions& o2) {
  TwoNorms t;
  t.g.name = "two";
  Builder b(t.g);
  ValueId x = b.input("x", {o1.dtype, {8, o1.hidden}});
  ValueId w1 = b.input("layers.0.norm.weight", {o1.dtype, {o1.hidden}}, "weight");
  ValueId y1;
  t.first.nodes = rmsnorm(b, x, w1, o1, "layers.0", &y1);
  ValueId pw = b.input("proj", {o1.dtype, {o2.hidden, o1.hidden}}, "weight");
  ValueId h = b.linear(y1, pw);
  t.lin.nodes = {h};
  if (o2.dtype != o1.dtype) {
    h = b.cast(h, o2.dtype);
    t.lin.nodes.push_back(h);
  }
  ValueId w2 = b.input("layers.1.norm.weight", {o2.dtype, {o2.hidden}}, "weight");
  ValueId y2;
  t.second.nodes = rmsnorm(b, h, w2, o2, "layers.1.other_name", &y2);
  b.output(y2);
  return t;
}

TEST(StructuralKey, IdenticalLayersShareOneKey) {
  TwoNorms t = two_norms({}, {});
  std::string k1 = structural_key(t.g, t.first);
  std::string k2 = structural_key(t.g, t.second);
  EXPECT_EQ(k1.size(), 32u);
  EXPECT_EQ(k1.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(t.first.nodes, t.second.nodes);
  EXPECT_EQ(k1, k2);
  // Rebuilding gives the same key (no pointers or hash-table order involved), and a kernel's
  // templ and knobs are not part of what it computes.
  TwoNorms again = two_norms({}, {});
  again.second.templ = "rowwise";
  again.second.knobs["threads"] = 256;
  EXPECT_EQ(structural_key(again.g, again.second), k1);
  // The same kernel read back from the text form (fresh nodes, same content) has the same key.
  EXPECT_EQ(structural_key(t.g, t.first), structural_key(parse(print(t.g)), t.first));
}

TEST(StructuralKey, EachMutationKindChangesTheKey) {
  std::string base = structural_key(two_norms({}, {}).g, two_norms({}, {}).second);
  std::map<std::string, RmsOptions> mutations;
  mutations["shape"].hidden = 32;
  mutations["dtype"].dtype = DType::bf16;
  mutations["op"].square = Op::pow;
  mutations["attribute (constant value)"].eps = 1e-5;
  mutations["attribute (keepdim)"].keepdim = 0;
  mutations["dataflow"].square_scaled = true;
  std::set<std::string> keys = {base};
  for (const auto& [what, o] : mutations) {
    TwoNorms t = two_norms({}, o);
    std::string k = structural_key(t.g, t.second);
    EXPECT_NE(k, base) << what;
    keys.insert(k);
  }
  EXPECT_EQ(keys.size(), mutations.size() + 1);  // all distinct
}

TEST(StructuralKey, AttributeAndBoundaryChanges) {
  // softmax dim attribute; and which values leave the kernel.
  auto build = [](int64_t dim, bool expose_mid) {
    Graph g;
    Builder b(g);
    ValueId x = b.input("x", {DType::f32, {4, 4}});
    ValueId e = b.unary(Op::exp, x);
    ValueId s = b.softmax(e, dim);
    b.output(s);
    if (expose_mid) b.output(e);
    return std::make_pair(g, Kernel{{e, s}, "", {}});
  };
  auto [g0, k0] = build(-1, false);
  auto [g1, k1] = build(0, false);
  auto [g2, k2] = build(-1, true);
  EXPECT_NE(structural_key(g0, k0), structural_key(g1, k1));
  EXPECT_NE(structural_key(g0, k0), structural_key(g2, k2));
  // alpha given as an integer literal means the same as the double.
  Graph a, c;
  Builder ba(a), bc(c);
  ValueId xa = ba.input("x", {DType::f32, {3}});
  ValueId xc = bc.input("x", {DType::f32, {3}});
  ValueId sa = ba.op(Op::add, {xa, xa}, {{"alpha", int64_t(2)}});
  ValueId sc = bc.op(Op::add, {xc, xc}, {{"alpha", 2.0}});
  EXPECT_EQ(structural_key(a, Kernel{{sa}, "", {}}), structural_key(c, Kernel{{sc}, "", {}}));
}

TEST(StructuralKey, EquivalentSpellingsOfAttributesShareAKey) {
  auto key_of = [](const std::function<ValueId(Builder&, ValueId)>& body) {
    Graph g;
    Builder b(g);
    ValueId x = b.input("x", {DType::f32, {4, 6}});
    ValueId y = body(b, x);
    b.output(y);
    return structural_key(g, Kernel{{y}, "", {}});
  };
  EXPECT_EQ(key_of([](Builder& b, ValueId x) { return b.softmax(x, -1); }),
            key_of([](Builder& b, ValueId x) { return b.softmax(x, 1); }));
  EXPECT_EQ(key_of([](Builder& b, ValueId x) { return b.op(Op::mean, {x}); }),
            key_of([](Builder& b, ValueId x) {
              return b.mean(x, {1, -2}, false);
            }));
  EXPECT_EQ(key_of([](Builder& b, ValueId x) { return b.transpose(x, -1, 0); }),
            key_of([](Builder& b, ValueId x) { return b.transpose(x, 0, 1); }));
  EXPECT_EQ(key_of([](Builder& b, ValueId x) { return b.slice(x, -1, -4, 100); }),
            key_of([](Builder& b, ValueId x) {
              return b.op(Op::slice, {x}, {{"dim", int64_t(1)}, {"start", int64_t(2)}});
            }));
  EXPECT_NE(key_of([](Builder& b, ValueId x) { return b.slice(x, -1, -4, 100); }),
            key_of([](Builder& b, ValueId x) { return b.slice(x, -1, -4, 100, 2); }));
}

// Canonical form: spellings of one computation that frontends differ in share a key.
std::string whole_key(const Graph& g) {
  Kernel k;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].op != Op::input && g.nodes[i].op != Op::constant)
      k.nodes.push_back(static_cast<ValueId>(i));
  return structural_key(g, k);
}
std::string graph_key(const std::function<void(Builder&)>& body) {
  Graph g;
  Builder b(g);
  body(b);
  return whole_key(g);
}

TEST(StructuralKey, CommutativeOperandsInEitherOrder) {
  TwoNorms a = two_norms({}, {});
  RmsOptions swapped;
  swapped.weight_first = true;
  TwoNorms c = two_norms({}, swapped);
  EXPECT_EQ(structural_key(a.g, a.second), structural_key(c.g, c.second));
  auto binary = [](Op op, bool swap, double alpha) {
    return graph_key([&](Builder& b) {
      ValueId x = b.input("x", {DType::f32, {4, 8}});
      ValueId y = b.input("y", {DType::f32, {8}});
      ValueId e = b.unary(Op::exp, x);
      Attrs attrs;
      if (op == Op::add || op == Op::sub) attrs["alpha"] = alpha;
      b.output(b.op(op, swap ? std::vector<ValueId>{y, e} : std::vector<ValueId>{e, y}, attrs));
    });
  };
  EXPECT_EQ(binary(Op::mul, false, 1), binary(Op::mul, true, 1));
  EXPECT_EQ(binary(Op::add, false, 1), binary(Op::add, true, 1));
  EXPECT_NE(binary(Op::add, false, 2), binary(Op::add, true, 2));  // a + 2b is not b + 2a
  EXPECT_NE(binary(Op::sub, false, 1), binary(Op::sub, true, 1));
  EXPECT_NE(binary(Op::div, false, 1), binary(Op::div, true, 1));
}

TEST(StructuralKey, NodeOrderDoesNotMatter) {
  // x*cos + rotate(x)*sin, its two products emitted in either order (C++ argument order differs
  // between compilers; the hf frontend and a trace emit them differently).
  auto rope = [](bool sin_first) {
    return graph_key([&](Builder& b) {
      ValueId x = b.input("x", {DType::f32, {2, 4, 8}});
      ValueId cos = b.input("cos", {DType::f32, {4, 8}});
      ValueId sin = b.input("sin", {DType::f32, {4, 8}});
      ValueId e = b.unary(Op::exp, x);
      auto rotated_times_sin = [&] {
        ValueId x1 = b.slice(e, 2, 0, 4), x2 = b.slice(e, 2, 4, 8);
        return b.mul(b.cat({b.unary(Op::neg, x2), x1}, 2), sin);
      };
      ValueId p, q;
      if (sin_first) {
        q = rotated_times_sin();
        p = b.mul(e, cos);
      } else {
        p = b.mul(e, cos);
        q = rotated_times_sin();
      }
      b.output(b.add(p, q));
    });
  };
  EXPECT_EQ(rope(false), rope(true));
}

TEST(StructuralKey, NoOpsViewChainsAndViewsOfInputsAreFolded) {
  auto plain = graph_key([](Builder& b) {
    ValueId x = b.input("x", {DType::f32, {4, 6}});
    b.output(b.reshape(b.unary(Op::exp, x), {2, 12}));
  });
  auto spelled = graph_key([](Builder& b) {
    ValueId x = b.input("x", {DType::f32, {4, 6}});
    ValueId same = b.op(Op::contiguous, {b.cast(x, DType::f32)});
    same = b.expand(b.view(same, {4, 6}), {4, 6});
    ValueId e = b.unary(Op::exp, b.transpose(b.transpose(same, 0, 1), 1, 0));
    ValueId chain = b.view(b.unsqueeze(b.reshape(e, {24}), 0), {2, 12});
    b.output(b.op(Op::contiguous, {chain}));
  });
  EXPECT_EQ(plain, spelled);
  // A different final shape, or a real transpose, is another computation.
  EXPECT_NE(plain, graph_key([](Builder& b) {
              ValueId x = b.input("x", {DType::f32, {4, 6}});
              b.output(b.reshape(b.unary(Op::exp, x), {12, 2}));
            }));
  EXPECT_NE(plain, graph_key([](Builder& b) {
              ValueId x = b.input("x", {DType::f32, {4, 6}});
              b.output(b.reshape(b.unary(Op::exp, b.transpose(x, 0, 1)), {2, 12}));
            }));
  // cos given as [1,s,d] and unsqueezed (transformers) or as [s,d] (hf frontend): one product.
  auto rope_mul = [](bool unsqueezed, bool mask4d) {
    return graph_key([&](Builder& b) {
      ValueId q = b.input("q", {DType::f32, {1, 2, 4, 8}});
      ValueId cos = unsqueezed ? b.unsqueeze(b.input("cos", {DType::f32, {1, 4, 8}}), 1)
                               : b.input("cos", {DType::f32, {4, 8}});
      ValueId mask = b.input("mask", {DType::boolean, mask4d ? Shape{1, 1, 4, 8} : Shape{4, 8}});
      ValueId p = b.mul(b.unary(Op::exp, q), cos);
      b.output(b.where(mask, p, b.constant(0.0)));
    });
  };
  EXPECT_EQ(rope_mul(false, false), rope_mul(true, false));
  EXPECT_EQ(rope_mul(false, false), rope_mul(true, true));
  // Leading 1-dims that set the result's rank stay: [1,4,8] * [4,8] is not [4,8] * [4,8].
  auto lead = [](Shape a) {
    return graph_key([&](Builder& b) {
      ValueId x = b.input("x", {DType::f32, a});
      ValueId y = b.input("y", {DType::f32, {4, 8}});
      b.output(b.mul(b.unary(Op::exp, y), x));
    });
  };
  EXPECT_NE(lead({1, 4, 8}), lead({4, 8}));
  // One input read twice is not two inputs.
  auto twice = [](bool same) {
    return graph_key([&](Builder& b) {
      ValueId x = b.input("x", {DType::f32, {4}});
      ValueId y = same ? x : b.input("y", {DType::f32, {4}});
      b.output(b.mul(b.unary(Op::exp, x), b.unary(Op::exp, y)));
    });
  };
  EXPECT_NE(twice(true), twice(false));
  // A cast that changes the dtype stays.
  EXPECT_NE(graph_key([](Builder& b) {
              b.output(b.unary(Op::exp, b.cast(b.input("x", {DType::bf16, {4}}), DType::f32)));
            }),
            graph_key([](Builder& b) {
              b.output(b.unary(Op::exp, b.input("x", {DType::f32, {4}})));
            }));
}

// torch's scaled_dot_product_attention on bf16 (scores and softmax in f32) and transformers' sdpa
// attention as the hf frontend writes it are one computation; its eager attention (the scores
// rounded to bf16) is another.
TEST(StructuralKey, SdpaInF32IsTheHfSdpaAttentionAndNotTheEagerOne) {
  auto attention = [](int how) {
    return graph_key([&](Builder& b) {
      ValueId q = b.input("q", {DType::bf16, {1, 2, 8, 16}});
      ValueId k = b.input("k", {DType::bf16, {1, 2, 8, 16}});
      ValueId v = b.input("v", {DType::bf16, {1, 2, 8, 16}});
      if (how < 2) {
        b.output(build_attention(b, q, k, v, -1, 0.25, true, how == 1));
        return;
      }
      ValueId mask = b.input("causal_mask", {DType::boolean, {8, 8}}, "causal_mask");
      ValueId kt = b.transpose(k, 2, 3);
      if (how == 3) {  // sdpa: q and k^T widened, the scores f32
        q = b.cast(q, DType::f32);
        kt = b.cast(kt, DType::f32);
      }
      ValueId s = b.mul(b.matmul(q, kt), b.constant(0.25, DType::f32));
      s = b.where(mask, s, b.constant(-std::numeric_limits<double>::infinity(), DType::f32));
      if (how == 2) s = b.cast(s, DType::f32);
      b.output(b.matmul(b.cast(b.softmax(s, 3), DType::bf16), v));
    });
  };
  EXPECT_EQ(attention(1), attention(3));
  EXPECT_NE(attention(1), attention(2));  // the scores rounded to bf16: eager
  EXPECT_NE(attention(0), attention(3));  // softmax in bf16 is another computation
}

TEST(Grouping, BoundaryVerifyAndSingleton) {
  TwoNorms t = two_norms({}, {});
  KernelBoundary b1 = boundary(t.g, t.first);
  EXPECT_EQ(b1.inputs, (std::vector<ValueId>{0, 1}));  // x and weight; eps constant embedded
  EXPECT_EQ(b1.outputs, (std::vector<ValueId>{t.first.nodes.back()}));
  KernelBoundary b2 = boundary(t.g, t.second);
  EXPECT_EQ(b2.inputs.front(), t.lin.nodes.front());
  EXPECT_EQ(b2.outputs, (std::vector<ValueId>{t.g.outputs[0]}));

  Grouping good{{t.first, t.lin, t.second}};
  EXPECT_EQ(verify_grouping(t.g, good), "");
  Grouping singles = singleton_grouping(t.g);
  EXPECT_EQ(singles.kernels.size(), t.g.compute_node_count());
  EXPECT_EQ(verify_grouping(t.g, singles), "");

  Grouping missing{{t.first, t.second}};
  EXPECT_NE(verify_grouping(t.g, missing).find("in no kernel"), std::string::npos);
  Grouping twice{{t.first, t.lin, t.second, t.lin}};
  EXPECT_NE(verify_grouping(t.g, twice).find("is in both kernel"), std::string::npos);
  Kernel with_input = t.lin;
  with_input.nodes.insert(with_input.nodes.begin(), 0);
  EXPECT_NE(verify_grouping(t.g, {{t.first, with_input, t.second}}).find("not a compute node"),
            std::string::npos);
  // A cycle: {first norm's last op + the linear} and {the rest of the first norm}.
  Kernel a{{t.first.nodes.back(), t.lin.nodes[0]}, "", {}};
  Kernel c{std::vector<ValueId>(t.first.nodes.begin(), t.first.nodes.end() - 1), "", {}};
  // c feeds a (norm.out reads norm.norm), and a ... does not feed c: make it so by merging the
  // second norm's first op into c, which reads the linear's output.
  c.nodes.push_back(t.second.nodes[0]);
  Kernel rest{std::vector<ValueId>(t.second.nodes.begin() + 1, t.second.nodes.end()), "", {}};
  std::string msg = verify_grouping(t.g, {{a, c, rest}});
  EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
}

TEST(Grouping, KernelNameAndStats) {
  TwoNorms t = two_norms({}, {});
  // Named nodes name the kernel (its last named node here, "layers.0.out" without "layers.0.");
  // unnamed ones fall back to the heaviest op.
  EXPECT_EQ(kernel_name(t.g, t.first), "out");
  EXPECT_EQ(kernel_name(t.g, t.lin), "linear");
  for (ValueId v : t.first.nodes) t.g.nodes[static_cast<size_t>(v)].name.clear();
  EXPECT_EQ(kernel_name(t.g, t.first), "mean");
  // A matmul's name wins; a "+"-joined name writes the shared module prefix once.
  Graph g;
  Builder b(g);
  ValueId x = b.input("x", {DType::f32, {4, 8}});
  ValueId w = b.input("w", {DType::f32, {24, 8}}, "weight");
  ValueId y = b.op(Op::linear, {x, w}, {},
                   "model.layers.3.self_attn.q_proj+model.layers.3.self_attn.k_proj+model.layers.3."
                   "self_attn.v_proj");
  ValueId z = b.op(Op::exp, {y}, {}, "layers.3.self_attn.act");
  EXPECT_EQ(kernel_name(g, Kernel{{y, z}, "", {}}), "self_attn.q_proj+k_proj+v_proj");
  EXPECT_EQ(kernel_name(g, Kernel{{z}, "", {}}), "self_attn.act");
  KernelStats s = kernel_stats(t.g, t.lin);
  EXPECT_DOUBLE_EQ(s.flops, 2.0 * 8 * 64 * 64);
  EXPECT_DOUBLE_EQ(s.bytes, 4.0 * (8 * 64 + 64 * 64 + 8 * 64));
}

TEST(Slice, StandInsConstantsAndOutputs) {
  TwoNorms t = two_norms({}, {});
  t.second.templ = "rowwise";
  t.second.knobs["threads"] = 128;
  Slice s = make_slice(t.g, t.second);
  EXPECT_EQ(verify(s.graph), "");
  ASSERT_EQ(s.grouping.kernels.size(), 1u);
  EXPECT_EQ(verify_grouping(s.graph, s.grouping), "");
  EXPECT_EQ(s.grouping.kernels[0].templ, "rowwise");
  EXPECT_EQ(s.grouping.kernels[0].knobs.at("threads"), 128);
  auto ins = s.graph.inputs();
  KernelBoundary b = boundary(t.g, t.second);
  ASSERT_EQ(ins.size(), b.inputs.size());
  for (size_t i = 0; i < ins.size(); ++i) {
    EXPECT_EQ(s.origin[static_cast<size_t>(ins[i])], b.inputs[i]);  // ascending source ids
    EXPECT_EQ(s.graph.type(ins[i]), t.g.type(b.inputs[i]));
  }
  EXPECT_EQ(s.graph.outputs.size(), 1u);
  EXPECT_EQ(structural_key(s.graph, s.grouping.kernels[0]), structural_key(t.g, t.second));

  // The slice computes what the kernel computes inside the full graph.
  auto inputs = random_inputs(t.g, 3);
  auto full = evaluate(t.g, inputs);
  // Feed the slice the source values of its stand-ins: the linear's output comes from a graph
  // that outputs it.
  Graph probe = t.g;
  probe.outputs = b.inputs;
  auto stand_in_values = evaluate(probe, inputs);
  auto sliced = evaluate(s.graph, stand_in_values);
  EXPECT_EQ(compare(full[0], sliced[0]), "");
}

TEST(Slice, CarriesTheProducerKernel) {
  Graph g;
  Builder b(g);
  ValueId q = b.input("q", {DType::f32, {2, 4, 8}});
  ValueId k = b.input("k", {DType::f32, {2, 4, 8}});
  ValueId v = b.input("v", {DType::f32, {2, 4, 8}});
  size_t first = g.nodes.size();
  ValueId out = build_attention(b, q, k, v, -1, 0.0, false);
  b.output(out);
  // Producer: transpose + scores matmul + scale; consumer: softmax + value matmul.
  Kernel producer, consumer;
  for (size_t i = first; i < g.nodes.size(); ++i) {
    if (g.nodes[i].op == Op::constant) continue;
    auto id = static_cast<ValueId>(i);
    (g.nodes[i].op == Op::softmax || id == out ? consumer : producer).nodes.push_back(id);
  }
  producer.templ = "gemm";
  Slice s = make_slice(g, consumer, &producer);
  EXPECT_EQ(verify(s.graph), "");
  ASSERT_EQ(s.grouping.kernels.size(), 2u);
  EXPECT_EQ(s.grouping.kernels[0].templ, "gemm");
  EXPECT_EQ(verify_grouping(s.graph, s.grouping), "");
  EXPECT_EQ(s.graph.inputs().size(), 3u);  // q, k, v: the scores come from the producer
  auto inputs = random_inputs(g, 11);
  EXPECT_EQ(compare(evaluate(g, inputs)[0], evaluate(s.graph, inputs)[0]), "");
  // A kernel that the "producer" does not feed is refused.
  EXPECT_THROW(make_slice(g, producer, &consumer), Error);
}

}  // namespace
}  // namespace emmy::ir
