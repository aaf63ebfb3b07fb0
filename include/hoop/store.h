// The rendezvous key-value store the ranks of a job meet through before any link exists.
// A TCP server (in the launcher, or in rank 0) and a client; a file store for shared
// filesystems. Values are opaque bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hoop/export.h"

namespace hoop {

using Bytes = std::vector<uint8_t>;

class HOOP_API Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until the key exists (or the store timeout passes: Error{timeout}).
  virtual Bytes get(const std::string& key) = 0;
  // Atomically adds delta to the integer stored under key (0 when absent); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Sets key to desired if its current value is expected (an empty expected means "absent").
  // Returns the value now stored.
  virtual Bytes compare_set(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // Blocks until every key exists (or timeout).
  virtual void wait(const std::vector<std::string>& keys) = 0;
  // Non-blocking: does the key exist?
  virtual bool check(const std::string& key) = 0;
  virtual bool remove(const std::string& key) = 0;

  void set_timeout(std::chrono::milliseconds t) { timeout_ = t; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Convenience wrappers for text values.
  void set_string(const std::string& key, const std::string& value);
  std::string get_string(const std::string& key);

 protected:
  std::chrono::milliseconds timeout_{std::chrono::seconds(300)};
};

// Client of a TCP store. Connects with retries and exponential backoff until connect_timeout.
HOOP_API std::shared_ptr<Store> connect_tcp_store(const std::string& host, uint16_t port,
                                         std::chrono::milliseconds connect_timeout =
                                             std::chrono::seconds(60));

// A store on a shared filesystem: one file per key under dir.
HOOP_API std::shared_ptr<Store> open_file_store(const std::string& dir);

// Keys scoped under a prefix ("prefix/key"), for one communicator of many on one store.
HOOP_API std::shared_ptr<Store> prefix_store(std::shared_ptr<Store> base, const std::string& prefix);

// The TCP store server. Serves clients from its own thread until destroyed. With HOOP_SECRET
// set when it starts, it serves only connections that first show that secret's key (clients
// from connect_tcp_store do when HOOP_SECRET is set for them too).
class HOOP_API TcpStoreServer {
 public:
  // Binds host:port (port 0 picks a free one); host "" means all interfaces (IPv6 and IPv4).
  explicit TcpStoreServer(const std::string& host = "", uint16_t port = 0);
  // Takes ownership of an already listening socket (for a parent that forks the ranks).
  static std::unique_ptr<TcpStoreServer> from_listening_fd(int fd);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const;
  // Number of connections rejected as malformed (for tests and logs).
  uint64_t rejected_connections() const;
  // Requests served so far (every command a client sent, its HELLO included), and the CPU time
  // of the thread serving them: what a job's start-up costs the store.
  uint64_t requests() const;
  std::chrono::nanoseconds busy_time() const;

  struct HOOP_LOCAL Impl;

 private:
  explicit TcpStoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hoop
