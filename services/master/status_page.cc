// The status page (status_page.h).
#include "services/master/status_page.h"

#include <algorithm>
#include <sstream>
#include <type_traits>
#include <variant>

#include <capnp/schema.h>

#include "common/ids.h"
#include "common/units.h"
#include "common/utf8.h"
#include "rpc/wire_ids.h"

namespace regent::master {

namespace {

std::string text(capnp::Text::Reader value) {
  return htmlEscaped(std::string_view(value.begin(), value.size()));
}

// "12s ago", "3m ago": how long before `nowMs` the wall-clock time `atMs` was; "-" for none.
std::string ago(int64_t atMs, int64_t nowMs) {
  if (atMs <= 0) return "-";
  const int64_t ms = std::max<int64_t>(0, nowMs - atMs);
  if (ms < 1000) return "just now";
  if (ms < 60'000) return std::to_string(ms / 1000) + "s ago";
  if (ms < 3'600'000) return std::to_string(ms / 60'000) + "m ago";
  if (ms < 86'400'000) return std::to_string(ms / 3'600'000) + "h ago";
  return std::to_string(ms / 86'400'000) + "d ago";
}

std::string lasted(int64_t fromMs, int64_t toMs) {
  if (fromMs <= 0 || toMs < fromMs) return "-";
  return htmlEscaped(formatDuration(Duration(toMs - fromMs)));
}

// The document up to <body>; `title` is escaped already.
std::string head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta name=\"viewport\" content=\"width=device-width\">"
         "<title>" +
         title +
         "</title><link rel=\"stylesheet\" href=\"/static/status.css\">"
         "<script src=\"/static/status.js\" defer></script></head>\n<body>\n";
}

// Who this master is and who leads, as the page's first lines.
void leadershipSection(std::ostringstream& out, const LeadershipSnapshot& leadership,
                       int64_t nowMs) {
  out << "<header><h1>regent <span id=\"cluster\">" << htmlEscaped(leadership.clusterId)
      << "</span></h1>";
  out << "<p id=\"role\">";
  if (leadership.leadingEpoch != 0) {
    out << "This master <b>leads</b> (epoch <span id=\"epoch\">" << leadership.leadingEpoch
        << "</span>, " << (leadership.serving ? "SERVING" : "RECOVERING") << ").";
  } else if (leadership.leader && leadership.leader->masterId != leadership.self.masterId) {
    const leader::LeaderInfo& leader = *leadership.leader;
    out << "This master is a <b>standby</b>. The leader is <a id=\"leader-link\" href=\"http://"
        << htmlEscaped(leader.httpAddress) << "/\">" << htmlEscaped(leader.httpAddress)
        << "</a> (epoch <span id=\"epoch\">" << leader.epoch << "</span>).";
  } else {
    out << "This master is a <b>standby</b>; no leader is known to it.";
  }
  out << "</p>";
  if (leadership.leader) {
    const leader::LeaderInfo& leader = *leadership.leader;
    out << "<dl id=\"leader\"><dt>leader</dt><dd>" << htmlEscaped(leader.masterId.substr(0, 8))
        << " on " << htmlEscaped(leader.host) << " (" << htmlEscaped(leader.rpcAddress)
        << ")</dd><dt>epoch</dt><dd>" << leader.epoch << "</dd><dt>status</dt><dd>"
        << leader::leaderStatusName(leader.status) << "</dd><dt>elected</dt><dd>"
        << ago(leader.electedAtMs, nowMs) << "</dd></dl>";
  }
  out << "</header>\n";
}

void mastersSection(std::ostringstream& out, const StatusPageInput& input) {
  out << "<section id=\"masters\"><h2>Masters</h2>";
  if (!input.contendersError.empty()) {
    out << "<p class=\"problem\">" << htmlEscaped(input.contendersError) << "</p>";
  }
  out << "<table><thead><tr><th>role</th><th>master</th><th>host</th><th>RPC</th><th>page</th>"
         "<th>started</th></tr></thead><tbody>";
  for (const leader::ContenderEntry& entry : input.contenders) {
    const leader::ContenderInfo& info = entry.info;
    out << "<tr><td>" << (entry.leader ? "LEADER" : "STANDBY") << "</td><td>"
        << htmlEscaped(info.masterId.substr(0, 8)) << "</td><td>" << htmlEscaped(info.host)
        << "</td><td>" << htmlEscaped(info.rpcAddress) << "</td><td><a href=\"http://"
        << htmlEscaped(info.httpAddress) << "/\">" << htmlEscaped(info.httpAddress)
        << "</a></td><td>" << ago(info.startedAtMs, input.nowMs) << "</td></tr>";
  }
  out << "</tbody></table></section>\n";
}

void workersSection(std::ostringstream& out, const StatusPageInput& input) {
  out << "<section id=\"workers\"><h2>Workers</h2>";
  if (input.workers == nullptr) {
    out << "<p>Shown by the leader.</p></section>\n";
    return;
  }
  out << "<table><thead><tr><th>host</th><th>slots used</th><th>containment</th>"
         "<th>started by</th><th>last heartbeat</th></tr></thead><tbody>";
  for (auto worker : input.workers->workers) {
    auto registration = worker.getRegistration();
    uint32_t used = 0;
    for (auto slot : worker.getSlots()) used += slot.hasAllocationId() ? 1 : 0;
    const std::string provider = registration.getProviderWorkerId().size() > 0
                                     ? text(registration.getProviderWorkerId())
                                     : std::string("-");
    out << "<tr class=\"worker\"><td>"
        << (input.redacted ? std::string("-") : text(registration.getHost())) << "</td><td>" << used
        << " / " << worker.getSlots().size() << "</td><td>" << text(registration.getContainment())
        << "</td><td>" << provider << "</td><td>" << ago(worker.getLastHeartbeatAtMs(), input.nowMs)
        << "</td></tr>";
  }
  out << "</tbody></table></section>\n";
}

// One subtask's row: its latest attempt, worker, state, exit, how long it ran, its output.
void subtaskRow(std::ostringstream& out, wire::SubtaskStatus::Reader subtask, int64_t nowMs,
                bool redacted) {
  out << "<tr class=\"subtask\"><td>" << subtask.getIndex() << "</td>";
  if (subtask.hasAttempt()) {
    auto attempt = subtask.getAttempt();
    // An exit only once the attempt ended.
    const std::string exit = attempt.getEndedAtMs() <= 0 ? std::string("-")
                             : attempt.getTermSignal() != 0
                                 ? "signal " + std::to_string(attempt.getTermSignal())
                                 : std::to_string(attempt.getExitCode());
    const int64_t end = attempt.getEndedAtMs() > 0 ? attempt.getEndedAtMs() : nowMs;
    const std::string attemptId = wire::idFromWire<AttemptId>(attempt.getAttemptId()).toHex();
    out << "<td>" << (redacted ? std::string("-") : attemptId.substr(0, 8)) << " #"
        << attempt.getAttemptNumber() << "</td><td>"
        << (redacted ? std::string("-") : text(subtask.getHost())) << "</td><td class=\"state\">"
        << wire::enumNameUpper(attempt.getState()) << "</td><td>" << exit << "</td><td>"
        << lasted(attempt.getStartedAtMs(), end) << "</td><td>";
    // Without RPC authentication a worker serves its attempts' output to anyone who asks;
    // with it, reading needs a token from the leader (regentctl jobs logs).
    if (!redacted && subtask.getHttpAddress().size() > 0) {
      const std::string base =
          "http://" + text(subtask.getHttpAddress()) + "/v1/attempts/" + attemptId;
      out << "<a href=\"" << base << "/stdout\">stdout</a> <a href=\"" << base
          << "/stderr\">stderr</a>";
    } else {
      out << "-";
    }
    out << "</td>";
  } else {
    out << "<td>-</td><td>-</td><td class=\"state\">-</td><td>-</td><td>-</td><td>-</td>";
  }
  out << "<td>" << (redacted ? std::string("-") : text(subtask.getLastFailure())) << "</td><td>"
      << text(subtask.getWaitingReason()) << "</td></tr>";
}

void subtaskTable(std::ostringstream& out, wire::VertexStatus::Reader vertex, int64_t nowMs,
                  bool redacted) {
  out << "<table class=\"subtasks\"><caption>vertex <span class=\"name\">" << text(vertex.getName())
      << "</span>, parallelism " << vertex.getParallelism()
      << "</caption><thead><tr><th>subtask</th><th>attempt</th><th>worker</th><th>state</th>"
         "<th>exit</th><th>ran</th><th>output</th><th>last failure</th><th>waiting</th></tr>"
         "</thead><tbody>";
  for (auto subtask : vertex.getSubtasks()) subtaskRow(out, subtask, nowMs, redacted);
  out << "</tbody></table>";
}

void jobsSection(std::ostringstream& out, const StatusPageInput& input) {
  out << "<section id=\"jobs\"><h2>Jobs</h2>";
  if (input.jobs == nullptr) {
    out << "<p>Shown by the leader once it recovered.</p></section>\n";
    return;
  }
  const auto jobs = input.jobs->jobs;
  const auto [first, last] = shownRange(jobs.size(), input.page, input.pageSize);
  out << "<p>" << jobs.size() << " jobs";
  if (first >= last && jobs.size() > 0) {
    out << ", none on this page (<a href=\"/\">the newest</a>)";
  } else if (jobs.size() > input.pageSize) {
    out << ", " << first + 1 << " to " << last << " shown";
  }
  out << ".</p><table><thead><tr><th>job</th><th>name</th><th>state</th><th>age</th>"
         "<th>tasks</th><th>waiting</th></tr></thead><tbody>";
  for (uint64_t i = first; i < last; ++i) {
    auto job = jobs[static_cast<unsigned>(i)];
    const std::string id = wire::idFromWire<JobId>(job.getJobId()).toHex();
    // An ended job's list entry carries no counts; its detail does.
    auto tasks = job.getTasks();
    for (const JobDetailSnapshot& shown : input.shownJobs) {
      if (shown.status.getJobId().getHi() == job.getJobId().getHi() &&
          shown.status.getJobId().getLo() == job.getJobId().getLo()) {
        tasks = shown.status.getTasks();
      }
    }
    out << "<tr class=\"job\"><td><a href=\"/jobs/" << id << "\">" << id.substr(0, 8)
        << "</a></td><td class=\"name\">" << text(job.getName()) << "</td><td class=\"state\">"
        << wire::enumNameUpper(job.getState()) << "</td><td>"
        << ago(job.getSubmittedAtMs(), input.nowMs) << "</td><td>" << tasks.getRunning() << " running, "
        << tasks.getFinished() << " finished, " << tasks.getFailed() << " failed of "
        << tasks.getTotal() << "</td><td>" << text(job.getWaitingReason()) << "</td></tr>";
  }
  out << "</tbody></table>";
  if (input.page > 0 && first < last) {
    out << "<a rel=\"prev\" href=\"/?page=" << input.page - 1 << "\">newer</a> ";
  }
  if (last < jobs.size()) out << "<a rel=\"next\" href=\"/?page=" << input.page + 1 << "\">older</a>";
  // Each shown job's subtasks.
  for (const JobDetailSnapshot& shown : input.shownJobs) {
    auto job = shown.status;
    const std::string id = wire::idFromWire<JobId>(job.getJobId()).toHex();
    out << "<div class=\"job-detail\" id=\"job-" << id << "\"><h3><a href=\"/jobs/" << id
        << "\">" << id.substr(0, 8) << "</a> <span class=\"name\">" << text(job.getName())
        << "</span> <span class=\"state\">" << wire::enumNameUpper(job.getState()) << "</span></h3>";
    if (job.getSubtasksOmitted().size() > 0) {
      out << "<p>subtasks not shown: " << text(job.getSubtasksOmitted()) << "</p>";
    }
    for (auto vertex : job.getVertices()) {
      if (vertex.getSubtasks().size() > 0) subtaskTable(out, vertex, input.nowMs, input.redacted);
    }
    out << "</div>";
  }
  out << "</section>\n";
}

void eventsSection(std::ostringstream& out, const StatusPageInput& input) {
  out << "<section id=\"events\"><h2>Recent events</h2>";
  if (input.events.empty()) out << "<p>None since this master started.</p>";
  out << "<ol>";
  for (auto event = input.events.rbegin(); event != input.events.rend(); ++event) {
    out << "<li class=\"event\">" << renderEvent(*event, input.nowMs, input.redacted) << "</li>";
  }
  out << "</ol></section>\n";
}

// One series of the charts: its name and a value per sample.
struct Series {
  std::string name;
  std::vector<uint64_t> values;
};

constexpr int kChartWidth = 240;
constexpr int kChartHeight = 40;

// A line of `series` scaled to the chart (the bottom is 0, the top its largest value).
void chart(std::ostringstream& out, const Series& series, const std::string& span) {
  const uint64_t largest = *std::max_element(series.values.begin(), series.values.end());
  const uint64_t top = std::max<uint64_t>(1, largest);  // All zero: a line along the bottom.
  const size_t n = series.values.size();
  out << "<figure class=\"chart\"><figcaption>" << htmlEscaped(series.name) << ": <b>"
      << series.values.back() << "</b> <small>(largest " << largest << ", " << span
      << ")</small></figcaption><svg viewBox=\"0 0 " << kChartWidth << ' ' << kChartHeight
      << "\" width=\"" << kChartWidth << "\" height=\"" << kChartHeight << "\" role=\"img\" "
      << "aria-label=\"" << htmlEscaped(series.name) << "\"><polyline fill=\"none\" "
      << "stroke=\"#2a6fbb\" stroke-width=\"1.5\" points=\"";
  for (size_t i = 0; i < n; ++i) {
    // One sample alone is a short flat line across the chart's left end.
    const double x = n == 1 ? 0.0 : double(i) * kChartWidth / double(n - 1);
    const double y = kChartHeight - 1 - double(series.values[i]) * (kChartHeight - 2) /
                                            double(top);
    if (i > 0) out << ' ';
    out << static_cast<int>(x) << ',' << static_cast<int>(y);
    if (n == 1) out << ' ' << kChartWidth / 8 << ',' << static_cast<int>(y);
  }
  out << "\"/></svg></figure>";
}

void chartsSection(std::ostringstream& out, const StatusPageInput& input) {
  out << "<section id=\"charts\"><h2>Recent history</h2>";
  if (input.leadership.leadingEpoch == 0) {
    out << "<p>Shown by the leader.</p></section>\n";
    return;
  }
  out << renderCharts(input.history) << "</section>\n";
}

}  // namespace

std::string htmlEscaped(std::string_view raw) {
  const std::string valid = sanitizeUtf8(raw);
  std::string out;
  out.reserve(valid.size());
  for (char c : valid) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string renderCharts(const std::vector<ClusterSample>& history) {
  if (history.empty()) return "<p>No sample yet: the first is taken once the term serves.</p>";
  std::vector<Series> series;
  for (auto enumerant : capnp::Schema::from<wire::JobState>().getEnumerants()) {
    const auto state = static_cast<wire::JobState>(enumerant.getOrdinal());
    Series jobs{"jobs " + wire::enumNameUpper(state), {}};
    bool any = false;
    for (const ClusterSample& sample : history) {
      jobs.values.push_back(sample.jobs.of(state));
      any = any || jobs.values.back() > 0;
    }
    if (any || state == wire::JobState::RUNNING) series.push_back(std::move(jobs));
  }
  Series slots{"slots free", {}};
  Series restarted{"attempts restarted per sample", {}};
  Series adopted{"attempts adopted per sample", {}};
  for (size_t i = 0; i < history.size(); ++i) {
    slots.values.push_back(history[i].slotsFree);
    // Per sample: the counters only grow (they count across terms).
    restarted.values.push_back(
        i == 0 ? 0 : history[i].attemptsRestarted - history[i - 1].attemptsRestarted);
    adopted.values.push_back(i == 0 ? 0
                                    : history[i].attemptsAdopted - history[i - 1].attemptsAdopted);
  }
  slots.name += " of " + std::to_string(history.back().slotsTotal);
  series.push_back(std::move(slots));
  series.push_back(std::move(restarted));
  series.push_back(std::move(adopted));
  const std::string span =
      history.size() == 1
          ? std::string("1 sample")
          : std::to_string(history.size()) + " samples over " +
                htmlEscaped(formatDuration(Duration(history.back().wallMs - history.front().wallMs)));
  std::ostringstream out;
  out << "<div class=\"charts\">";
  for (const Series& one : series) chart(out, one, span);
  out << "</div>";
  return out.str();
}

std::string renderEvent(const Event& event, int64_t nowMs, bool redacted) {
  std::string out = "<span class=\"when\">" + ago(event.wallMs(), nowMs) +
                    "</span> <b>" + htmlEscaped(event.name()) + "</b>";
  for (const Event::Field& field : event.fields()) {
    out += ' ' + htmlEscaped(field.key) + '=';
    if (field.quoted && redacted) {
      out += "(left out)";
      continue;
    }
    const std::string value = std::visit(
        [](const auto& v) {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
            return v;
          } else {
            return std::to_string(v);
          }
        },
        field.value);
    out += field.quoted ? "&quot;" + htmlEscaped(value) + "&quot;" : htmlEscaped(value);
  }
  return out;
}

std::pair<uint32_t, uint32_t> shownRange(uint32_t jobs, uint32_t page, uint32_t pageSize) {
  const uint64_t first = std::min<uint64_t>(jobs, uint64_t{page} * pageSize);
  const uint64_t last = std::min<uint64_t>(jobs, first + pageSize);
  return {static_cast<uint32_t>(first), static_cast<uint32_t>(last)};
}

std::string renderStatusPage(const StatusPageInput& input) {
  std::ostringstream out;
  out << head("regent: " + htmlEscaped(input.leadership.self.host));
  out << "<main id=\"page\">";
  leadershipSection(out, input.leadership, input.nowMs);
  mastersSection(out, input);
  workersSection(out, input);
  chartsSection(out, input);
  jobsSection(out, input);
  eventsSection(out, input);
  out << "</main></body></html>\n";
  return out.str();
}

std::string renderJobPage(const LeadershipSnapshot& leadership, wire::JobStatus::Reader job,
                          int64_t nowMs, bool redacted) {
  std::ostringstream out;
  const std::string id = wire::idFromWire<JobId>(job.getJobId()).toHex();
  out << head("regent job " + id);
  out << "<main id=\"page\">";
  leadershipSection(out, leadership, nowMs);
  out << "<section id=\"job\"><h2>Job <span class=\"name\">" << text(job.getName())
      << "</span></h2><p><a href=\"/\">all jobs</a></p><dl><dt>id</dt><dd>" << id
      << "</dd><dt>state</dt><dd class=\"state\">" << wire::enumNameUpper(job.getState())
      << "</dd><dt>submitted</dt><dd>" << ago(job.getSubmittedAtMs(), nowMs)
      << "</dd><dt>restarts</dt><dd>" << job.getRestarts() << "</dd>";
  if (job.hasFailure() && !redacted) {
    out << "<dt>failure</dt><dd>" << text(job.getFailure().getMessage()) << "</dd>";
  }
  if (job.getWaitingReason().size() > 0) {
    out << "<dt>waiting</dt><dd>" << text(job.getWaitingReason()) << "</dd>";
  }
  if (job.getSubtasksOmitted().size() > 0) {
    out << "<dt>subtasks</dt><dd>not shown: " << text(job.getSubtasksOmitted()) << "</dd>";
  }
  out << "</dl>";
  for (auto vertex : job.getVertices()) subtaskTable(out, vertex, nowMs, redacted);
  out << "</section></main></body></html>\n";
  return out.str();
}

const char* statusPagePolicy() {
  return "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
         "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
}

const char* statusPageStylesheet() {
  return "body{font-family:sans-serif;margin:1em 2em;color:#222}"
         "table{border-collapse:collapse;margin:.5em 0}"
         "th,td{border-bottom:1px solid #ddd;padding:.2em .6em;text-align:left}"
         "dl{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}"
         "dt{color:#666}.problem{color:#a00}.state{font-weight:bold}"
         ".charts{display:flex;flex-wrap:wrap;gap:.5em 1.5em}figure.chart{margin:0}"
         "figure.chart svg{display:block;border-bottom:1px solid #ccc}"
         ".event .when{color:#666}\n";
}

const char* statusPageScript() {
  // Every 5 s the page fetches itself and swaps its <main> for the new one: the server renders
  // (and escapes) everything; the script never builds markup from data.
  return "'use strict';\n"
         "setInterval(async () => {\n"
         "  try {\n"
         "    const answer = await fetch(location.href, {cache: 'no-store'});\n"
         "    if (!answer.ok) return;\n"
         "    const next = new DOMParser().parseFromString(await answer.text(), 'text/html');\n"
         "    const main = next.getElementById('page');\n"
         "    if (main) document.getElementById('page').replaceWith(document.adoptNode(main));\n"
         "  } catch (e) { /* the next round tries again */ }\n"
         "}, 5000);\n";
}

}  // namespace regent::master
