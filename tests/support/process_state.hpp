#pragma once
// The state of a process the test started, from /proc: whether a SIGSTOP took effect (kill()
// only sends the signal; the process may run on for a moment).
#include <sys/types.h>

#include <fstream>
#include <string>

namespace akt::test {

// The state letter of a process (/proc/<pid>/stat: R, S, T for stopped, ...); 0 when unknown.
inline char process_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  std::getline(in, text);
  const auto close = text.rfind(')');  // the command name may hold spaces
  return close != std::string::npos && close + 2 < text.size() ? text[close + 2] : 0;
}

}  // namespace akt::test
