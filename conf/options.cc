// The option registry and the parsing of option values (see options.h).
#include "conf/options.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <system_error>
#include <utility>

#include "common/host_port.h"
#include "common/units.h"
#include "conf/config.h"

namespace regent {
namespace {

// ---- Constraints -------------------------------------------------------------------------

bool isNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
}

// A hostname or IPv4 address (labels of [A-Za-z0-9_-] joined by '.'; '_' because container
// names use it), or "[ipv6]".
bool isValidHost(std::string_view host) {
  if (host.empty() || host.size() > 255) return false;
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return false;
    const std::string_view inner = host.substr(1, host.size() - 2);
    return std::all_of(inner.begin(), inner.end(), [](char c) {
      return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
    });
  }
  size_t labelLength = 0;
  for (const char c : host) {
    if (c == '.') {
      if (labelLength == 0) return false;
      labelLength = 0;
    } else if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') {
      ++labelLength;
    } else {
      return false;
    }
  }
  return labelLength > 0;
}

bool isValidHostPort(std::string_view text, bool allowPortZero) {
  auto parts = splitHostPort(text);
  if (!parts.ok() || (parts.value().port == 0 && !allowPortZero)) return false;
  // isValidHost wants an IPv6 literal in its brackets, as it was written.
  const std::string& host = parts.value().host;
  return isValidHost(text.front() == '[' ? "[" + host + "]" : host);
}

const std::string& asString(const OptionValue& value) { return std::get<std::string>(value); }

OptionConstraint clusterName() {
  return {"name ([A-Za-z0-9._-]+)",
          "a name of letters, digits, '.', '_' and '-' such as \"default\"",
          [](const OptionValue& value) {
            const std::string& name = asString(value);
            // "." and ".." are not valid ZooKeeper node names.
            return !name.empty() && name != "." && name != ".." &&
                   std::all_of(name.begin(), name.end(), isNameChar);
          }};
}

// worker.provider-id: "<provider>:<worker id>", both names, or empty.
OptionConstraint providerWorkerId() {
  return {"<provider>:<worker id> or empty",
          "\"<provider>:<worker id>\" of letters, digits, '.', '_' and '-' (such as "
          "\"process:w-3-1\"), or empty",
          [](const OptionValue& value) {
            const std::string& id = asString(value);
            if (id.empty()) return true;
            const size_t colon = id.find(':');
            if (colon == std::string::npos || colon == 0 || colon + 1 == id.size()) return false;
            return std::all_of(id.begin(), id.begin() + static_cast<std::ptrdiff_t>(colon),
                               isNameChar) &&
                   std::all_of(id.begin() + static_cast<std::ptrdiff_t>(colon) + 1, id.end(),
                               isNameChar);
          }};
}

OptionConstraint zooKeeperPath() {
  return {"ZooKeeper path",
          "a ZooKeeper path such as /regent (starting with \"/\", without a trailing \"/\" "
          "or empty, \".\" or \"..\" parts)",
          [](const OptionValue& value) {
            const std::string& path = asString(value);
            if (path.size() < 2 || path.front() != '/' || path.back() == '/') return false;
            size_t start = 1;
            while (start <= path.size()) {
              size_t end = path.find('/', start);
              if (end == std::string::npos) end = path.size();
              const std::string_view part(path.data() + start, end - start);
              if (part.empty() || part == "." || part == "..") return false;
              if (!std::all_of(part.begin(), part.end(), [](char c) {
                    return std::isprint(static_cast<unsigned char>(c)) && c != ' ';
                  })) {
                return false;
              }
              start = end + 1;
            }
            return true;
          }};
}

OptionConstraint hostPort(bool allowEmpty, bool allowPortZero) {
  return {allowEmpty ? "host:port or empty" : "host:port",
          std::string("a host:port such as ") + (allowPortZero ? "0.0.0.0:6123" : "10.0.0.5:6123") +
              (allowEmpty ? ", or empty" : ""),
          [=](const OptionValue& value) {
            const std::string& text = asString(value);
            return (allowEmpty && text.empty()) || isValidHostPort(text, allowPortZero);
          }};
}

// ha.zookeeper.suspend-tolerance: "auto" (a third of the negotiated session timeout), or a
// duration.
OptionConstraint autoOrDuration() {
  return {"auto or duration", "auto, or a duration such as 0, 500ms or 2s",
          [](const OptionValue& value) {
            const std::string& text = asString(value);
            return text == "auto" || parseDuration(text).ok();
          }};
}

OptionConstraint hostPortList() {
  return {"host:port list", "a comma-separated list of host:port such as zk1:2181,zk2:2181",
          [](const OptionValue& value) {
            const std::string& text = asString(value);
            size_t start = 0;
            while (true) {
              const size_t comma = text.find(',', start);
              const size_t end = comma == std::string::npos ? text.size() : comma;
              if (!isValidHostPort(std::string_view(text).substr(start, end - start), false)) {
                return false;
              }
              if (comma == std::string::npos) return true;
              start = comma + 1;
            }
          }};
}

OptionConstraint digestCredentialOrEmpty() {
  return {"user:password or empty", "user:password, or empty for no authentication",
          [](const OptionValue& value) {
            const std::string& text = asString(value);
            if (text.empty()) return true;
            const size_t colon = text.find(':');
            return colon != std::string::npos && colon > 0 && colon + 1 < text.size() &&
                   std::none_of(text.begin(), text.end(),
                                [](char c) { return std::iscntrl(static_cast<unsigned char>(c)); });
          }};
}

OptionConstraint positiveDuration() {
  return {"> 0", "a duration greater than 0, such as 500ms, 6s or 2m",
          [](const OptionValue& value) { return std::get<Duration>(value) > Duration::zero(); }};
}

OptionConstraint durationRange(Duration min, Duration max, std::string minText,
                               std::string maxText) {
  return {minText + ".." + maxText,
          "a duration from " + minText + " to " + maxText + ", such as 5s or 1m",
          [=](const OptionValue& value) {
            const Duration d = std::get<Duration>(value);
            return d >= min && d <= max;
          }};
}

OptionConstraint numberRange(double min, double max, std::string minText, std::string maxText) {
  return {minText + ".." + maxText,
          "a number from " + minText + " to " + maxText + ", such as 0.5 or 2",
          [=](const OptionValue& value) {
            const double n = std::get<double>(value);
            return n >= min && n <= max;
          }};
}

OptionConstraint sizeRange(uint64_t min, uint64_t max, std::string minText, std::string maxText) {
  return {minText + ".." + maxText, "a size from " + minText + " to " + maxText + ", such as 512KiB",
          [=](const OptionValue& value) {
            const uint64_t n = std::get<uint64_t>(value);
            return n >= min && n <= max;
          }};
}

// Whole seconds from 1 s to 10 min (rpc.output-token-ttl: tokens carry whole seconds).
OptionConstraint tokenLifetime() {
  return {"1s..10m", "whole seconds from 1s to 10m, such as 60s",
          [](const OptionValue& value) {
            const Duration lifetime = std::get<Duration>(value);
            return lifetime >= Duration(1000) && lifetime <= Duration(600000) &&
                   lifetime.count() % 1000 == 0;
          }};
}

OptionConstraint intRange(int64_t min, int64_t max) {
  return {std::to_string(min) + ".." + std::to_string(max),
          "a whole number from " + std::to_string(min) + " to " + std::to_string(max),
          [=](const OptionValue& value) {
            const int64_t n = std::get<int64_t>(value);
            return n >= min && n <= max;
          }};
}

// ---- One-line registry entries -----------------------------------------------------------

OptionSpec option(std::string key, OptionType type, std::string defaultText, std::string doc,
                  std::optional<OptionConstraint> constraint = std::nullopt) {
  OptionSpec spec;
  spec.key = std::move(key);
  spec.type = type;
  spec.defaultText = std::move(defaultText);
  spec.doc = std::move(doc);
  spec.constraint = std::move(constraint);
  return spec;
}

OptionSpec enumOption(std::string key, std::vector<std::string> choices, std::string defaultText,
                      std::string doc) {
  OptionSpec spec =
      option(std::move(key), OptionType::kEnum, std::move(defaultText), std::move(doc));
  spec.choices = std::move(choices);
  return spec;
}

OptionSpec secretOption(std::string key, std::string defaultText, std::string doc,
                        OptionConstraint constraint) {
  OptionSpec spec = option(std::move(key), OptionType::kString, std::move(defaultText),
                           std::move(doc), std::move(constraint));
  spec.secret = true;
  return spec;
}

constexpr auto kString = OptionType::kString;
constexpr auto kInt = OptionType::kInt;
constexpr auto kDouble = OptionType::kDouble;
constexpr auto kDuration = OptionType::kDuration;
constexpr auto kSize = OptionType::kSize;
constexpr auto kBool = OptionType::kBool;

std::vector<OptionSpec> buildRegistry() {
  return {
      option("cluster-id", kString, "default",
             "Name of this cluster; its ZooKeeper nodes live under ha.zookeeper.root/cluster-id.",
             clusterName()),
      enumOption("ha.mode", {"zookeeper", "standalone"}, "zookeeper",
                 "zookeeper: masters elect a leader through ZooKeeper; standalone: one master, "
                 "no ZooKeeper."),
      option("ha.zookeeper.quorum", kString, "127.0.0.1:2181",
             "ZooKeeper servers to connect to, as host:port pairs separated by commas.",
             hostPortList()),
      option("ha.zookeeper.root", kString, "/regent",
             "ZooKeeper path under which every regent cluster keeps its nodes.", zooKeeperPath()),
      option("ha.zookeeper.session-timeout", kDuration, "6s",
             "ZooKeeper session timeout the client asks for; the server may negotiate it.",
             positiveDuration()),
      option("ha.zookeeper.suspend-tolerance", kString, "auto",
             "How long a leader keeps leading while disconnected from ZooKeeper: auto is a third "
             "of the negotiated session timeout, the most that is safe (docs/leader-election.md); "
             "0 gives up leadership at once; a duration is at most a third of the session "
             "timeout.",
             autoOrDuration()),
      secretOption("ha.zookeeper.auth", "",
                   "Digest credential user:password for ZooKeeper ACLs; empty means no "
                   "authentication. A master that requires RPC authentication refuses to start "
                   "without it.",
                   digestCredentialOrEmpty()),
      secretOption("ha.zookeeper.read-auth", "",
                   "Digest credential user:password that may read, not change, the cluster's "
                   "nodes; masters grant it, regentctl and monitors log in with it.",
                   digestCredentialOrEmpty()),
      option("ha.zookeeper.connect-timeout", kDuration, "10s",
             "How long a process waits for its first ZooKeeper session before giving up "
             "(regentctl) or logging that ZooKeeper is unreachable (masters keep retrying).",
             positiveDuration()),
      option("ha.fast-failover", kBool, "true",
             "Whether the standby next in line replaces a leader whose process ended on a host "
             "that stays up (its RPC address refuses connections) without waiting for its "
             "ZooKeeper session to expire (docs/leader-election.md, Fast failover)."),
      option("ha.standalone.epoch-file", kString, "regent-epoch",
             "With ha.mode=standalone, the file that keeps the last epoch so it grows across "
             "restarts; relative paths start at the working directory."),
      enumOption("store.backend", {"auto", "zookeeper", "rocksdb"}, "auto",
                 "Where job graphs and results are kept; auto picks zookeeper with "
                 "ha.mode=zookeeper and rocksdb with ha.mode=standalone."),
      option("store.zookeeper.max-payload", kSize, "960KiB",
             "Largest record the zookeeper store writes (a job graph, result, detail, progress "
             "record or part), and largest transaction of several records, counting each one's "
             "path and 256 bytes of framing; larger ones are refused. Keep it under the servers' "
             "jute.maxbuffer (1MiB unless changed), which also has to hold a single record's "
             "path.",
             sizeRange(1024, 64 * 1024 * 1024, "1KiB", "64MiB")),
      option("store.rocksdb.path", kString, "regent-store",
             "Directory of the rocksdb store; relative paths start at the working directory."),
      option("store.rocksdb.max-payload", kSize, "64MiB",
             "Largest record the rocksdb store writes, and largest write batch of several "
             "records (counted as for zookeeper); larger ones are refused.",
             sizeRange(1024, 64 * 1024 * 1024, "1KiB", "64MiB")),
      option("store.rocksdb.lock-timeout", kDuration, "10s",
             "How long a master retries opening the rocksdb store while another process holds "
             "its lock before giving up.",
             positiveDuration()),
      option("store.job-details.max-size", kSize, "256KiB",
             "Largest detail of an ended job (its vertices, subtasks and attempts, kept with its "
             "result so that any later leader shows them) the store keeps; a larger one is kept "
             "without its subtask rows, saying so.",
             sizeRange(1024, 64 * 1024 * 1024, "1KiB", "64MiB")),
      option("store.job-results.retain", kInt, "1000",
             "How many clean job results (finished, failed, canceled jobs) are kept for listing; "
             "older ones are removed. Dirty results are always kept.",
             intRange(0, 10000000)),
      option("rpc.bind", kString, "0.0.0.0:6123",
             "Address the RPC server listens on; port 0 picks a free port.", hostPort(false, true)),
      option("rpc.advertised-address", kString, "",
             "RPC address published to other processes; empty derives it from rpc.bind and the "
             "host name.",
             hostPort(true, false)),
      option("rpc.max-message-size", kSize, "16MiB",
             "Largest Cap'n Proto message a process accepts or sends; a peer sending a larger "
             "one is disconnected, and a larger outgoing call fails without being sent.",
             sizeRange(1024, 1024ull * 1024 * 1024, "1KiB", "1GiB")),
      option("rpc.pre-auth-max-message-size", kSize, "64KiB",
             "Largest message an RPC connection may send before it has authenticated; a larger "
             "one is refused from its frame header and the connection dropped. Capped at "
             "rpc.max-message-size; applies only where authentication is required.",
             sizeRange(1024, 1024ull * 1024 * 1024, "1KiB", "1GiB")),
      option("rpc.auth-timeout", kDuration, "10s",
             "How long the RPC server keeps a connection open that has not authenticated; "
             "applies only where authentication is required.",
             positiveDuration()),
      option("rpc.max-connections", kInt, "1024",
             "RPC connections a master keeps open at once; one more is closed as soon as it is "
             "accepted. Lowered at start, with a log line, when it does not fit the process's "
             "open-file limit (RLIMIT_NOFILE, raised to its hard limit at start).",
             intRange(1, 1000000)),
      option("rpc.max-connections-per-peer", kInt, "64",
             "RPC connections a master keeps open at once from one IP address; one more is "
             "closed as soon as it is accepted. At most rpc.max-connections.",
             intRange(1, 1000000)),
      option("rpc.idle-timeout", kDuration, "5m",
             "Masters: an RPC connection over which no byte crossed, either way, for this long is "
             "closed, authenticated or not. A worker's connection carries heartbeats every "
             "heartbeat.interval. 0: never."),
      option("rpc.message-timeout", kDuration, "60s",
             "Masters: an RPC connection holding part of a message that has not arrived whole "
             "this long after its first bytes is closed, so that stalled messages cannot pin "
             "memory. 0: never."),
      option("rpc.listener-failure-handover", kDuration, "30s",
             "A leader (ha.mode=zookeeper) whose RPC listener has failed to accept connections "
             "(out of file descriptors or memory) for this long hands leadership over and "
             "contends again at the back of the queue. 0: never."),
      option("rpc.call-timeout", kDuration, "10s",
             "How long an outgoing RPC call may take before it fails as timed out.",
             positiveDuration()),
      option("rpc.output-token-ttl", kDuration, "60s",
             "How long a token the leader signs for reading one attempt's output (regentctl jobs "
             "logs) stays valid; workers holding a credential require one (docs/security.md).",
             tokenLifetime()),
      option("rpc.reconnect.initial", kDuration, "200ms",
             "Delay before the first attempt to re-establish a lost RPC connection; later "
             "attempts double it, with random jitter.",
             positiveDuration()),
      option("rpc.reconnect.max", kDuration, "10s",
             "Longest delay between attempts to re-establish a lost RPC connection; at least "
             "rpc.reconnect.initial.",
             positiveDuration()),
      option("rpc.tls.cert", kString, "",
             "PEM certificate (chain, leaf first) this process presents on RPC connections; "
             "with rpc.tls.key it turns TLS on for the master's RPC listener, and regentctl "
             "presents it as its client certificate. Empty: plain TCP. HTTP stays plain."),
      option("rpc.tls.key", kString, "",
             "PEM private key of rpc.tls.cert (unencrypted); set both or neither."),
      option("rpc.tls.ca", kString, "",
             "PEM certificate of the CA that peers' certificates must chain to (the only one "
             "trusted): regentctl uses TLS when set and checks the master's certificate names "
             "the host dialled; a master checks client certificates against it."),
      option("rpc.tls.verify-clients", kBool, "false",
             "Mutual TLS: the master's RPC listener refuses clients without a certificate "
             "chaining to rpc.tls.ca; needs rpc.tls.cert, rpc.tls.key and rpc.tls.ca."),
      enumOption("rpc.auth", {"auto", "none", "required"}, "auto",
                 "Whether RPC connections must authenticate (docs/security.md). auto: when any "
                 "rpc.auth-secret.* or rpc.auth-tls.* credential is set; required: always (a "
                 "credential must be set); none: never, every peer is admin (a master bound beyond "
                 "loopback refuses to start without authentication unless this says none)."),
      option("rpc.auth-secret.admin-file", kString, "",
             "File holding the admin role's shared secret (at least 16 bytes; one trailing "
             "newline is ignored; keep it mode 600). Empty: no admin secret."),
      option("rpc.auth-secret.reader-file", kString, "",
             "File holding the reader role's shared secret, as rpc.auth-secret.admin-file."),
      option("rpc.auth-secret.worker-file", kString, "",
             "File holding the worker role's shared secret, as rpc.auth-secret.admin-file."),
      option("rpc.auth-secret.allow-shared-files", kBool, "false",
             "Accept a secret file (rpc.auth-secret.*-file, rpc.credential.secret-file) that its "
             "group or others may access, with a warning; by default such a file is refused at "
             "start, naming it."),
      option("rpc.auth-tls.admin-names", kString, "",
             "Comma-separated common names of verified client certificates (mutual TLS, "
             "rpc.tls.verify-clients) that get the admin role without a secret."),
      option("rpc.auth-tls.reader-names", kString, "",
             "Comma-separated client certificate common names that get the reader role."),
      option("rpc.auth-tls.worker-names", kString, "",
             "Comma-separated client certificate common names that get the worker role."),
      option("rpc.auth-tls.worker-name-is-resource-id", kBool, "false",
             "Per-worker identities with mutual TLS: a worker may register only the resource id "
             "its client certificate's common name holds (32 hex digits); a registration over a "
             "connection without a verified certificate, or naming another resource id, is "
             "refused (docs/security.md, \"Worker identity\")."),
      option("rpc.credential.role", kString, "",
             "Clients (regentctl, workers): the role to authenticate as with the shared secret, "
             "admin, reader or worker; set with rpc.credential.secret-file. Empty: no secret "
             "credential."),
      option("rpc.credential.secret-file", kString, "",
             "Clients: the file holding rpc.credential.role's secret (never pass a secret on "
             "the command line)."),
      option("http.bind", kString, "0.0.0.0:8081",
             "Address the HTTP server (health, metrics, REST) listens on; port 0 picks a free "
             "port.",
             hostPort(false, true)),
      option("http.max-connections", kInt, "256",
             "HTTP connections a master (http.bind) or a worker (worker.http.bind) keeps open at "
             "once; one more is closed as soon as it is accepted. Lowered at start, with a log "
             "line, when it does not fit the process's open-file limit.",
             intRange(1, 1000000)),
      option("http.status-history-interval", kDuration, "5s",
             "How often the leader samples the numbers its status page charts (jobs by state, "
             "slots free, attempts restarted and adopted); the page keeps the last 120 samples "
             "(10 minutes at 5s).",
             durationRange(Duration(100), Duration(3600000), "100ms", "1h")),
      option("cli.master", kString, "",
             "regentctl: the rpc address of a master to talk to directly instead of finding the "
             "leader through ZooKeeper (needed with ha.mode=standalone); a master that does not "
             "lead names the leader, which regentctl then calls. Empty: use ZooKeeper.",
             hostPort(true, false)),
      option("heartbeat.interval", kDuration, "2s",
             "How often workers and masters exchange heartbeats. A master's heartbeat to a worker "
             "waits at most a quarter of it (at least 100ms, at most rpc.call-timeout) for the "
             "answer.",
             positiveDuration()),
      option("heartbeat.timeout", kDuration, "10s",
             "Silence after which a heartbeat peer is considered lost; must exceed "
             "heartbeat.interval.",
             positiveDuration()),
      option("jobmaster.reconciliation-timeout", kDuration, "30s",
             "After a failover, how long a JobMaster waits for workers to report running tasks "
             "before failing the unreported ones.",
             positiveDuration()),
      option("jobmaster.finished-put-delay", kDuration, "500ms",
             "How long a JobMaster waits before it stores a subtask's FINISHED state (and frees "
             "its slot), so that the subtasks ending meanwhile share that write, or need none "
             "when the job ends. Meanwhile the state lives in its worker's slot; 0 stores it at "
             "once and answers the worker only then (docs/jobgraph.md, \"Failover\").",
             durationRange(Duration(0), Duration(60000), "0", "1m")),
      option("jobmaster.first-deploy-wait", kDuration, "200ms",
             "How long a job's first deployment waits, once the job holds a slot, for the slots "
             "the rest of its runnable subtasks need, so that they are deployed together under "
             "one write of its progress record; then it deploys what it holds. 0 deploys each "
             "slot at once (docs/jobgraph.md, \"How a job runs and ends\").",
             durationRange(Duration(0), Duration(10000), "0", "10s")),
      option("jobmaster.max-subtasks", kInt, "10000",
             "Most subtasks (the sum of all vertices' parallelism) one job may have; a larger "
             "JobGraph is refused at submission naming its total and this option.",
             intRange(1, 10000000)),
      enumOption("resourcemanager.provider", {"standalone", "process", "docker"}, "standalone",
                 "Who starts workers for the slots jobs declare: standalone starts none (workers "
                 "are started by hand), process starts regent-worker processes on the leader's "
                 "host, docker starts them as containers through the Docker Engine API "
                 "(docs/workers.md, \"Workers started on demand\")."),
      option("resourcemanager.workers.max", kInt, "10",
             "Most workers the provider keeps started at once (requested, pending registration, "
             "registered and releasing together); a job that needs more runs with what the cap "
             "gives.",
             intRange(0, 100000)),
      option("resourcemanager.workers.min", kInt, "0",
             "Workers the provider keeps started even when idle; at most "
             "resourcemanager.workers.max.",
             intRange(0, 100000)),
      option("resourcemanager.workers.start-timeout", kDuration, "2m",
             "A started worker that has not registered within this is released and counted as "
             "a failed start.",
             positiveDuration()),
      option("resourcemanager.workers.idle-timeout", kDuration, "30s",
             "A started worker with no allocated slot for this long is released (asked to stop "
             "over its own connection, then reaped by the provider).",
             positiveDuration()),
      option("resourcemanager.workers.max-failure-rate", kDouble, "10",
             "Failed worker starts per minute above which the leader stops starting workers "
             "until the rate falls below again (failed starts are retried with backoff until "
             "then).",
             numberRange(0.001, 1000000.0, "0.001", "1000000")),
      option("resourcemanager.process.data-root", kString, "regent-workers",
             "process provider: directory under which each started worker gets its data "
             "directory, configuration and log (one per worker id). Relative paths start at the "
             "master's working directory."),
      option("resourcemanager.process.worker-binary", kString, "",
             "process provider: the regent-worker executable to start; empty: the one beside "
             "the running regent-master."),
      option("resourcemanager.docker.socket", kString, "/var/run/docker.sock",
             "docker provider: the Docker daemon's unix socket. Whoever can use it controls the "
             "daemon's host (docs/security.md, \"Workers the masters start\")."),
      option("resourcemanager.docker.image", kString, "",
             "docker provider: the image each worker container runs; it must hold "
             "regent-worker (the image of docker/Dockerfile does). Required with "
             "resourcemanager.provider docker."),
      option("resourcemanager.docker.network", kString, "bridge",
             "docker provider: the Docker network worker containers join; it must reach "
             "ZooKeeper and the masters (on a user-defined network a worker is known by its "
             "container name, regent-<cluster-id>-<worker id>)."),
      option("resourcemanager.docker.worker-binary", kString, "regent-worker",
             "docker provider: the regent-worker executable inside the image (a name is looked "
             "up on the image's PATH)."),
      option("worker.slots", kInt, "4", "Number of task slots a worker offers.", intRange(1, 1024)),
      // Slots carry thousandths of a core as a 32-bit number (wire SlotProfile.cpuMillis).
      option("worker.slot-cpu", kDouble, "1.0", "CPU cores each slot offers, to thousandths.",
             numberRange(0.001, 4294967.0, "0.001", "4294967")),
      option("worker.slot-memory", kSize, "1GiB", "Memory each slot offers.",
             sizeRange(1024 * 1024, uint64_t{1} << 50, "1MiB", "1PiB")),
      option("worker.data-dir", kString, "regent-worker",
             "Directory where a worker keeps its resource id (so a restarted worker is "
             "recognised) and its lock; one live worker per directory. Relative paths start at "
             "the working directory."),
      option("worker.provider-id", kString, "",
             "Set by a resource provider on a worker it starts (\"<provider>:<worker id>\"), "
             "so that every leader counts the worker as that provider's and may release it when "
             "idle; leave it empty for a worker started by hand.",
             providerWorkerId()),
      option("worker.advertised-host", kString, "",
             "Host name a worker gives the leader in its registration (regentctl workers); "
             "empty: the local host name.",
             OptionConstraint{"host or empty",
                              "a host name or address such as worker-1 or 10.0.0.7, or empty",
                              [](const OptionValue& value) {
                                const std::string& host = asString(value);
                                return host.empty() || isValidHost(host);
                              }}),
      option("worker.http.bind", kString, "0.0.0.0:8082",
             "Address a worker's HTTP server (health, readiness, metrics, and the stdout and "
             "stderr of its tasks at /v1/attempts/<id>/stdout|stderr, unauthenticated: bind it "
             "to a private network) listens on; port 0 picks a free port.",
             hostPort(false, true)),
      option("worker.task-user", kString, "nobody",
             "Workers running as root: the unprivileged user tasks run as (its uid, primary gid, "
             "no supplementary groups). Ignored, with a log line, when the worker is not root: "
             "tasks then run as the worker's own user."),
      option("worker.task-allow-root", kBool, "false",
             "Workers running as root: allow worker.task-user to name root (uid 0). Off, a worker "
             "whose task user is root refuses to start."),
      option("worker.task-path", kString, "/usr/local/bin:/usr/bin:/bin",
             "The PATH tasks get, and look their command up in, unless the job's env sets one; "
             "nothing else of the worker's own environment reaches a task.",
             OptionConstraint{"colon-separated absolute directories",
                              "absolute directories separated by ':' such as /usr/bin:/bin",
                              [](const OptionValue& value) {
                                const std::string& path = asString(value);
                                if (path.empty()) return false;
                                size_t start = 0;
                                while (start <= path.size()) {
                                  const size_t end = std::min(path.find(':', start), path.size());
                                  if (end == start || path[start] != '/') return false;
                                  start = end + 1;
                                }
                                return true;
                              }}),
      option("worker.attempt-output.max", kSize, "64MiB",
             "The most of each of an attempt's output streams (stdout, stderr) a worker keeps; "
             "beyond it the output is dropped, and the attempt's status and jobs logs say so.",
             sizeRange(4096, uint64_t{1} << 40, "4KiB", "1TiB")),
      option("worker.task-cancel-timeout", kDuration, "5s",
             "How long a cancelled task's process group gets between SIGTERM and SIGKILL.",
             positiveDuration()),
      enumOption("worker.containment", {"auto", "cgroup", "subreaper"}, "auto",
                 "How a worker contains each task attempt (docs/security.md, \"Containment "
                 "modes\"): cgroup (a cgroup per attempt under the worker's subtree, limited to "
                 "the slot's profile and killed as a whole; the worker refuses to start without "
                 "one), subreaper (the shim kills every descendant, in its process group or not), "
                 "or auto (cgroup when one can be made, else subreaper)."),
      option("worker.task-pids-max", kInt, "4096",
             "The most processes and threads one task attempt may have at once (its cgroup's "
             "pids.max); 0 = no limit. Not enforced in subreaper containment.",
             intRange(0, 4194304)),
      option("worker.attempts.retain", kInt, "100",
             "Number of ended attempts whose directories (output files, default working "
             "directory) a worker keeps under worker.data-dir; older ones are removed.",
             intRange(0, 1000000)),
      option("worker.update-buffer.max", kInt, "10000",
             "Number of attempt state changes a worker keeps while it cannot deliver them to "
             "their JobMaster (no leader, or a new leader whose JobMaster it has not reached "
             "yet); over it the oldest are dropped with a warning, and the JobMaster fails "
             "their attempts (after a failover at jobmaster.reconciliation-timeout, otherwise "
             "once the worker's heartbeats stop listing them).",
             intRange(1, 10000000)),
      option("cluster.registration.initial-timeout", kDuration, "100ms",
             "Workers: the first wait before registering with the leader again after a failed "
             "attempt; later waits double, with jitter, up to "
             "cluster.registration.max-timeout.",
             positiveDuration()),
      option("cluster.registration.max-timeout", kDuration, "30s",
             "Workers: the longest wait between two registration attempts.", positiveDuration()),
      option("events.file", kString, "",
             "Masters and workers: a file the process appends each of its events to, one JSON "
             "object per line (docs/operations.md, \"Events\"), for tests and tools to read "
             "instead of the log; the log lines are written either way. A regular file (not a "
             "symbolic link, FIFO or device), created with mode 0640, appended to and never "
             "rotated. Empty: no file. Relative paths start at the working directory."),
      enumOption("log.level", {"trace", "debug", "info", "warn", "error", "off"}, "info",
                 "Lowest level of the log lines written."),
      enumOption("log.format", {"text", "json"}, "text",
                 "text: one human-readable line per event; json: one JSON object per line."),
  };
}

// Which programs read an option (OptionSpec::readBy), found by following the code that reads
// each key: by key, or by the group a key starts with ("store."); the first entry that matches
// wins, and an option no entry matches is read by every program. A worker or regentctl in
// standalone mode also finds the master from rpc.bind, rpc.advertised-address and http.bind
// in the master's configuration (docs/workers.md): a file they share, never their command line.
constexpr Programs kMasterOnly = Programs(Program::kMaster);
constexpr Programs kWorkerOnly = Programs(Program::kWorker);
constexpr Programs kRegentctlOnly = Programs(Program::kRegentctl);
constexpr Programs kHttpServers = Program::kMaster | Program::kWorker;
constexpr Programs kLeaderClients = Program::kWorker | Program::kRegentctl;

const std::vector<std::pair<std::string_view, Programs>>& optionReaders() {
  static const std::vector<std::pair<std::string_view, Programs>> readers = {
      {"ha.zookeeper.suspend-tolerance", kMasterOnly},  // The election.
      {"ha.fast-failover", kMasterOnly},
      {"store.", kMasterOnly},
      {"rpc.bind", kMasterOnly},  // The RPC listener and what it accepts.
      {"rpc.advertised-address", kMasterOnly},
      {"rpc.pre-auth-max-message-size", kMasterOnly},
      {"rpc.auth-timeout", kMasterOnly},
      {"rpc.max-connections", kMasterOnly},
      {"rpc.max-connections-per-peer", kMasterOnly},
      {"rpc.idle-timeout", kMasterOnly},
      {"rpc.message-timeout", kMasterOnly},
      {"rpc.listener-failure-handover", kMasterOnly},
      {"rpc.output-token-ttl", kMasterOnly},
      {"rpc.tls.verify-clients", kMasterOnly},
      {"rpc.auth", kMasterOnly},
      {"rpc.auth-secret.admin-file", kMasterOnly},
      {"rpc.auth-secret.reader-file", kMasterOnly},
      {"rpc.auth-secret.worker-file", kMasterOnly},
      {"rpc.auth-tls.", kMasterOnly},
      {"rpc.reconnect.", kLeaderClients},  // Clients of the leader's RPC.
      {"rpc.credential.", kLeaderClients},
      {"http.bind", kMasterOnly},
      {"http.max-connections", kHttpServers},
      {"http.status-history-interval", kMasterOnly},
      {"cli.", kRegentctlOnly},
      {"heartbeat.", kMasterOnly},  // The ResourceManager and JobMasters send them.
      {"jobmaster.", kMasterOnly},
      {"resourcemanager.", kMasterOnly},
      // The slots of the workers the master's resource provider starts (resourcemanager.provider).
      {"worker.slots", Program::kMaster | Program::kWorker},
      {"worker.slot-cpu", Program::kMaster | Program::kWorker},
      {"worker.slot-memory", Program::kMaster | Program::kWorker},
      {"worker.", kWorkerOnly},
      {"cluster.registration.", kWorkerOnly},
      {"events.file", Program::kMaster | Program::kWorker},  // Their ProcessMain.
  };
  return readers;
}

std::vector<OptionSpec> buildRegistryWithReaders() {
  std::vector<OptionSpec> options = buildRegistry();
  for (OptionSpec& spec : options) {
    for (const auto& [key, programs] : optionReaders()) {
      if (key.ends_with('.') ? spec.key.starts_with(key) : spec.key == key) {
        spec.readBy = programs;
        break;
      }
    }
  }
  return options;
}

std::vector<OptionRule> buildRules() {
  return {
      {{"ha.zookeeper.suspend-tolerance", "ha.zookeeper.session-timeout"},
       "ha.zookeeper.suspend-tolerance must be at most a third of ha.zookeeper.session-timeout",
       [](const Config& config) {
         const std::string& tolerance = config.getString("ha.zookeeper.suspend-tolerance");
         if (tolerance == "auto") return true;
         // Divides rather than multiplies: a huge tolerance must not overflow.
         return parseDuration(tolerance).value() <=
                config.getDuration("ha.zookeeper.session-timeout") / 3;
       }},
      {{"heartbeat.timeout", "heartbeat.interval"},
       "heartbeat.timeout must exceed heartbeat.interval",
       [](const Config& config) {
         return config.getDuration("heartbeat.timeout") > config.getDuration("heartbeat.interval");
       }},
      // A worker's registration carries its total (slots x slot) in thousandths of a core as 32
      // bits, like each slot.
      {{"worker.slots", "worker.slot-cpu"},
       "worker.slots x worker.slot-cpu must be at most 4294967 cores, what a worker's total "
       "carries",
       [](const Config& config) {
         const double millis = std::round(config.getDouble("worker.slot-cpu") * 1000.0);
         return millis * double(config.getInt("worker.slots")) <= 4294967295.0;
       }},
      {{"cluster.registration.max-timeout", "cluster.registration.initial-timeout"},
       "cluster.registration.max-timeout must be at least cluster.registration.initial-timeout",
       [](const Config& config) {
         return config.getDuration("cluster.registration.max-timeout") >=
                config.getDuration("cluster.registration.initial-timeout");
       }},
      {{"rpc.reconnect.max", "rpc.reconnect.initial"},
       "rpc.reconnect.max must be at least rpc.reconnect.initial",
       [](const Config& config) {
         return config.getDuration("rpc.reconnect.max") >=
                config.getDuration("rpc.reconnect.initial");
       }},
      {{"rpc.max-connections-per-peer", "rpc.max-connections"},
       "rpc.max-connections-per-peer must be at most rpc.max-connections",
       [](const Config& config) {
         return config.getInt("rpc.max-connections-per-peer") <=
                config.getInt("rpc.max-connections");
       }},
      {{"rpc.idle-timeout", "heartbeat.interval"},
       "rpc.idle-timeout must be 0 or longer than heartbeat.interval (a worker's connection is "
       "quiet between heartbeats)",
       [](const Config& config) {
         const Duration idle = config.getDuration("rpc.idle-timeout");
         return idle == Duration::zero() || idle > config.getDuration("heartbeat.interval");
       }},
      {{"rpc.tls.cert", "rpc.tls.key"},
       "rpc.tls.cert and rpc.tls.key must be set together",
       [](const Config& config) {
         return config.getString("rpc.tls.cert").empty() == config.getString("rpc.tls.key").empty();
       }},
      {{"rpc.tls.verify-clients", "rpc.tls.ca"},
       "rpc.tls.verify-clients needs rpc.tls.ca (the CA client certificates must chain to)",
       [](const Config& config) {
         return !config.getBool("rpc.tls.verify-clients") ||
                !config.getString("rpc.tls.ca").empty();
       }},
      {{"resourcemanager.workers.min", "resourcemanager.workers.max"},
       "resourcemanager.workers.min must be at most resourcemanager.workers.max",
       [](const Config& config) {
         return config.getInt("resourcemanager.workers.min") <=
                config.getInt("resourcemanager.workers.max");
       }},
      {{"resourcemanager.provider", "rpc.auth-tls.worker-name-is-resource-id"},
       "resourcemanager.provider process or docker cannot start workers that each need a client "
       "certificate named by their resource id (rpc.auth-tls.worker-name-is-resource-id)",
       [](const Config& config) {
         return config.getString("resourcemanager.provider") == "standalone" ||
                !config.getBool("rpc.auth-tls.worker-name-is-resource-id");
       }},
      {{"resourcemanager.provider", "resourcemanager.docker.image"},
       "resourcemanager.provider docker needs resourcemanager.docker.image, the image its "
       "worker containers run",
       [](const Config& config) {
         return config.getString("resourcemanager.provider") != "docker" ||
                !config.getString("resourcemanager.docker.image").empty();
       }},
      {{"store.backend", "ha.mode"},
       "store.backend zookeeper needs ha.mode zookeeper (standalone mode has no ZooKeeper)",
       [](const Config& config) {
         return config.getString("store.backend") != "zookeeper" ||
                config.getString("ha.mode") == "zookeeper";
       }},
  };
}

std::string_view trim(std::string_view text) {
  constexpr std::string_view kSpace = " \t\r\n";
  const auto first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(kSpace) - first + 1);
}

std::string joinChoices(const std::vector<std::string>& choices, std::string_view separator) {
  std::string joined;
  for (const std::string& choice : choices) {
    if (!joined.empty()) joined += separator;
    joined += choice;
  }
  return joined;
}

Result<OptionValue> parseByType(const OptionSpec& spec, std::string_view text) {
  switch (spec.type) {
    case OptionType::kString:
      return OptionValue(std::string(text));
    case OptionType::kEnum:
      if (std::find(spec.choices.begin(), spec.choices.end(), text) == spec.choices.end()) {
        return Error::fatal("expected one of " + joinChoices(spec.choices, ", "));
      }
      return OptionValue(std::string(text));
    case OptionType::kInt: {
      int64_t number = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
      if (ec == std::errc::result_out_of_range) {
        return Error::fatal("expected a whole number (the number is too large)");
      }
      if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
        return Error::fatal("expected a whole number");
      }
      return OptionValue(number);
    }
    case OptionType::kDouble: {
      double number = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), number);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
          !std::isfinite(number)) {
        return Error::fatal("expected a number such as 0.5 or 2");
      }
      return OptionValue(number);
    }
    case OptionType::kBool:
      if (text == "true") return OptionValue(true);
      if (text == "false") return OptionValue(false);
      return Error::fatal("expected true or false");
    case OptionType::kDuration: {
      auto duration = parseDuration(text);
      if (!duration) return duration.error();
      return OptionValue(duration.value());
    }
    case OptionType::kSize: {
      auto size = parseSize(text);
      if (!size) return size.error();
      return OptionValue(size.value());
    }
  }
  return Error::fatal("expected a value of a known type");  // unreachable
}

}  // namespace

std::string_view programRole(Program program) {
  switch (program) {
    case Program::kMaster:
      return "master";
    case Program::kWorker:
      return "worker";
    case Program::kRegentctl:
      return "regentctl";
  }
  return "?";  // unreachable
}

std::string describePrograms(Programs readBy) {
  std::string names;
  for (const Program program : {Program::kMaster, Program::kWorker, Program::kRegentctl}) {
    if (!readsOption(readBy, program)) continue;
    if (!names.empty()) names += ", ";
    names += programRole(program);
  }
  return names;
}

const std::vector<OptionSpec>& allOptions() {
  static const std::vector<OptionSpec> options = buildRegistryWithReaders();
  return options;
}

const std::vector<OptionRule>& allOptionRules() {
  static const std::vector<OptionRule> rules = buildRules();
  return rules;
}

const OptionSpec* findOption(std::string_view key) {
  for (const OptionSpec& spec : allOptions()) {
    if (spec.key == key) return &spec;
  }
  return nullptr;
}

std::string environmentVariableFor(std::string_view key) {
  std::string name = "REGENT_";
  for (const char c : key) {
    name += (c == '.' || c == '-') ? '_'
                                   : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

Result<OptionValue> parseOptionValue(const OptionSpec& spec, std::string_view text) {
  auto value = parseByType(spec, trim(text));
  if (!value) return value;
  if (spec.constraint && !spec.constraint->holds(value.value())) {
    return Error::fatal("expected " + spec.constraint->expected);
  }
  return value;
}

std::string formatOptionValue(const OptionSpec& spec, const OptionValue& value) {
  switch (spec.type) {
    case OptionType::kString:
    case OptionType::kEnum:
      return std::get<std::string>(value);
    case OptionType::kInt:
      return std::to_string(std::get<int64_t>(value));
    case OptionType::kDouble: {
      char buffer[64];
      const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, std::get<double>(value));
      std::string text(buffer, ec == std::errc() ? end : buffer);
      if (text.find_first_of(".e") == std::string::npos) text += ".0";
      return text;
    }
    case OptionType::kBool:
      return std::get<bool>(value) ? "true" : "false";
    case OptionType::kDuration:
      return formatDuration(std::get<Duration>(value));
    case OptionType::kSize:
      return formatSize(std::get<uint64_t>(value));
  }
  return {};  // unreachable
}

std::string describeOptionType(const OptionSpec& spec) {
  // A constrained string is described by its constraint alone: "host:port", not "string, ...".
  if (spec.type == OptionType::kString && spec.constraint) {
    return spec.constraint->summary + (spec.secret ? ", secret" : "");
  }
  std::string type;
  switch (spec.type) {
    case OptionType::kString:
      type = "string";
      break;
    case OptionType::kEnum:
      type = "one of " + joinChoices(spec.choices, ", ");
      break;
    case OptionType::kInt:
      type = "integer";
      break;
    case OptionType::kDouble:
      type = "number";
      break;
    case OptionType::kBool:
      type = "boolean";
      break;
    case OptionType::kDuration:
      type = "duration";
      break;
    case OptionType::kSize:
      type = "size";
      break;
  }
  if (spec.constraint) type += ", " + spec.constraint->summary;
  if (spec.secret) type += ", secret";
  return type;
}

}  // namespace regent
