// Ctrl-C during a tuning run: the handler only sets a flag; the run checks it before every
// candidate, every build and measurement (the validation's too) and every node of a reference the
// interpreter computes (ir::evaluate's hook), stops by throwing Interrupted, and still writes what
// it has (every measurement is already in the database: nothing measured is lost).
#pragma once

#include "emmy/status.hpp"

namespace emmy::tune {

class Interrupted : public emmy::Error {
 public:
  Interrupted() : emmy::Error("interrupted") {}
};

// Installs SIGINT/SIGTERM handlers that set the flag (a second Ctrl-C restores the default).
void install_interrupt_handler();
bool interrupt_requested();
// Throws Interrupted when the flag is set.
void check_interrupt();

}  // namespace emmy::tune
