// Reading a YAML text that must hold one document (see yaml_document.h).
#include "conf/yaml_document.h"

#include <utility>
#include <vector>

namespace regent {

Result<std::optional<YAML::Node>, YamlProblem> loadSingleYamlDocument(std::string_view text) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(std::string(text));
  } catch (const YAML::ParserException& e) {
    return YamlProblem{YamlProblem::Kind::kSyntax, e.msg, e.mark.line, e.mark.column};
  } catch (const YAML::Exception& e) {
    return YamlProblem{YamlProblem::Kind::kSyntax, e.msg, -1, -1};
  }
  for (size_t i = 1; i < documents.size(); ++i) {
    if (documents[i].IsNull()) continue;  // A trailing "---" or "..." with nothing after it.
    const YAML::Mark mark = documents[i].Mark();
    return YamlProblem{YamlProblem::Kind::kSecondDocument, "a second YAML document",
                       mark.is_null() ? -1 : mark.line, mark.is_null() ? -1 : mark.column};
  }
  if (documents.empty()) return std::optional<YAML::Node>();
  return std::optional<YAML::Node>(std::move(documents.front()));
}

}  // namespace regent
