// FlatBuffers serialization of IR graphs. Ops and dtypes travel by name (see graph.fbs).
#include "ir/serialize.hpp"

#include <flatbuffers/flatbuffers.h>

#include <cstring>

#include "emmy/status.hpp"
#include "ir/graph_generated.h"

namespace emmy::ir {
namespace {

flatbuffers::Offset<fb::Attr> write_attr(flatbuffers::FlatBufferBuilder& fbb,
                                         const std::string& key, const Attr& value) {
  auto k = fbb.CreateString(key);
  if (auto* i = std::get_if<int64_t>(&value)) {
    return fb::CreateAttr(fbb, k, fb::AttrKind::Int, *i);
  }
  if (auto* d = std::get_if<double>(&value)) {
    return fb::CreateAttr(fbb, k, fb::AttrKind::Real, 0, *d);
  }
  if (auto* s = std::get_if<std::string>(&value)) {
    auto t = fbb.CreateString(*s);
    return fb::CreateAttr(fbb, k, fb::AttrKind::Text, 0, 0.0, t);
  }
  const auto& ints = std::get<std::vector<int64_t>>(value);
  auto v = fbb.CreateVector(ints);
  return fb::CreateAttr(fbb, k, fb::AttrKind::Ints, 0, 0.0, 0, v);
}

// The verifier checks a vector's length field for 4-byte alignment only; 8-byte elements at a
// 4-byte offset would be misaligned reads, so such a vector is rejected as corrupt. Elements are
// copied with memcpy (FlatBuffers data is little-endian, as every host Emmy runs on).
std::vector<int64_t> read_longs(const flatbuffers::Vector<int64_t>* v, const uint8_t* base,
                                const std::string& what) {
  std::vector<int64_t> out;
  if (!v || v->size() == 0) return out;  // an empty vector's data may sit anywhere
  const uint8_t* data = v->Data();
  if ((data - base) % static_cast<std::ptrdiff_t>(alignof(int64_t)) != 0)
    throw Error(what + ": misaligned 64-bit vector (corrupt bytes)");
  out.resize(v->size());
  if (!out.empty()) std::memcpy(out.data(), data, out.size() * sizeof(int64_t));
  return out;
}

}  // namespace

std::string serialize(const Graph& g) {
  flatbuffers::FlatBufferBuilder fbb(1024);
  fbb.ForceDefaults(true);  // keeps -0.0 (which equals the default 0.0) and makes bytes uniform
  std::vector<flatbuffers::Offset<fb::Node>> nodes;
  nodes.reserve(g.nodes.size());
  for (const Node& n : g.nodes) {
    std::vector<flatbuffers::Offset<fb::Attr>> attrs;
    for (const auto& [key, value] : n.attrs) attrs.push_back(write_attr(fbb, key, value));
    auto op = fbb.CreateString(to_string(n.op));
    auto inputs = fbb.CreateVector(n.inputs);
    auto attr_vec = fbb.CreateVector(attrs);
    auto dtype = fbb.CreateString(to_string(n.type.dtype));
    auto shape = fbb.CreateVector(n.type.shape);
    auto name = fbb.CreateString(n.name);
    nodes.push_back(fb::CreateNode(fbb, op, inputs, attr_vec, dtype, shape, name));
  }
  auto name = fbb.CreateString(g.name);
  auto node_vec = fbb.CreateVector(nodes);
  auto outputs = fbb.CreateVector(g.outputs);
  fbb.Finish(fb::CreateGraph(fbb, name, node_vec, outputs), fb::GraphIdentifier());
  return std::string(reinterpret_cast<const char*>(fbb.GetBufferPointer()), fbb.GetSize());
}

Graph deserialize(std::string_view bytes) {
  // FlatBuffers reads scalars in place: give it an 8-byte aligned copy when the caller's bytes
  // (say, a slice of a database value) are not aligned.
  std::string aligned;  // std::string storage is at least 8-byte aligned
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    aligned.assign(bytes);
    bytes = aligned;
  }
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8)
    throw Error("graph bytes: too short (" + std::to_string(bytes.size()) +
                " bytes) to be a FlatBuffers graph");
  if (!flatbuffers::BufferHasIdentifier(data, fb::GraphIdentifier()))
    throw Error("graph bytes: wrong file identifier (expected \"EMYG\")");
  // Graphs are shallow (depth 4) but may be large: bound depth tightly, tables generously.
  flatbuffers::Verifier verifier(data, bytes.size(), /*max_depth=*/16, /*max_tables=*/4000000);
  if (!fb::VerifyGraphBuffer(verifier))
    throw Error("graph bytes: corrupt FlatBuffers data (the verifier rejected the buffer)");

  const fb::Graph* root = fb::GetGraph(data);
  Graph g;
  if (root->name()) g.name = root->name()->str();
  if (root->nodes()) {
    g.nodes.reserve(root->nodes()->size());
    for (flatbuffers::uoffset_t i = 0; i < root->nodes()->size(); ++i) {
      const fb::Node* fn = root->nodes()->Get(i);
      std::string where = "graph bytes: node %" + std::to_string(i);
      Node n;
      auto op = parse_op(fn->op()->string_view());
      if (!op) throw Error(where + ": unknown op '" + fn->op()->str() + "'");
      n.op = *op;
      auto dtype = parse_dtype(fn->dtype()->string_view());
      if (!dtype) throw Error(where + ": unknown dtype '" + fn->dtype()->str() + "'");
      n.type.dtype = *dtype;
      n.type.shape = read_longs(fn->shape(), data, where + " shape");
      if (fn->inputs()) n.inputs.assign(fn->inputs()->begin(), fn->inputs()->end());
      if (fn->name()) n.name = fn->name()->str();
      if (fn->attrs()) {
        for (const fb::Attr* a : *fn->attrs()) {
          std::string key = a->key()->str();
          if (n.attrs.count(key)) throw Error(where + ": attribute '" + key + "' given twice");
          switch (a->kind()) {
            case fb::AttrKind::Int:
              n.attrs[key] = a->int_value();
              break;
            case fb::AttrKind::Real:
              n.attrs[key] = a->real_value();
              break;
            case fb::AttrKind::Text:
              n.attrs[key] = a->text_value() ? a->text_value()->str() : std::string();
              break;
            case fb::AttrKind::Ints: {
              n.attrs[key] = read_longs(a->ints_value(), data, where + " attribute '" + key + "'");
              break;
            }
            default:
              throw Error(where + ": attribute '" + key + "' has unknown kind " +
                          std::to_string(static_cast<int>(a->kind())));
          }
        }
      }
      g.nodes.push_back(std::move(n));
    }
  }
  if (root->outputs()) g.outputs.assign(root->outputs()->begin(), root->outputs()->end());
  if (auto msg = verify(g); !msg.empty()) throw Error("graph bytes: invalid graph: " + msg);
  return g;
}

}  // namespace emmy::ir
