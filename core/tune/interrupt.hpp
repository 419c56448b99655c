// Ctrl-C during a tuning run: the handler only sets a flag; the run checks it before every
// candidate, every build and measurement (the validation's too), every node of a reference the
// interpreter computes (ir::evaluate's hook) and every random input it makes (ir::random_inputs'),
// stops by throwing Interrupted, and still writes what
// it has (every measurement is already in the database: nothing measured is lost).
#pragma once

#include "emmy/status.hpp"

namespace emmy::tune {

class Interrupted : public emmy::Error {
 public:
  Interrupted() : emmy::Error("interrupted") {}
};

// Installs SIGINT/SIGTERM handlers that set the flag (a second Ctrl-C restores the default) and
// pass the signal on to emmy's child processes (workers, compilers), as a terminal's Ctrl-C
// reaches its whole process group: a signal sent to emmy alone stops the request in flight too.
void install_interrupt_handler();
bool interrupt_requested();
// Throws Interrupted when the flag is set.
void check_interrupt();

}  // namespace emmy::tune
