// Reading a YAML text that must hold one document (see yaml_document.h).
//
// Not YAML::LoadAll: on some malformed text ("{a: 1}," — a flow node, then a comma) yaml-cpp's
// parser stops advancing and yields empty documents forever, so LoadAll never returns and
// grows memory without bound. Documents are walked one at a time instead, and a text cannot
// hold more documents than it has room for markers.
#include "conf/yaml_document.h"

#include <yaml-cpp/eventhandler.h>

#include <sstream>

namespace regent {
namespace {

// Sees one document's events: whether it holds anything but a null, and where that starts.
class DocumentScan final : public YAML::EventHandler {
 public:
  bool hasContent = false;
  YAML::Mark contentMark = YAML::Mark::null_mark();

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { note(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    note(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    note(mark);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    note(mark);
  }
  void OnMapEnd() override {}

 private:
  void note(const YAML::Mark& mark) {
    if (hasContent) return;
    hasContent = true;
    contentMark = mark;
  }
};

}  // namespace

Result<std::optional<YAML::Node>, YamlProblem> loadSingleYamlDocument(std::string_view text) {
  using Kind = YamlProblem::Kind;
  const std::string copy(text);
  try {
    std::istringstream input(copy);
    YAML::Parser parser(input);
    // Each document after the first starts with a marker ("---", or "..." ending the one before),
    // so a text holds at most this many; a parser that yields more is stuck.
    const size_t maxDocuments = 1 + copy.size() / 3;
    size_t documents = 0;
    for (;;) {
      DocumentScan scan;
      if (!parser.HandleNextDocument(scan)) break;
      ++documents;
      if (documents == 1) continue;
      if (scan.hasContent) {
        const YAML::Mark& mark = scan.contentMark;
        return YamlProblem{Kind::kSecondDocument, "a second YAML document",
                           mark.is_null() ? -1 : mark.line, mark.is_null() ? -1 : mark.column};
      }
      if (documents > maxDocuments) {
        return YamlProblem{Kind::kSyntax,
                           "unexpected text after the first value (a stray ',' or ']'?)", -1, -1};
      }
    }
    if (documents == 0) return std::optional<YAML::Node>();
    return std::optional<YAML::Node>(YAML::Load(copy));
  } catch (const YAML::ParserException& e) {
    return YamlProblem{Kind::kSyntax, e.msg, e.mark.line, e.mark.column};
  } catch (const YAML::Exception& e) {
    return YamlProblem{Kind::kSyntax, e.msg, -1, -1};
  }
}

}  // namespace regent
