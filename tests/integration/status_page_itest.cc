// The masters' status page (services/master/status_page.h) in a real headless browser (Debian's
// chromium, --dump-dom and --screenshot) against a real cluster: ZooKeeper, 2 masters, 2 workers,
// a running job and a finished one. The leader's page holds its epoch, both workers, the jobs'
// states and their subtask rows; job names that are markup stay text (no element made from
// them); after `regentctl failover` the new leader's page shows the new epoch, and the finished
// job's subtask rows are still there; the standby's page says it is one and links to the leader.
// The screenshot goes to the tests' output directory (REGENT_TEST_OUTPUT_DIR, or
// <build>/test-output). Without chromium the test says "skipped: no chromium".
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "tests/fixtures/temp_dir_test_util.h"
#include "tests/integration/job_cluster_test_util.h"

namespace regent::testing {
namespace {

std::string shellQuoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string chromiumPath() {
  for (const char* path : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (::access(path, X_OK) == 0) return path;
  }
  return "";
}

// Runs headless chromium on `url` with `mode` ("--dump-dom" or "--screenshot=<file>"); returns
// what it printed on stdout.
Result<std::string> browse(const std::string& url, const std::string& mode,
                           const std::string& profile) {
  const std::string command =
      "timeout 120 " + chromiumPath() +
      " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run"
      " --window-size=1280,2000 --virtual-time-budget=3000 --user-data-dir=" +
      shellQuoted(profile) + " " + mode + " " + shellQuoted(url) + " 2>" +
      shellQuoted(profile + ".err");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return Error::fatal("cannot run chromium");
  std::string out;
  char buffer[8192];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = ::pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Error::fatal("chromium " + mode + " " + url + " failed (status " +
                        std::to_string(status) + "); see " + profile + ".err");
  }
  return out;
}

size_t count(const std::string& text, const std::string& needle) {
  size_t found = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
    ++found;
  }
  return found;
}

std::string outputDir() {
  const char* dir = std::getenv("REGENT_TEST_OUTPUT_DIR");
  const std::string path = dir != nullptr ? dir : std::string(REGENT_BIN_DIR) + "/../test-output";
  std::filesystem::create_directories(path);
  return std::filesystem::canonical(path).string();
}

TEST(StatusPage, AHeadlessBrowserSeesTheLeaderWorkersJobsAndSubtasksAcrossAFailover) {
  if (chromiumPath().empty()) GTEST_SKIP() << "skipped: no chromium (apt-get install chromium)";
  TempDir browser("regent-chromium");
  auto made = JobCluster::start("status-page", {.masters = 2, .workers = 2});
  ASSERT_OK(made);
  JobCluster& cluster = *made.value();

  // A finished job whose name is a script element, and a running one whose name breaks out of an
  // attribute: both must stay text.
  auto finished = cluster.submit(
      "name: \"<script>alert(1)</script>\"\nvertices:\n  - name: v\n    parallelism: 2\n"
      "    command:\n      argv: [/bin/true]\n    resources: {cpu: 0.1, memory: 16MiB}\n");
  ASSERT_OK(finished);
  ASSERT_OK(cluster.waitForJobEnd(finished.value(), "FINISHED", 0, kJobsTimeout));
  ASSERT_OK(cluster.waitForJobClean(finished.value(), kJobsTimeout));
  auto running = cluster.submit(
      "name: '\"><img src=x onerror=alert(1)>'\nvertices:\n  - name: sleeper\n"
      "    parallelism: 2\n    command:\n      argv: [/bin/sleep, '300']\n"
      "    resources: {cpu: 0.1, memory: 16MiB}\n");
  ASSERT_OK(running);
  ASSERT_OK(cluster.waitForStatus(
      running.value(),
      [](const nlohmann::json& status) { return status["tasks"]["running"] == 2; },
      kJobsTimeout));

  const size_t first = cluster.leader();
  auto leaderAddress = cluster.masterHttpAddressOf(first);
  ASSERT_OK(leaderAddress);
  auto dom = browse("http://" + leaderAddress.value() + "/", "--dump-dom", browser.path() + "/a");
  ASSERT_OK(dom);
  const std::string& page = dom.value();
  const uint64_t epoch = cluster.epoch();
  EXPECT_NE(page.find("<span id=\"epoch\">" + std::to_string(epoch) + "</span>"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("This master <b>leads</b>"), std::string::npos);
  EXPECT_EQ(count(page, "<tr class=\"worker\">"), 2u) << page;
  EXPECT_NE(page.find("<td class=\"state\">RUNNING</td>"), std::string::npos);
  EXPECT_NE(page.find("<td class=\"state\">FINISHED</td>"), std::string::npos);
  EXPECT_EQ(count(page, "<tr class=\"subtask\">"), 4u) << page;  // 2 running + 2 finished.
  // The names are text in the DOM: no script or img element came from them.
  EXPECT_NE(page.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos) << page;
  EXPECT_EQ(page.find("<script>alert"), std::string::npos) << page;
  EXPECT_EQ(page.find("<img"), std::string::npos) << page;
  // The leader's history, charted from its first sample on (taken when the term served), and the
  // finished job's end among the recent events.
  const size_t charts = page.find("<section id=\"charts\">");
  ASSERT_NE(charts, std::string::npos) << page;
  EXPECT_NE(page.find("<polyline", charts), std::string::npos) << page;
  EXPECT_NE(page.find("jobs RUNNING: <b>", charts), std::string::npos) << page;
  EXPECT_NE(page.find("<b>job ended</b> epoch=" + std::to_string(epoch) + " job=" +
                      finished.value() + " state=FINISHED"),
            std::string::npos)
      << page;
  const std::string screenshot = outputDir() + "/status-page.png";
  ASSERT_OK(browse("http://" + leaderAddress.value() + "/", "--screenshot=" + screenshot,
                   browser.path() + "/b"));
  EXPECT_TRUE(std::filesystem::exists(screenshot));
  std::printf("status page screenshot: %s\n", screenshot.c_str());

  // A failover: the other master leads with the next epoch.
  CtlResult failover = cluster.ctl({"failover"});
  ASSERT_EQ(failover.exit.exitCode, 0) << failover.output;
  ASSERT_OK(cluster.followLeader(epoch + 1));
  const size_t second = cluster.leader();
  ASSERT_NE(second, first);
  auto newAddress = cluster.masterHttpAddressOf(second);
  ASSERT_OK(newAddress);
  auto after = browse("http://" + newAddress.value() + "/", "--dump-dom", browser.path() + "/c");
  ASSERT_OK(after);
  EXPECT_NE(after.value().find("<span id=\"epoch\">" + std::to_string(epoch + 1) + "</span>"),
            std::string::npos)
      << after.value();
  EXPECT_NE(after.value().find("This master <b>leads</b>"), std::string::npos);
  EXPECT_NE(after.value().find("<b>leadership granted</b> epoch=" + std::to_string(epoch + 1)),
            std::string::npos)
      << after.value();
  // The finished job's subtask rows, read from the store by the new leader.
  const std::string finishedBlock = "<div class=\"job-detail\" id=\"job-" + finished.value() + "\">";
  const size_t block = after.value().find(finishedBlock);
  ASSERT_NE(block, std::string::npos) << after.value();
  const std::string rest = after.value().substr(block, after.value().find("</div>", block) - block);
  EXPECT_EQ(count(rest, "<tr class=\"subtask\">"), 2u) << rest;
  EXPECT_EQ(count(rest, "<td class=\"state\">FINISHED</td>"), 2u) << rest;

  // The standby (the old leader) says so and links to the leader's page.
  auto standby = browse("http://" + leaderAddress.value() + "/", "--dump-dom", browser.path() + "/d");
  ASSERT_OK(standby);
  EXPECT_NE(standby.value().find("This master is a <b>standby</b>"), std::string::npos)
      << standby.value();
  EXPECT_NE(standby.value().find("id=\"leader-link\" href=\"http://" + newAddress.value() + "/\""),
            std::string::npos)
      << standby.value();
}

}  // namespace
}  // namespace regent::testing
