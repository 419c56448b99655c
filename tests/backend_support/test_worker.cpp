// The worker backend_support_test starts: reads requests (u32 command, str argument) on stdin and
// answers on stdout in the support library's framing, as a backend's worker does.
//   1 echo:   answers the argument
//   2 env:    answers the value of the environment variable the argument names ("" if unset)
//   3 crash:  reads the argument, then raises SIGSEGV before answering (a kernel that faults)
//   4 hang:   never answers
//   5 exit:   exits with status 7 without answering
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "backend_support/wire.hpp"

namespace wire = emmy::backend_support::wire;

int main() {
  for (;;) {
    wire::Reader in{0};
    const uint32_t command = in.get<uint32_t>();
    const std::string argument = in.get_string();
    if (!in.ok) return 0;
    wire::Writer out;
    switch (command) {
      case 1:
        out.put_string(argument);
        break;
      case 2: {
        const char* v = std::getenv(argument.c_str());
        out.put_string(v ? v : "");
        break;
      }
      case 3:
        ::raise(SIGSEGV);
        return 1;
      case 4:
        for (;;) ::pause();
      default:
        return 7;
    }
    if (!out.send(1)) return 3;
  }
}
