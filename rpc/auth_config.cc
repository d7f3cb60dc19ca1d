// Authentication settings from the configuration (see auth_config.h). Secret files are read at
// start-up, before the loop serves anything.
#include "rpc/auth_config.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/host_port.h"
#include "conf/config.h"
#include "rpc/auth_proof.h"
#include "rpc/auth_roles.h"

namespace regent::rpc {
namespace {

constexpr wire::Role kRoles[] = {wire::Role::ADMIN, wire::Role::READER, wire::Role::WORKER};

// The secret in `path`, named by `option` in errors: its bytes with one trailing newline (LF or
// CRLF) dropped, so that `echo secret > file` works. Never logs or returns the contents in an
// error.
// `allowShared`: rpc.auth-secret.allow-shared-files, which lets a secret readable by its group or
// others through with a warning; refused otherwise.
Result<std::string> readSecretFile(const std::string& option, const std::string& path,
                                   bool allowShared) {
  const std::string what = option + " (" + path + ")";
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return Error::fatal("cannot read " + what + ": " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fileno(file), &info) != 0 || !S_ISREG(info.st_mode)) {
    std::fclose(file);
    return Error::fatal("cannot read " + what + ": not a regular file");
  }
  std::string secret;
  char buffer[4096];
  size_t count = 0;
  while ((count = std::fread(buffer, 1, sizeof buffer, file)) > 0 && secret.size() <= 65536) {
    secret.append(buffer, count);
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return Error::fatal("cannot read " + what);
  if (secret.size() > 65536) return Error::fatal(what + " is larger than 64KiB: not a secret");
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if (secret.empty()) return Error::fatal(what + " is empty");
  if (secret.size() < kMinAuthSecretSize) {
    return Error::fatal(what + " holds " + std::to_string(secret.size()) +
                        " bytes; a secret needs at least " + std::to_string(kMinAuthSecretSize));
  }
  if ((info.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%o", static_cast<unsigned>(info.st_mode & 0777));
    if (!allowShared) {
      return Error::fatal(what + " is accessible by its group or others (mode " + mode +
                          "): chmod 600 it, or set rpc.auth-secret.allow-shared-files: true to "
                          "accept it");
    }
    spdlog::warn("{} is accessible by its group or others (mode {}); accepted because "
                 "rpc.auth-secret.allow-shared-files is true; chmod 600 it", what, mode);
  }
  return secret;
}

// The comma-separated names of `option`, trimmed, empty ones dropped.
std::vector<std::string> namesIn(const std::string& text) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string name = text.substr(start, end - start);
    const size_t first = name.find_first_not_of(" \t");
    const size_t last = name.find_last_not_of(" \t");
    if (first != std::string::npos) names.push_back(name.substr(first, last - first + 1));
    start = end + 1;
  }
  return names;
}

}  // namespace

std::optional<wire::Role> ServerAuthSettings::roleForCommonName(const std::string& commonName) const {
  if (commonName.empty()) return std::nullopt;
  auto found = tlsNames.find(commonName);
  if (found == tlsNames.end()) return std::nullopt;
  return found->second;
}

Result<ServerAuthSettings> serverAuthFrom(const Config& config) {
  ServerAuthSettings settings;
  for (wire::Role role : kRoles) {
    const std::string option = std::string("rpc.auth-secret.") + roleName(role) + "-file";
    const std::string& path = config.getString(option);
    if (path.empty()) continue;
    auto secret =
        readSecretFile(option, path, config.getBool("rpc.auth-secret.allow-shared-files"));
    if (!secret.ok()) return secret.error();
    settings.secrets.emplace(role, std::move(secret).value());
  }
  for (wire::Role role : kRoles) {
    const std::string option = std::string("rpc.auth-tls.") + roleName(role) + "-names";
    for (const std::string& name : namesIn(config.getString(option))) {
      auto [at, added] = settings.tlsNames.emplace(name, role);
      if (!added && at->second != role) {
        return Error::fatal("the certificate name \"" + name + "\" is mapped to two roles, " +
                            roleName(at->second) + " and " + roleName(role) + " (rpc.auth-tls.*)");
      }
    }
  }
  const std::string& mode = config.getString("rpc.auth");
  settings.explicitlyOff = mode == "none";
  if (mode == "required" && !settings.anyCredential()) {
    return Error::fatal(
        "rpc.auth is required but no credential is configured: set rpc.auth-secret.admin-file "
        "(or reader-, worker-) or rpc.auth-tls.admin-names (or reader-, worker-)");
  }
  settings.required = mode == "required" || (mode == "auto" && settings.anyCredential());
  return settings;
}

Result<std::optional<ClientCredential>> clientCredentialFrom(const Config& config) {
  const std::string& roleText = config.getString("rpc.credential.role");
  const std::string& path = config.getString("rpc.credential.secret-file");
  if (roleText.empty() && path.empty()) return std::optional<ClientCredential>();
  if (roleText.empty() || path.empty()) {
    return Error::fatal(
        "rpc.credential.role and rpc.credential.secret-file must be set together (the role "
        "to authenticate as, and the file holding that role's secret)");
  }
  auto role = roleNamed(roleText);
  if (!role) {
    return Error::fatal("bad value for rpc.credential.role: expected one of admin, reader, "
                        "worker, got \"" + roleText + "\"");
  }
  auto secret = readSecretFile("rpc.credential.secret-file", path,
                               config.getBool("rpc.auth-secret.allow-shared-files"));
  if (!secret.ok()) return secret.error();
  return std::optional<ClientCredential>(ClientCredential{*role, std::move(secret).value()});
}

Status checkElectionDataIsProtected(const Config& config, const ServerAuthSettings& settings) {
  if (!settings.required || config.getString("ha.mode") != "zookeeper") return Status();
  if (!config.getString("ha.zookeeper.auth").empty()) return Status();
  return Error::fatal(
      "RPC authentication is on but the cluster's ZooKeeper nodes are not protected: set "
      "ha.zookeeper.auth (user:password, the masters' credential: the nodes get an ACL only they "
      "may write) and ha.zookeeper.read-auth (the credential workers and regentctl read with); "
      "without them anyone who reaches ZooKeeper can rewrite the leader node and the stores "
      "(docs/security.md, \"Chain of trust\")");
}

std::optional<std::string> unprotectedLeaderNodeWarning(const Config& config,
                                                        bool readsLeaderNode) {
  const bool holdsCredential = !config.getString("rpc.credential.role").empty() ||
                               !config.getString("rpc.tls.cert").empty();
  if (!holdsCredential || config.getString("ha.mode") != "zookeeper") return std::nullopt;
  if (!readsLeaderNode) return std::nullopt;
  if (!config.getString("ha.zookeeper.read-auth").empty() ||
      !config.getString("ha.zookeeper.auth").empty()) {
    return std::nullopt;
  }
  return std::string(
      "this process holds an RPC credential but no ZooKeeper credential: a cluster with RPC "
      "authentication protects its ZooKeeper nodes with an ACL, and reading its leader will fail "
      "with ZNOAUTH; set ha.zookeeper.read-auth to the masters' read credential. Masters that do "
      "not prove themselves are refused whatever the leader node says (docs/security.md, "
      "\"Chain of trust\")");
}

bool isLoopbackHost(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1") return true;
  // 127.0.0.0/8 as a dotted quad: "127." followed by three decimal octets.
  if (!host.starts_with("127.")) return false;
  int dots = 0;
  size_t digits = 0;
  for (char c : host.substr(4)) {
    if (c == '.') {
      if (digits == 0) return false;
      ++dots;
      digits = 0;
    } else if (c >= '0' && c <= '9' && digits < 3) {
      ++digits;
    } else {
      return false;
    }
  }
  return dots == 2 && digits > 0;
}

Status checkRpcBindIsSafe(const std::string& bindAddress, const ServerAuthSettings& settings) {
  if (settings.required || settings.explicitlyOff) return Status();
  const std::string host = hostOf(bindAddress);
  if (isLoopbackHost(host)) return Status();
  return Error::fatal(
      "rpc.bind " + bindAddress + " is reachable beyond this machine but no RPC authentication is "
      "configured: set rpc.auth-secret.admin-file (and reader-, worker-) or rpc.auth-tls.*-names "
      "with rpc.tls.verify-clients, bind rpc.bind to a loopback address (127.0.0.1), or write "
      "rpc.auth: none to serve every peer that reaches the port as admin (docs/security.md)");
}

}  // namespace regent::rpc
