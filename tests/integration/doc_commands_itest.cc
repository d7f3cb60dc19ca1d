// The command sequences of README.md and docs/operations.md, run as written against real
// processes on loopback, so the documentation cannot drift from what works. A fenced ```sh block
// right after a line "<!-- doc-test -->" runs on its own; blocks marked
// "<!-- doc-test session=NAME -->" run together, in page order, as one script. The rules (what
// is substituted, what must hold) are in docs/testing.md, "Documented commands".
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fixtures/process_harness.h"
#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/fixtures/zookeeper_server.h"

namespace regent::testing {
namespace {

constexpr Duration kScriptTimeout{120000};
constexpr const char* kDocQuorum = "127.0.0.1:2181";
constexpr const char* kReleaseBin = "build-release/bin/";
constexpr const char* kBuildStep = "scripts/build.sh";
constexpr const char* kDone = "doc-test: every step succeeded";

// One script: a marked block, or every block of one session.
struct DocScript {
  std::string name;  // "README.md line 62", or "docs/operations.md session local-cluster".
  std::string text;
};

std::string readSource(const std::string& relative) {
  std::ifstream in(std::string(REGENT_SOURCE_DIR) + "/" + relative, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + relative);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The scripts of one page, in page order (a session where its first block is). A marker not
// followed by a ```sh block is a test failure.
std::vector<DocScript> docScripts(const std::string& page) {
  std::istringstream in(readSource(page));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);

  std::vector<DocScript> scripts;
  std::map<std::string, size_t> sessions;  // Session name -> index in `scripts`.
  const std::string marker = "<!-- doc-test";
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].starts_with(marker)) continue;
    const size_t open = i + 1;
    if (open >= lines.size() || lines[open] != "```sh") {
      ADD_FAILURE() << page << " line " << i + 1
                    << ": a doc-test marker must precede a ```sh block";
      continue;
    }
    std::string block;
    size_t close = open + 1;
    for (; close < lines.size() && lines[close] != "```"; ++close) block += lines[close] + "\n";
    const std::string attributes = lines[i].substr(marker.size());
    const size_t at = attributes.find("session=");
    if (at == std::string::npos) {
      scripts.push_back({page + " line " + std::to_string(open + 1), block});
    } else {
      const std::string session = attributes.substr(at + 8, attributes.find(' ', at) - at - 8);
      auto [found, added] = sessions.emplace(session, scripts.size());
      if (added) scripts.push_back({page + " session " + session, ""});
      scripts[found->second].text += block;
    }
    i = close;
  }
  return scripts;
}

void replaceAll(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// The block as the test runs it: build steps dropped (the test has its binaries), the release
// directory's binaries taken from PATH, the documented quorum replaced by the test's own
// ZooKeeper; then the check that every process started in the background still runs.
std::string runnable(std::string block, const std::string& quorum) {
  std::istringstream in(block);
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with(kBuildStep)) kept += line + "\n";
  }
  replaceAll(kept, kReleaseBin, "");
  replaceAll(kept, kDocQuorum, quorum);
  return "set -euo pipefail\n" + kept +
         "if jobs -l | grep -E 'Done|Exit|Killed|Terminated|Aborted|Segmentation'; then\n"
         "  echo 'doc-test: a process the block started in the background has ended' >&2\n"
         "  exit 97\n"
         "fi\n"
         "echo '" + kDone + "'\n";
}

std::string tail(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > 6000 ? all.substr(all.size() - 6000) : all;
}

// Runs every script of `page`, each with a ZooKeeper server of its own (so the documented
// cluster id starts empty) in a directory of its own.
void runPage(const std::string& page, size_t expectedScripts) {
  const std::vector<DocScript> scripts = docScripts(page);
  ASSERT_EQ(scripts.size(), expectedScripts)
      << page << ": the number of runnable blocks changed; update the test with the page";
  for (const DocScript& script : scripts) {
    SCOPED_TRACE(script.name);
    auto server = ZooKeeperServer::start();
    ASSERT_TRUE(server.ok()) << server.error().message;
    TempDir dir("doc-test");
    const std::string path = dir.path() + "/script.sh";
    std::ofstream(path) << runnable(script.text, server.value()->connectString());
    const std::string output = dir.path() + "/output.log";
    auto shell = ProcessHarness::start(ProcessOptions{
        .argv = {"bash", path},
        // TMPDIR: what a block puts in a temporary directory (mktemp) goes with the test's.
        .env = {"PATH=" + std::string(REGENT_BIN_DIR) + ":" + std::getenv("PATH"),
                "TMPDIR=" + dir.path()},
        .cwd = dir.path(),
        .outputPath = output});
    ASSERT_TRUE(shell.ok()) << shell.error().message;
    auto exit = shell.value()->waitForExit(kScriptTimeout);
    ASSERT_TRUE(exit.has_value()) << script.name << " did not finish; output:\n" << tail(output);
    EXPECT_EQ(exit->exitCode, 0) << script.name << " ended with " << exit->describe()
                                 << "; output:\n" << tail(output);
    EXPECT_NE(tail(output).find(kDone), std::string::npos) << tail(output);
    // Destroying the harness kills what the script left running (its process group).
  }
}

TEST(DocCommands, TheReadmesCommandSequenceRunsAsWritten) { runPage("README.md", 1); }

TEST(DocCommands, TheOperationsGuidesCommandSequencesRunAsWritten) {
  runPage("docs/operations.md", 2);  // The local cluster (with curl), the openssl certificates.
}

TEST(DocCommands, TheHarnessFailsABlockWhoseBackgroundProcessEnded) {
  // As a master that cannot bind its port ends: the steps after it may still succeed.
  TempDir dir("doc-test");
  const std::string path = dir.path() + "/script.sh";
  std::ofstream(path) << runnable(
      "false &\nended=$!\nwhile kill -0 \"$ended\" 2>/dev/null; do sleep 0.05; done\ntrue\n",
      "127.0.0.1:1");
  auto shell = ProcessHarness::start(ProcessOptions{
      .argv = {"bash", path}, .cwd = dir.path(), .outputPath = dir.path() + "/output.log"});
  ASSERT_TRUE(shell.ok()) << shell.error().message;
  auto exit = shell.value()->waitForExit(kScriptTimeout);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exitCode, 97) << tail(dir.path() + "/output.log");
}

}  // namespace
}  // namespace regent::testing
