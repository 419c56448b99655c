// The worker process both backends run
// (plugins/backends/support/include/backend_support/worker_process.hpp), with test_worker.cpp as
// the worker.
#include "backend_support/worker_process.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>

#include "backend_support/wire.hpp"
#include "emmy/status.hpp"

namespace emmy::backend_support {
namespace {

using namespace std::chrono_literals;

// Sends one request; the answer, or nullopt-like "" with ok=false when none came.
std::string ask(WorkerProcess& w, uint32_t command, const std::string& argument, bool& ok,
                bool& timed_out, std::chrono::milliseconds timeout = 5000ms) {
  wire::Writer out;
  out.put(command);
  out.put_string(argument);
  const auto deadline = wire::Clock::now() + timeout;
  wire::Reader in{w.fd(), &deadline};
  std::string answer = out.send(w.fd()) ? in.get_string() : "";
  ok = in.ok;
  timed_out = in.timed_out;
  return answer;
}

TEST(WorkerProcess, AnswersAndStaysUpForTheNextRequest) {
  WorkerProcess w(TEST_WORKER);
  ASSERT_EQ(w.spawn("test"), 0);
  const pid_t pid = w.pid();
  bool ok = false, timed_out = false;
  EXPECT_EQ(ask(w, 1, "first", ok, timed_out), "first");
  EXPECT_TRUE(ok);
  EXPECT_EQ(ask(w, 1, "second", ok, timed_out), "second");
  EXPECT_EQ(w.pid(), pid);
  w.stop();
  EXPECT_FALSE(w.running());
}

TEST(WorkerProcess, OverridesReplaceTheInheritedEnvironment) {
  ::setenv("EMMY_SUPPORT_TEST_VAR", "inherited", 1);
  WorkerProcess plain(TEST_WORKER), overridden(TEST_WORKER);
  ASSERT_EQ(plain.spawn("test"), 0);
  ASSERT_EQ(overridden.spawn("test", {{"EMMY_SUPPORT_TEST_VAR", "given"}}), 0);
  bool ok = false, timed_out = false;
  EXPECT_EQ(ask(plain, 2, "EMMY_SUPPORT_TEST_VAR", ok, timed_out), "inherited");
  EXPECT_EQ(ask(overridden, 2, "EMMY_SUPPORT_TEST_VAR", ok, timed_out), "given");
  EXPECT_EQ(ask(overridden, 2, "HOME", ok, timed_out), ::getenv("HOME") ? ::getenv("HOME") : "");
  ::unsetenv("EMMY_SUPPORT_TEST_VAR");
}

TEST(WorkerProcess, AWorkerThatDiesMidRequestIsReapedWithItsSignal) {
  WorkerProcess w(TEST_WORKER);
  ASSERT_EQ(w.spawn("test"), 0);
  bool ok = true, timed_out = true;
  ask(w, 3, "crash", ok, timed_out);
  EXPECT_FALSE(ok);
  EXPECT_FALSE(timed_out);
  const WorkerExit exit = w.reap(2000ms);
  EXPECT_TRUE(exit.reaped);
  EXPECT_TRUE(exit.signaled);
  EXPECT_EQ(exit.signal, SIGSEGV);
  EXPECT_FALSE(exit.killed_after_grace);
  EXPECT_FALSE(w.running());
  EXPECT_EQ(signal_description(exit.signal), "SIGSEGV (Segmentation fault)");
  // The next request starts a fresh one.
  ASSERT_EQ(w.spawn("test"), 0);
  EXPECT_EQ(ask(w, 1, "again", ok, timed_out), "again");
}

TEST(WorkerProcess, AnExitWithoutAnswerIsItsStatus) {
  WorkerProcess w(TEST_WORKER);
  ASSERT_EQ(w.spawn("test"), 0);
  bool ok = true, timed_out = true;
  ask(w, 5, "", ok, timed_out);
  EXPECT_FALSE(ok);
  const WorkerExit exit = w.reap(2000ms);
  EXPECT_TRUE(exit.exited);
  EXPECT_EQ(exit.status, 7);
}

TEST(WorkerProcess, AHungWorkerTimesOutAndIsKilledAfterTheGrace) {
  WorkerProcess w(TEST_WORKER);
  ASSERT_EQ(w.spawn("test"), 0);
  bool ok = true, timed_out = false;
  ask(w, 4, "", ok, timed_out, 100ms);
  EXPECT_FALSE(ok);
  EXPECT_TRUE(timed_out);
  const WorkerExit exit = w.reap(50ms);
  EXPECT_TRUE(exit.killed_after_grace);
  EXPECT_EQ(exit.signal, SIGKILL);
}

TEST(WorkerProcess, AMissingExecutableIsTheSpawnError) {
  WorkerProcess w("/nonexistent/emmy-worker");
  EXPECT_EQ(w.spawn("test"), ENOENT);
  EXPECT_FALSE(w.running());
}

}  // namespace
}  // namespace emmy::backend_support
