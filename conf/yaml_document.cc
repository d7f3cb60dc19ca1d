// One YAML document out of a file, without YAML::LoadAll (yaml_document.h).
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

Result<std::optional<YAML::Node>, YamlDocumentError> readSingleYamlDocument(std::string_view text) {
  using Kind = YamlDocumentError::Kind;
  const std::string copy(text);
  try {
    std::istringstream input(copy);
    YAML::Parser parser(input);
    // Each document after the first starts with a marker ("---", or "..." ending the one before),
    // so a text cannot hold more than this many; a parser that yields more is stuck.
    const size_t maxDocuments = 1 + copy.size() / 3;
    size_t documents = 0;
    for (;;) {
      DocumentScan scan;
      if (!parser.HandleNextDocument(scan)) break;
      ++documents;
      if (documents == 1) continue;
      if (scan.hasContent) {
        return YamlDocumentError{Kind::kSecondDocument, "", scan.contentMark.line,
                                 scan.contentMark.column};
      }
      if (documents > maxDocuments) {
        return YamlDocumentError{
            Kind::kSyntax, "unexpected text after the document's first value (a stray ',' or ']'?)"};
      }
    }
    if (documents == 0) return std::optional<YAML::Node>();
    return std::optional<YAML::Node>(YAML::Load(copy));
  } catch (const YAML::ParserException& e) {
    return YamlDocumentError{Kind::kSyntax, e.msg, e.mark.line, e.mark.column};
  } catch (const YAML::Exception& e) {
    return YamlDocumentError{Kind::kSyntax, e.msg};
  }
}

}  // namespace regent
