// The ProcessTaskRunner's file work in the attempts directory, done off the loop thread and
// always through the directory's descriptor (never following a link): checking that the
// directory at the path is still the one held, preparing an attempt's directory and output
// files, removing one, listing those left by an earlier run. Internal to services/taskexecutor/.
#pragma once

#include <kj/io.h>
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace regent::taskexecutor {

// Why the attempts directory cannot take attempt directories, or "". The directory at
// `attemptsDir` must be the one held (the shim enters it by path); with `probeWrite`, a directory
// is also made and removed in it.
std::string checkAttemptsDir(int attemptsFd, const std::string& attemptsDir, bool probeWrite);

// What preparing an attempt's directory came to.
struct PreparedAttempt {
  std::string problem;  // "" on success; else the worker cannot create attempt directories.
  kj::AutoCloseFd stdoutFd;
  kj::AutoCloseFd stderrFd;
};

// The attempt's directory `name` in the attempts directory, its output files (created new, never
// through a link), then the directory handed to the task user when there is one.
PreparedAttempt prepareAttemptDir(int attemptsFd, const std::string& attemptsDir,
                                  const std::string& name, std::optional<uid_t> uid,
                                  std::optional<gid_t> gid);

// Removes `name` in `parentFd` and everything in it, never following a link (what a task left in
// its directory may be anything, and may change meanwhile). Returns "" or what failed.
std::string removeTreeAt(int parentFd, const std::string& name, const std::string& path);

// The names of the attempt directories in the attempts directory, oldest (modified) first. Logs
// a warning and returns none when it cannot be listed.
std::vector<std::string> listAttemptDirs(int attemptsFd);

}  // namespace regent::taskexecutor
