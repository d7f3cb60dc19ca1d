// The cluster ACL's judgement and the walk a master makes at start over the cluster's nodes.
#include "ha/zookeeper_acl.h"

#include <openssl/evp.h>

#include <utility>

#include "ha/zookeeper_client.h"

namespace regent::ha {

std::string digestId(const std::string& credential) {
  unsigned char sha[EVP_MAX_MD_SIZE];
  unsigned int shaLength = 0;
  EVP_Digest(credential.data(), credential.size(), sha, &shaLength, EVP_sha1(), nullptr);
  std::string encoded(4 * ((shaLength + 2) / 3) + 1, '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(encoded.data()), sha,
                                      static_cast<int>(shaLength));
  encoded.resize(static_cast<size_t>(written));
  return credential.substr(0, credential.find(':')) + ":" + encoded;
}

namespace {

// ZooKeeper's CLI letters, in its order.
std::string permLetters(int32_t perms) {
  std::string letters;
  if (perms & kPermCreate) letters += 'c';
  if (perms & kPermDelete) letters += 'd';
  if (perms & kPermRead) letters += 'r';
  if (perms & kPermWrite) letters += 'w';
  if (perms & kPermAdmin) letters += 'a';
  return letters;
}

std::string userOf(const std::string& credential) {
  return credential.substr(0, credential.find(':'));
}

// "digest:user" for a digest id, scheme:id otherwise.
std::string identityOf(const AclEntry& entry) {
  if (entry.scheme == "digest") return "digest:" + userOf(entry.id);
  return entry.scheme + ":" + entry.id;
}

}  // namespace

std::string describeAcl(const std::vector<AclEntry>& acl) {
  if (acl.empty()) return "(empty)";
  std::string text;
  for (const AclEntry& entry : acl) {
    if (!text.empty()) text += ',';
    text += identityOf(entry) + ":" + permLetters(entry.perms);
  }
  return text;
}

std::optional<std::string> clusterAclProblem(const std::vector<AclEntry>& acl,
                                             const std::string& auth) {
  const std::string writer = digestId(auth);
  int32_t writerPerms = 0;
  for (const AclEntry& entry : acl) {
    if (entry.scheme == "digest" && entry.id == writer) {
      writerPerms |= entry.perms;
      continue;
    }
    if (entry.scheme == "world" && entry.perms != 0) {
      return "world:anyone (every client) may " + permLetters(entry.perms) +
             (entry.perms == kPermRead ? " (read: the job graphs carry their jobs' environment)"
                                       : "");
    }
    if ((entry.perms & ~kPermRead) != 0) {
      return identityOf(entry) + ", not the masters' identity digest:" + userOf(auth) +
             ", may " + permLetters(entry.perms);
    }
  }
  if (writerPerms != kPermAll) {
    return "the masters' identity digest:" + userOf(auth) + " holds " +
           (writerPerms == 0 ? std::string("nothing") : permLetters(writerPerms)) +
           " instead of cdrwa";
  }
  return std::nullopt;
}

namespace {

// The ACL regent gives the cluster's nodes, as the fix sets it: hashes left for the operator to
// compute (docs/operations.md, "ZooKeeper ACLs").
std::string requiredAcl(const std::string& auth, const std::string& readAuth) {
  std::string acl = "digest:" + userOf(auth) + ":<hash>:cdrwa";
  if (!readAuth.empty()) acl += ",digest:" + userOf(readAuth) + ":<hash>:r";
  return acl;
}

struct Walk {
  ZooKeeperClient& zk;
  std::string auth;
  std::string readAuth;

  std::string absolute(const std::string& path) const {
    return path.empty() ? zk.root() : zk.root() + "/" + path;
  }

  Error refusal(const std::string& path, const std::string& found,
                const std::string& problem) const {
    return Error::fatal(
        "refusing to start: the ZooKeeper node '" + absolute(path) + "' has the ACL " + found +
        ": " + problem + ". Anyone who may write, create, delete or change the ACL at or below "
        "the cluster root can replace the `leader` node or the stored jobs, so the cluster's "
        "election data would not be the masters' alone. Every node at and below '" + zk.root() +
        "' must have the ACL " + requiredAcl(auth, readAuth) +
        " (ha.zookeeper.auth, ha.zookeeper.read-auth). To fix it, stop the masters and in "
        "`zkCli.sh -server <ha.zookeeper.quorum>` run `addauth digest " + userOf(auth) +
        ":<password>` then `setAcl -R " + zk.root() + " " + requiredAcl(auth, readAuth) +
        "` (each <hash>: `printf %s user:password | openssl dgst -binary -sha1 | openssl "
        "base64`), or start the cluster under a new cluster-id (docs/operations.md, "
        "\"ZooKeeper ACLs\")");
  }

  Error failed(const std::string& what, const std::string& path, ZkCode code) const {
    const std::string message = "cannot read the " + what + " of the ZooKeeper node '" +
                                absolute(path) + "': " + zkCodeName(code);
    if (isTransient(code) || endsSession(code)) return Error::retryable(message);
    return Error::fatal("refusing to start: " + message + " (the masters' identity digest:" +
                        userOf(auth) + " may not read it: either ha.zookeeper.auth holds a wrong "
                        "password, which ZooKeeper accepts at login, or the node belongs to "
                        "another identity; docs/operations.md, \"ZooKeeper ACLs\")");
  }

  // Checks `path` and everything below it.
  kj::Promise<Status> node(std::string path) {
    return zk.getAcl(path).then([this, path](ZkReply<std::vector<AclEntry>> acl)
                                    -> kj::Promise<Status> {
      if (acl.code == ZkCode::kNoNode) return Status();  // Gone (an ephemeral node) or absent.
      if (!acl.ok()) return Status(failed("ACL", path, acl.code));
      if (auto problem = clusterAclProblem(acl.value, auth)) {
        return Status(refusal(path, describeAcl(acl.value), *problem));
      }
      return zk.children(path).then([this, path](ZkReply<std::vector<std::string>> names)
                                        -> kj::Promise<Status> {
        if (names.code == ZkCode::kNoNode) return Status();
        if (!names.ok()) return Status(failed("children", path, names.code));
        auto checks = kj::heapArrayBuilder<kj::Promise<Status>>(names.value.size());
        for (const std::string& name : names.value) {
          checks.add(node(path.empty() ? name : path + "/" + name));
        }
        return kj::joinPromises(checks.finish()).then([](kj::Array<Status> results) {
          // A refusal outweighs a retryable failure elsewhere.
          Status first;
          for (Status& result : results) {
            if (result.ok()) continue;
            if (!result.error().isRetryable()) return kj::mv(result);
            if (first.ok()) first = kj::mv(result);
          }
          return first;
        });
      });
    });
  }
};

}  // namespace

kj::Promise<Status> verifyClusterAcl(ZooKeeperClient& zk, const std::string& auth,
                                     const std::string& readAuth) {
  auto walk = kj::heap<Walk>(Walk{zk, auth, readAuth});
  Walk& w = *walk;
  return w.node("").attach(kj::mv(walk));
}

kj::Promise<std::optional<std::string>> openClusterWarning(ZooKeeperClient& zk) {
  auto check = [&zk](std::string path) {
    return zk.getAcl(path).then(
        [&zk, path](ZkReply<std::vector<AclEntry>> acl) -> std::optional<std::string> {
          if (!acl.ok()) return std::nullopt;
          for (const AclEntry& entry : acl.value) {
            if (entry.scheme != "world" || (entry.perms & ~kPermRead) == 0) continue;
            return "the ZooKeeper node '" + (path.empty() ? zk.root() : zk.root() + "/" + path) +
                   "' has the ACL " + describeAcl(acl.value) +
                   ": anyone may replace the `leader` node that says where the leader is (this "
                   "process still refuses a master that does not prove itself, but may be kept "
                   "from the real one); masters with ha.zookeeper.auth refuse to start on it "
                   "(docs/operations.md, \"ZooKeeper ACLs\")";
          }
          return std::nullopt;
        });
  };
  return check("").then(
      [check](std::optional<std::string> root) mutable -> kj::Promise<std::optional<std::string>> {
        if (root) return kj::mv(root);
        return check("leader");
      });
}

}  // namespace regent::ha
