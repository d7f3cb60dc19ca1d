// The status page every master serves at / (and an ended or running job's page at
// /jobs/<id>): server-rendered HTML, readable without JavaScript, from the master's cluster view
// (cluster_view.h). Every value that comes from a JobGraph, a worker or ZooKeeper is
// HTML-escaped; the page carries no inline script or style (its stylesheet and its refresh script
// are served from the binary at /static/, and the Content-Security-Policy forbids anything else).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/event_sink.h"
#include "leader/leader_retrieval.h"
#include "services/master/cluster_view.h"

namespace regent::master {

// What the page shows, gathered by the route.
struct StatusPageInput {
  LeadershipSnapshot leadership;
  std::vector<leader::ContenderEntry> contenders;
  std::string contendersError;             // Why the contenders could not be read; "" else.
  const WorkersSnapshot* workers = nullptr;  // The leader's; null on a standby.
  const JobsSnapshot* jobs = nullptr;        // The leader's once recovered; null else.
  // The jobs of `page`, with their subtasks (jobStatus's detail), in the order of `jobs`.
  std::vector<JobDetailSnapshot> shownJobs;
  std::vector<Event> events;                 // Recent events (ClusterView::recentEvents).
  std::vector<ClusterSample> history;        // The master's history, oldest first.
  int64_t nowMs = 0;                         // Wall clock, for ages.
  uint32_t page = 0;                         // Which page of jobs (0 = the newest).
  uint32_t pageSize = 50;
  // RPC authentication is on: worker hosts, attempt ids and failure messages are left out, as
  // /v1/jobs/<id> leaves them out (regentctl, role reader, shows them).
  bool redacted = false;
};

// The whole page (text/html; charset=utf-8).
std::string renderStatusPage(const StatusPageInput& input);

// Which jobs of `jobs` page `page` shows: [first, last).
std::pair<uint32_t, uint32_t> shownRange(uint32_t jobs, uint32_t page, uint32_t pageSize);

// The charts of `history` (oldest first): one small inline SVG line per series (jobs of each
// state that any sample has, slots free, attempts restarted and adopted per sample), each with
// its latest value and its largest; a sentence instead while there is no sample.
std::string renderCharts(const std::vector<ClusterSample>& history);

// One event as the page lists it: when, its name and fields. With `redacted`, free text (a
// reason, a failure message) is left out, as the page leaves failure messages out.
std::string renderEvent(const Event& event, int64_t nowMs, bool redacted);

// One job's page: its vertices and subtasks with their latest attempts.
std::string renderJobPage(const LeadershipSnapshot& leadership, wire::JobStatus::Reader job,
                          int64_t nowMs, bool redacted);

// `text` with &, <, >, " and ' replaced by entities (and invalid UTF-8 replaced), safe in element
// content and in quoted attribute values.
std::string htmlEscaped(std::string_view text);

// The page's Content-Security-Policy header value.
const char* statusPagePolicy();
// /static/status.css and /static/status.js.
const char* statusPageStylesheet();
const char* statusPageScript();

}  // namespace regent::master
