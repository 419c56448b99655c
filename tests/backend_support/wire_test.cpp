// The framing both backends' worker protocols are built on
// (plugins/backends/support/include/backend_support/wire.hpp).
#include "backend_support/wire.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace emmy::backend_support::wire {
namespace {

struct SocketPair {
  int fd[2] = {-1, -1};
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fd), 0); }
  ~SocketPair() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
};

TEST(Wire, ValuesAndByteStringsRoundTrip) {
  SocketPair s;
  Writer w;
  w.put(uint32_t{0x454d5251});
  w.put(int64_t{-5});
  w.put(2.5);
  w.put_string("library.so");
  const unsigned char raw[] = {0, 1, 255};
  w.put_bytes(raw, sizeof raw);
  w.put_string("");
  ASSERT_TRUE(w.send(s.fd[0]));
  Reader r{s.fd[1]};
  EXPECT_EQ(r.get<uint32_t>(), 0x454d5251u);
  EXPECT_EQ(r.get<int64_t>(), -5);
  EXPECT_EQ(r.get<double>(), 2.5);
  EXPECT_EQ(r.get_string(), "library.so");
  EXPECT_EQ(r.get_bytes(), (std::vector<unsigned char>{0, 1, 255}));
  EXPECT_EQ(r.get_string(), "");
  EXPECT_TRUE(r.ok);
  EXPECT_FALSE(r.timed_out);
}

// Lent byte strings of 64 KiB or more are written from the caller's memory, not copied into the
// message; the stream is the same, pieces before, between and after them in order.
TEST(Wire, LongLentByteStringsAreNotCopiedAndArriveInOrder) {
  SocketPair s;
  std::vector<unsigned char> big(3 << 20), bigger(5 << 20);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<unsigned char>(i * 7);
  for (size_t i = 0; i < bigger.size(); ++i) bigger[i] = static_cast<unsigned char>(i * 13 + 1);
  const std::vector<unsigned char> edge(Writer::kLentBytes - 1, 9);
  Writer w;
  w.put(uint32_t{7});
  w.lend_bytes(big.data(), big.size());
  w.put_string("between");
  w.lend_bytes(bigger.data(), bigger.size());
  w.lend_bytes(edge.data(), edge.size());  // one byte short: copied
  w.put(int64_t{-1});
  EXPECT_LT(w.bytes.size(), Writer::kLentBytes + 64);  // neither big piece was copied
  std::thread reader([&] {
    Reader r{s.fd[1]};
    EXPECT_EQ(r.get<uint32_t>(), 7u);
    EXPECT_EQ(r.get_bytes(), big);
    EXPECT_EQ(r.get_string(), "between");
    EXPECT_EQ(r.get_bytes(), bigger);
    EXPECT_EQ(r.get_bytes(), edge);
    EXPECT_EQ(r.get<int64_t>(), -1);
    EXPECT_TRUE(r.ok);
  });
  EXPECT_TRUE(w.send(s.fd[0]));
  reader.join();
}

TEST(Wire, ALengthOverTheLimitFailsTheRead) {
  SocketPair s;
  Writer w;
  w.put_string("0123456789");
  ASSERT_TRUE(w.send(s.fd[0]));
  Reader r{s.fd[1]};
  EXPECT_TRUE(r.get_bytes(/*limit=*/4).empty());
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.get<uint32_t>(), 0u);  // every read after the first failure gives zero
}

TEST(Wire, TheDeadlineEndsAWaitForAnAnswerThatDoesNotCome) {
  SocketPair s;
  const auto deadline = Clock::now() + std::chrono::milliseconds(50);
  Reader r{s.fd[1], &deadline};
  const auto t0 = Clock::now();
  r.get<uint32_t>();
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.timed_out);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));
}

TEST(Wire, APeerThatWentAwayIsEndOfFileNotATimeout) {
  SocketPair s;
  ::close(s.fd[0]);
  s.fd[0] = -1;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  Reader r{s.fd[1], &deadline};
  r.get<uint32_t>();
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.timed_out);
  Writer w;
  w.put(uint32_t{1});
  EXPECT_FALSE(w.send(s.fd[1]));  // an error, not SIGPIPE
}

}  // namespace
}  // namespace emmy::backend_support::wire
