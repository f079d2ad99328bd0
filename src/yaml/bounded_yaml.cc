// bounded_yaml.cc — check_yaml_bounds (see bounded_yaml.h): one pass of yaml-cpp's event
// parser with a handler that counts, and throws to stop at the first bound crossed.
//
// Invariants: sizes are known for every anchor before any alias can refer to it (YAML defines
// an anchor before its aliases, and a node's size is final at its end event; an alias to a
// collection that is still open is recursive, which yaml-cpp itself refuses); `expanded_*` are
// running totals over the whole document, so an alias bomb is stopped at the first alias that
// crosses the bound, having expanded nothing.
#include "bounded_yaml.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <cstdint>
#include <sstream>
#include <unordered_map>
#include <vector>

namespace ratelimit::yaml {
namespace {

struct Refused {
  YamlRefusal refusal;
};

struct Size {
  uint64_t nodes = 0;
  uint64_t bytes = 0;
};

class Counter final : public YAML::EventHandler {
 public:
  explicit Counter(const YamlBounds& b) : b_(b) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t anchor) override { leaf(m, anchor, {1, 0}); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    leaf(m, anchor, {1, value.size()});
  }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t anchor) override {
    if (++aliases_ > b_.max_aliases) refuse(m, "more than " + std::to_string(b_.max_aliases) + " YAML aliases");
    const auto it = sizes_.find(anchor);
    const Size s = it != sizes_.end() ? it->second : Size{1, 0};
    written(m);
    add(m, s);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(m, anchor);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(m, anchor);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    YAML::anchor_t anchor;
    Size size;  // this collection and its content, expanded
  };

  [[noreturn]] static void refuse(const YAML::Mark& m, std::string reason) {
    throw Refused{{m.is_null() ? 1 : m.line + 1, std::move(reason)}};
  }
  void written(const YAML::Mark& m) {
    if (++nodes_ > b_.max_nodes) refuse(m, "more than " + std::to_string(b_.max_nodes) + " YAML nodes");
  }
  // Adds an expanded size to the enclosing collection and to the document's totals.
  void add(const YAML::Mark& m, Size s) {
    if (!stack_.empty()) {
      stack_.back().size.nodes += s.nodes;
      stack_.back().size.bytes += s.bytes;
    }
    expanded_.nodes += s.nodes;
    expanded_.bytes += s.bytes;
    if (expanded_.nodes > b_.max_expanded_nodes) {
      refuse(m, "YAML aliases expand the document to more than " +
                    std::to_string(b_.max_expanded_nodes) + " nodes");
    }
    if (expanded_.bytes > b_.max_expanded_bytes) {
      refuse(m, "YAML aliases expand the document to more than " +
                    std::to_string(b_.max_expanded_bytes) + " bytes of values");
    }
  }
  void leaf(const YAML::Mark& m, YAML::anchor_t anchor, Size s) {
    written(m);
    if (anchor != YAML::NullAnchor) sizes_[anchor] = s;
    add(m, s);
  }
  void open(const YAML::Mark& m, YAML::anchor_t anchor) {
    written(m);
    if (stack_.size() >= b_.max_depth) {
      refuse(m, "YAML nesting deeper than " + std::to_string(b_.max_depth) + " levels");
    }
    stack_.push_back({anchor, {1, 0}});
    expanded_.nodes += 1;  // the collection itself; its content is added as it comes
    if (expanded_.nodes > b_.max_expanded_nodes) add(m, {0, 0});
  }
  void close() {
    const Frame f = stack_.back();
    stack_.pop_back();
    if (f.anchor != YAML::NullAnchor) sizes_[f.anchor] = f.size;
    if (!stack_.empty()) {  // the content was already counted in the totals
      stack_.back().size.nodes += f.size.nodes;
      stack_.back().size.bytes += f.size.bytes;
    }
  }

  const YamlBounds& b_;
  std::vector<Frame> stack_;
  std::unordered_map<YAML::anchor_t, Size> sizes_;
  uint64_t nodes_ = 0;
  uint64_t aliases_ = 0;
  Size expanded_;
};

}  // namespace

std::optional<YamlRefusal> check_yaml_bounds(std::string_view text, const YamlBounds& bounds) {
  std::istringstream in{std::string(text)};
  Counter counter(bounds);
  try {
    YAML::Parser parser(in);
    parser.HandleNextDocument(counter);
  } catch (const Refused& r) {
    return r.refusal;
  } catch (const YAML::Exception&) {
    return std::nullopt;  // a syntax error: YAML::Load reports it in the reader's words
  }
  return std::nullopt;
}

}  // namespace ratelimit::yaml
