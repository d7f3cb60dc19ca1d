// regent-config-example: prints the annotated example configuration generated from the
// option registry, or rewrites the committed copies (conf/regent.yaml, docs/configuration.md).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "conf/example.h"

namespace {

bool writeFile(const std::string& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << contents;
  out.close();
  if (!out) {
    std::cerr << "regent-config-example: cannot write " << path << "\n";
    return false;
  }
  std::cout << "wrote " << path << "\n";
  return true;
}

bool updateSourceTree(const std::string& sourceDir) {
  const std::string docsPath = sourceDir + "/docs/configuration.md";
  std::ifstream in(docsPath, std::ios::binary);
  if (!in) {
    std::cerr << "regent-config-example: cannot read " << docsPath << "\n";
    return false;
  }
  std::stringstream docs;
  docs << in.rdbuf();
  auto updated = regent::replaceOptionsTable(docs.str());
  if (!updated) {
    std::cerr << "regent-config-example: " << docsPath << ": " << updated.error().message << "\n";
    return false;
  }
  return writeFile(sourceDir + "/conf/regent.yaml", regent::renderExampleYaml()) &&
         writeFile(docsPath, updated.value());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Prints the annotated example regent configuration (conf/regent.yaml)."};
  bool markdown = false;
  std::string sourceDir;
  app.add_flag("--markdown", markdown,
               "print the markdown option table of docs/configuration.md instead");
  app.add_option("--update", sourceDir,
                 "rewrite conf/regent.yaml and the table in docs/configuration.md under this "
                 "source directory");
  CLI11_PARSE(app, argc, argv);

  if (!sourceDir.empty()) return updateSourceTree(sourceDir) ? 0 : 1;
  std::cout << (markdown ? regent::renderOptionsTable() : regent::renderExampleYaml());
  return 0;
}
