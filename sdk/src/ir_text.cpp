// The text form: print and parse (round trip). Doubles print in the shortest form that reads
// back to the same bits (std::to_chars), always with a '.' or exponent so they stay doubles.
//
//   graph NAME {
//     %0 = input() {role="input"} : f32[4,8]  # x
//     %1 = constant() {dtype="f32", value=2.0} : f32[]
//     %2 = mul(%0, %1) : f32[4,8]  # scaled
//     outputs(%2)
//   }
#include <cctype>
#include <charconv>
#include <cmath>

#include "emmy/ir.hpp"
#include "emmy/status.hpp"

namespace emmy::ir {
namespace {

std::string format_double(double d) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // "inf"/"nan" contain 'n'
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

// Node names follow '#' up to the end of the line; only line breaks and backslashes are escaped.
std::string escape_name(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else
      out += c;
  }
  return out;
}

bool plain_identifier(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-' &&
        c != '/' && c != ':')
      return false;
  return true;
}

std::string format_attr(const Attr& a) {
  return std::visit(
      [](const auto& x) -> std::string {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, int64_t>)
          return std::to_string(x);
        else if constexpr (std::is_same_v<X, double>)
          return format_double(x);
        else if constexpr (std::is_same_v<X, std::string>)
          return quote(x);
        else {
          std::string s = "[";
          for (size_t i = 0; i < x.size(); ++i) s += (i ? "," : "") + std::to_string(x[i]);
          return s + "]";
        }
      },
      a);
}

// A cursor over one line of text; every error carries the line number.
class Line {
 public:
  Line(std::string_view text, size_t number) : t_(text), line_(number) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw Error("ir text, line " + std::to_string(line_) + ", column " + std::to_string(p_ + 1) +
                ": " + what);
  }
  void skip_ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' || t_[p_] == '\r')) ++p_;
  }
  bool at_end() {
    skip_ws();
    return p_ >= t_.size();
  }
  char peek() {
    skip_ws();
    return p_ < t_.size() ? t_[p_] : '\0';
  }
  bool accept(char c) {
    if (peek() != c) return false;
    ++p_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  bool accept_word(std::string_view w) {
    skip_ws();
    if (t_.substr(p_, w.size()) != w) return false;
    size_t e = p_ + w.size();
    if (e < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[e])) || t_[e] == '_'))
      return false;
    p_ = e;
    return true;
  }
  std::string word() {
    skip_ws();
    size_t b = p_;
    while (p_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[p_])) || t_[p_] == '_'))
      ++p_;
    if (b == p_) fail("expected a name");
    return std::string(t_.substr(b, p_ - b));
  }
  std::string token_until(std::string_view stops) {
    skip_ws();
    size_t b = p_;
    while (p_ < t_.size() && stops.find(t_[p_]) == std::string_view::npos && t_[p_] != ' ' &&
           t_[p_] != '\t')
      ++p_;
    return std::string(t_.substr(b, p_ - b));
  }
  int64_t integer() {
    skip_ws();
    int64_t v = 0;
    auto r = std::from_chars(t_.data() + p_, t_.data() + t_.size(), v);
    if (r.ec != std::errc()) fail("expected an integer");
    p_ = static_cast<size_t>(r.ptr - t_.data());
    return v;
  }
  ValueId value_ref() {
    expect('%');
    int64_t v = integer();
    if (v < 0 || v > INT32_MAX) fail("value id out of range");
    return static_cast<ValueId>(v);
  }
  std::string quoted() {
    expect('"');
    std::string out;
    while (true) {
      if (p_ >= t_.size()) fail("unterminated string");
      char c = t_[p_++];
      if (c == '"') return out;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (p_ >= t_.size()) fail("unterminated escape");
      char e = t_[p_++];
      out += e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
    }
  }
  Attr attr_value() {
    char c = peek();
    if (c == '"') return quoted();
    if (c == '[') {
      ++p_;
      std::vector<int64_t> v;
      if (accept(']')) return v;
      do v.push_back(integer());
      while (accept(','));
      expect(']');
      return v;
    }
    std::string tok = token_until(",}");
    if (tok.empty()) fail("expected an attribute value");
    bool is_real = tok.find_first_of(".eEnN") != std::string::npos;
    const char* b = tok.data();
    const char* e = tok.data() + tok.size();
    if (is_real) {
      double d = 0;
      auto r = std::from_chars(b, e, d);
      if (r.ec != std::errc() || r.ptr != e) fail("bad number '" + tok + "'");
      return d;
    }
    int64_t i = 0;
    auto r = std::from_chars(b, e, i);
    if (r.ec != std::errc() || r.ptr != e) fail("bad integer '" + tok + "'");
    return i;
  }
  TensorType type() {
    std::string dt = word();
    auto t = parse_dtype(dt);
    if (!t) fail("unknown dtype '" + dt + "'");
    TensorType out{*t, {}};
    expect('[');
    if (accept(']')) return out;
    do out.shape.push_back(integer());
    while (accept(','));
    expect(']');
    return out;
  }
  std::string name_comment() {
    skip_ws();
    if (p_ >= t_.size() || t_[p_] != '#') return "";
    ++p_;
    if (p_ < t_.size() && t_[p_] == ' ') ++p_;
    std::string out;
    while (p_ < t_.size()) {
      char c = t_[p_++];
      if (c == '\\' && p_ < t_.size()) {
        char e = t_[p_++];
        out += e == 'n' ? '\n' : e == 'r' ? '\r' : e;
      } else if (c != '\r') {
        out += c;
      }
    }
    return out;
  }

 private:
  std::string_view t_;
  size_t line_;
  size_t p_ = 0;
};

}  // namespace

std::string print(const Graph& g) {
  std::string s = "graph " + (plain_identifier(g.name) ? g.name : quote(g.name)) + " {\n";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    s += "  %" + std::to_string(i) + " = " + std::string(to_string(n.op)) + "(";
    for (size_t k = 0; k < n.inputs.size(); ++k)
      s += (k ? ", %" : "%") + std::to_string(n.inputs[k]);
    s += ")";
    if (!n.attrs.empty()) {
      s += " {";
      bool first = true;
      for (const auto& [key, value] : n.attrs) {
        s += (first ? "" : ", ") + key + "=" + format_attr(value);
        first = false;
      }
      s += "}";
    }
    s += " : " + to_string(n.type);
    if (!n.name.empty()) s += "  # " + escape_name(n.name);
    s += "\n";
  }
  s += "  outputs(";
  for (size_t k = 0; k < g.outputs.size(); ++k)
    s += (k ? ", %" : "%") + std::to_string(g.outputs[k]);
  s += ")\n}\n";
  return s;
}

Graph parse(std::string_view text) {
  Graph g;
  size_t line_no = 0;
  bool header = false, outputs = false, closed = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view raw = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    Line line(raw, line_no);
    if (line.at_end() || line.peek() == '#') continue;
    if (closed) line.fail("text after the closing '}'");
    if (!header) {
      if (!line.accept_word("graph")) line.fail("expected 'graph NAME {'");
      if (line.peek() == '"') {
        g.name = line.quoted();
      } else {
        g.name = line.token_until("{");
        if (g.name.empty()) line.fail("expected a graph name");
      }
      line.expect('{');
      if (!line.at_end()) line.fail("unexpected text after '{'");
      header = true;
      continue;
    }
    if (line.accept('}')) {
      if (!line.at_end()) line.fail("unexpected text after '}'");
      closed = true;
      continue;
    }
    if (outputs) line.fail("nodes must come before outputs(...)");
    if (line.accept_word("outputs")) {
      line.expect('(');
      if (!line.accept(')')) {
        do g.outputs.push_back(line.value_ref());
        while (line.accept(','));
        line.expect(')');
      }
      if (!line.at_end()) line.fail("unexpected text after outputs(...)");
      outputs = true;
      continue;
    }
    ValueId id = line.value_ref();
    if (static_cast<size_t>(id) != g.nodes.size())
      line.fail("node %" + std::to_string(id) + " out of order: expected %" +
                std::to_string(g.nodes.size()));
    line.expect('=');
    Node n;
    std::string op = line.word();
    auto parsed = parse_op(op);
    if (!parsed) line.fail("unknown op '" + op + "'");
    n.op = *parsed;
    line.expect('(');
    if (!line.accept(')')) {
      do n.inputs.push_back(line.value_ref());
      while (line.accept(','));
      line.expect(')');
    }
    if (line.accept('{')) {
      if (!line.accept('}')) {
        do {
          std::string key = line.word();
          line.expect('=');
          if (n.attrs.count(key)) line.fail("attribute '" + key + "' given twice");
          n.attrs[key] = line.attr_value();
        } while (line.accept(','));
        line.expect('}');
      }
    }
    line.expect(':');
    n.type = line.type();
    n.name = line.name_comment();
    if (!line.at_end()) line.fail("unexpected text after the type");
    g.nodes.push_back(std::move(n));
  }
  if (!header) throw Error("ir text: no 'graph NAME {' header");
  if (!closed) throw Error("ir text: missing closing '}'");
  if (auto msg = verify(g); !msg.empty()) throw Error("ir text: invalid graph: " + msg);
  return g;
}

}  // namespace emmy::ir
