// The sections the code and the docs point a reader to exist: every `docs/<page>.md, "<section>"`
// (and `<page>.md, "<section>"` inside docs/) in the repository names a heading of that page, or
// a paragraph of it that opens with the section's name in bold ("**Admission.**").
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace regent {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = REGENT_SOURCE_DIR;

std::string readFile(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// The names a page's sections go by: each heading ("## Fuzzing (`tests/fuzz/`)" is "Fuzzing
// (`tests/fuzz/`)" and "Fuzzing"), and each paragraph that opens in bold ("**Admission.** ...").
std::set<std::string> sectionNames(const std::string& page) {
  std::set<std::string> names;
  std::istringstream lines(page);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("#")) {
      const size_t start = line.find_first_not_of("# ");
      if (start == std::string::npos) continue;
      std::string name = line.substr(start);
      names.insert(name);
      if (const size_t paren = name.find(" ("); paren != std::string::npos) {
        names.insert(name.substr(0, paren));
      }
    } else if (line.starts_with("**")) {
      const size_t end = line.find("**", 2);
      if (end == std::string::npos) continue;
      std::string name = line.substr(2, end - 2);
      if (!name.empty() && name.back() == '.') name.pop_back();
      names.insert(name);
    }
  }
  return names;
}

// The text with a line break, and the comment marks or string-literal quotes that continue it on
// the next line, read as one space: a reference wrapped over two lines is still one reference.
std::string joinWrappedLines(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\n') {
      out += text[i];
      continue;
    }
    // A C++ string literal continued on the next line: `... "\n    "...`.
    bool literal = !out.empty() && out.back() == '"';
    size_t next = i + 1;
    while (next < text.size() && (text[next] == ' ' || text[next] == '\t')) ++next;
    if (literal && next < text.size() && text[next] == '"') {
      out.pop_back();
      i = next;
      continue;
    }
    if (text.compare(next, 2, "//") == 0) next += 2;
    else if (next < text.size() && text[next] == '#') ++next;
    while (next < text.size() && (text[next] == ' ' || text[next] == '\t')) ++next;
    // Trailing spaces before the break are already in `out`: one space in all.
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += ' ';
    i = next - 1;
  }
  return out;
}

struct Reference {
  std::string file;
  std::string page;
  std::string section;
};

// Every `<page>.md, "<section>"` in `text`, with an optional "docs/" before the page, ")" after
// it and backslashes before the quotes (a reference inside a C++ string).
std::vector<Reference> referencesIn(const std::string& file, const std::string& text) {
  std::vector<Reference> found;
  for (size_t at = text.find(".md"); at != std::string::npos; at = text.find(".md", at + 3)) {
    size_t start = at;
    while (start > 0 && (std::islower(static_cast<unsigned char>(text[start - 1])) ||
                         text[start - 1] == '_' || text[start - 1] == '-')) {
      --start;
    }
    if (start == at) continue;
    const std::string page = text.substr(start, at + 3 - start);
    size_t i = at + 3;
    if (i < text.size() && text[i] == ')') ++i;
    if (i < text.size() && text[i] == ',') ++i;
    if (i >= text.size() || text[i] != ' ') continue;
    ++i;
    if (i < text.size() && text[i] == '\\') ++i;
    if (i >= text.size() || text[i] != '"') continue;
    ++i;
    const size_t end = text.find_first_of("\"\\", i);
    if (end == std::string::npos || end == i) continue;
    found.push_back({file, page, text.substr(i, end - i)});
  }
  return found;
}

bool isBuildOutput(const fs::path& relative) {
  const std::string top = relative.begin()->string();
  return top.starts_with("build") || top.starts_with(".") || top == "node_modules";
}

bool isText(const fs::path& path) {
  static const std::set<std::string> kExtensions = {".md",  ".h",   ".cc",  ".capnp", ".sh",
                                                    ".txt", ".yml", ".yaml", ".py"};
  return kExtensions.contains(path.extension().string());
}

TEST(DocReferences, EverySectionTheRepositoryPointsToExists) {
  std::map<std::string, std::set<std::string>> pages;
  for (const auto& entry : fs::directory_iterator(kSource / "docs")) {
    if (entry.path().extension() == ".md") {
      pages[entry.path().filename().string()] = sectionNames(readFile(entry.path()));
    }
  }
  ASSERT_TRUE(pages.contains("architecture.md")) << "no docs/ under " << kSource;

  size_t checked = 0;
  std::vector<std::string> broken;
  for (auto it = fs::recursive_directory_iterator(kSource);
       it != fs::recursive_directory_iterator(); ++it) {
    const fs::path relative = fs::relative(it->path(), kSource);
    if (it->is_directory() && isBuildOutput(relative)) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || !isText(it->path())) continue;
    for (const Reference& ref : referencesIn(relative.string(), joinWrappedLines(readFile(it->path())))) {
      const auto page = pages.find(ref.page);
      if (page == pages.end()) continue;  // Not a page of docs/ (another project's file).
      ++checked;
      if (!page->second.contains(ref.section)) {
        broken.push_back(ref.file + ": docs/" + ref.page + ", \"" + ref.section +
                         "\": the page has no such heading");
      }
    }
  }
  EXPECT_GT(checked, 50u) << "the references were not found: is the scan broken?";
  std::string report;
  for (const std::string& line : broken) report += line + "\n";
  EXPECT_TRUE(broken.empty()) << report;
}

TEST(DocReferences, AReferenceIsFoundWrappedOrInsideAString) {
  // Pages that docs/ does not have, so that this file's own text refers to nothing there.
  const auto refs = referencesIn(
      "x.cc", joinWrappedLines("// see docs/one-page.md, \"Chain of\n// trust\" and (docs/two.md, "
                               "\"Admission\")\n\"(docs/three.md, \"\n   \"\\\"Events\\\")\""));
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_EQ(refs[0].page, "one-page.md");
  EXPECT_EQ(refs[0].section, "Chain of trust");
  EXPECT_EQ(refs[1].section, "Admission");
  EXPECT_EQ(refs[2].page, "three.md");
  EXPECT_EQ(refs[2].section, "Events");
}

TEST(DocReferences, SectionsAreHeadingsAndBoldParagraphOpenings) {
  const auto names = sectionNames("# Top\n## Fuzzing (`tests/fuzz/`)\ntext **not this**\n"
                                  "**Admission.** What a master lets in.\n");
  EXPECT_TRUE(names.contains("Top"));
  EXPECT_TRUE(names.contains("Fuzzing"));
  EXPECT_TRUE(names.contains("Fuzzing (`tests/fuzz/`)"));
  EXPECT_TRUE(names.contains("Admission"));
  EXPECT_FALSE(names.contains("not this"));
}

}  // namespace
}  // namespace regent
