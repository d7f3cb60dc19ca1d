// The ACL of the cluster's ZooKeeper nodes: what regent gives them (ha.zookeeper.auth writes,
// ha.zookeeper.read-auth reads, nobody else), and the check a master makes at start that the
// nodes it finds carry no more than that (docs/security.md, "Chain of trust").
#pragma once

#include <kj/async.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace regent::ha {

class ZooKeeperClient;

// One ACL entry as ZooKeeper reports it: scheme ("world", "digest", "ip", ...), id ("anyone",
// "user:base64(sha1(user:password))", ...) and permissions (kPerm* bits, ZooKeeper's values).
struct AclEntry {
  std::string scheme;
  std::string id;
  int32_t perms = 0;
};

inline constexpr int32_t kPermRead = 1;
inline constexpr int32_t kPermWrite = 2;
inline constexpr int32_t kPermCreate = 4;
inline constexpr int32_t kPermDelete = 8;
inline constexpr int32_t kPermAdmin = 16;
inline constexpr int32_t kPermAll = 31;

// ZooKeeper's digest id of a "user:password" credential: "user:" + base64(sha1(credential)).
std::string digestId(const std::string& credential);

// "world:anyone:cdrwa,digest:regent:r": an ACL as ZooKeeper's CLI writes it, except that a
// digest entry shows its user only (the hash of a password stays out of logs).
std::string describeAcl(const std::vector<AclEntry>& acl);

// What is wrong with `acl` for a node at or below the cluster root of masters whose credential
// is `auth` ("user:password"): nullopt when the masters' digest identity holds every permission,
// nobody else holds more than read, and world:anyone holds nothing. So it accepts every ACL
// regent creates: the masters' entry alone, or with a read entry for the read credential (this
// one's, or another's given when the node was created). Otherwise one sentence saying who may do
// what they must not, or what the masters lack.
std::optional<std::string> clusterAclProblem(const std::vector<AclEntry>& acl,
                                             const std::string& auth);

// Reads the ACL of the cluster root and of every node below it, and checks each with
// clusterAclProblem(auth). Ok when all pass (or the root does not exist). A node that fails, or
// whose ACL or children cannot be read for lack of permission, is a fatal error naming its
// absolute path, the ACL found, the ACL it must have (from `auth` and `readAuth`) and how to fix
// it; a transient or session-ending ZooKeeper code is a retryable error. Nodes that disappear
// during the walk (ephemeral ones) are skipped.
// `zk` must outlive the promise. Loop-thread only.
kj::Promise<Status> verifyClusterAcl(ZooKeeperClient& zk, const std::string& auth,
                                     const std::string& readAuth);

// For processes that do not know the masters' identity (workers): resolves with a warning when
// the cluster root or its `leader` node lets world:anyone write, create, delete or administer
// it, naming the node and its ACL; nullopt otherwise, also when the ACL cannot be read (no node
// yet, no permission, no answer). `zk` must outlive the promise. Loop-thread only.
kj::Promise<std::optional<std::string>> openClusterWarning(ZooKeeperClient& zk);

}  // namespace regent::ha
