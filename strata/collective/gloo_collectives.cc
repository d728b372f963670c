// Gloo stays private to the collective layer: this file and the shims of
// internal/gloo_transport.h are the only sources that include it.
#include "strata/collective/gloo_collectives.h"

#include <gloo/allgatherv.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/types.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <thread>

#include "strata/base/errors.h"
#include "strata/base/mutex.h"
#include "strata/base/thread_annotations.h"
#include "strata/collective/internal/adopted_lock.h"
#include "strata/collective/internal/buffer_pool.h"
#include "strata/collective/internal/direct_mesh.h"
#include "strata/collective/internal/gloo_call_header.h"
#include "strata/collective/internal/gloo_failure_reports.h"
#include "strata/collective/internal/gloo_transport.h"
#include "strata/collective/internal/reduce.h"
#include "strata/collective/internal/signature.h"
#include "strata/core/device.h"

namespace strata::collective {

using internal::CallHeader;
using internal::CallSignature;
using internal::CollectiveKind;
using internal::MeshContext;
using Clock = std::chrono::steady_clock;
using Milliseconds = std::chrono::milliseconds;

namespace {

constexpr const char* kWho = "GlooCollectives";

// Slot prefixes distinct from those of Gloo's algorithms (0x01..0x08).
constexpr uint8_t kHeaderSlotPrefix = 0x53;
constexpr uint8_t kMeshCheckSlotPrefix = 0x54;
// The connection watch's receive (MeshContext::connection_lost): never sent to.
constexpr uint8_t kWatchSlotPrefix = 0x55;
// The blocks of exchange_reduce (reduce_scatter and large all_reduce calls).
constexpr uint8_t kBlockSlotPrefix = 0x56;
// The pieces a block moves in, so that reducing one overlaps receiving the next.
constexpr size_t kSegmentBytes = size_t{512} << 10;

// What a call sends along with its header (nothing when data == nullptr):
// `bytes` to every peer, from `data`; with per_peer, `data` holds one block
// of `bytes` per rank and peer p receives block p (reduce_scatter).
struct Payload {
  const void* data = nullptr;
  size_t bytes = 0;
  bool per_peer = false;
  const std::byte* block(int p) const {
    return static_cast<const std::byte*>(data) + (per_peer ? p * bytes : 0);
  }
};

Milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Milliseconds>(deadline - Clock::now());
  return std::max(left, Milliseconds(1));
}

// Calls fn(T*) with the C++ element type of a numeric dtype.
template <typename Fn>
void with_type(DType dtype, Fn&& fn) {
  dispatch_numeric(dtype, [&](auto zero) { fn(static_cast<decltype(zero)*>(nullptr)); });
}

}  // namespace

struct internal::GlooState {
  GlooState(int r, int n, std::shared_ptr<Store> s, GlooOptions o)
      : rank(r),
        size(n),
        store(std::move(s)),
        options(std::move(o)),
        pool(std::make_shared<internal::BufferPool>()),
        reports(r, n, store,
                {.prefix = options.prefix,
                 .timeout = options.timeout,
                 .rank_names = options.rank_names}) {}

  const int rank;
  const int size;
  const std::shared_ptr<Store> store;
  const GlooOptions options;
  const std::shared_ptr<internal::BufferPool> pool;
  const internal::GlooFailureReports reports;
  std::shared_ptr<gloo::transport::Device> device;  // outlives the contexts below

  Mutex call_mu;  // serialises calls and reset()
  uint64_t calls STRATA_GUARDED_BY(call_mu) = 0;

  // The buffers every call of the current context reuses (made by the first
  // call after connect(), dropped before the context goes). Two sets of
  // receives alternate between calls (set call % 2): the receives of the next
  // call are posted while this one runs, so the peers' messages for it never
  // wait for a readiness notice, and the next call's messages cannot land in
  // the areas this call is still reading.
  struct CallBuffers {
    size_t inline_bytes = 0;      // inline_capacity(size)
    size_t slot_bytes = 0;        // kHeaderBytes + inline_bytes: one header message
    std::unique_ptr<char[]> out;  // slot_bytes per rank (a message per peer when payloads differ)
    std::unique_ptr<char[]> header_in[2];        // slot_bytes per rank
    std::unique_ptr<std::byte[]> payload_in[2];  // payload_capacity(size) per rank
    std::unique_ptr<gloo::transport::UnboundBuffer> send_header;
    std::unique_ptr<gloo::transport::UnboundBuffer> recv_header[2], recv_payload[2];
    std::vector<char> header_posted[2], payload_posted[2];  // per rank: a receive is pending
    bool headers_direct = false;  // the headers go over the direct mesh, not these buffers
  };
  std::unique_ptr<CallBuffers> buffers STRATA_GUARDED_BY(call_mu);
  const size_t capacity = payload_capacity(size);

  // The description of the last call (a training loop repeats the same few
  // calls): keyed by the fingerprint and dimension 0.
  uint64_t described_hash STRATA_GUARDED_BY(call_mu) = 0;
  int64_t described_dim0 STRATA_GUARDED_BY(call_mu) = -1;
  std::string described STRATA_GUARDED_BY(call_mu);

  // The headers of one call, in rank order, and where each rank's payload is
  // (null where a rank attached none; this rank's own is the caller's data).
  struct Exchange {
    std::vector<CallHeader> headers;
    std::vector<const std::byte*> payloads;
    bool all_attached() const {
      return std::all_of(payloads.begin(), payloads.end(), [](auto* p) { return p != nullptr; });
    }
  };

  // Progress published for the peers' timeout reports (publish_progress).
  Mutex progress_mu;
  uint64_t last_call STRATA_GUARDED_BY(progress_mu) = 0;  // 0: none completed yet
  std::string last_description STRATA_GUARDED_BY(progress_mu);
  std::function<std::string()> activity STRATA_GUARDED_BY(progress_mu);
  bool stopping STRATA_GUARDED_BY(progress_mu) = false;
  CondVar progress_cv;

  void note_completed(uint64_t call, const std::string& description) {
    MutexLock lock(progress_mu);
    last_call = call;
    last_description = description;  // reuses its capacity: no allocation per call
  }
  std::string progress_text() {
    MutexLock lock(progress_mu);
    std::string done = last_call == 0
                           ? std::string("completed no collective yet")
                           : str_cat("completed collective #", last_call, " ", last_description);
    if (!activity) return done;
    return str_cat(done, "; ", activity());
  }
  // The progress thread's loop: publishes every progress_interval until
  // stopped, and, in a group of two, looks at the connection watch: once the
  // connection to the peer broke, the call in the middle of a transfer fails
  // with the transport failure (UnavailableError) instead of waiting out its
  // timeout. (With more ranks a closed connection can also be a peer that
  // finished its last call and left while this rank still exchanges with the
  // others, so only the operations Gloo fails itself fail.)
  void publish_progress_until_stopped() {
    for (;;) {
      reports.publish_progress(progress_text());
      fail_on_lost_connection();
      MutexLock lock(progress_mu);
      if (progress_cv.wait_until(progress_mu, Clock::now() + options.progress_interval,
                                 [this]() STRATA_REQUIRES(progress_mu) { return stopping; }))
        return;
    }
  }
  void fail_on_lost_connection() {
    std::shared_ptr<MeshContext> ctx;
    {
      MutexLock lock(mu);
      ctx = context;
    }
    std::string why;
    if (size != 2 || ctx == nullptr || !ctx->connection_lost(&why)) return;
    ctx->lose(internal::with_host_order_ports(why));
  }
  void stop_progress() {
    {
      MutexLock lock(progress_mu);
      stopping = true;
    }
    progress_cv.notify_all();
    if (progress_thread.joinable()) progress_thread.join();
  }

  Mutex mu;
  std::shared_ptr<MeshContext> context STRATA_GUARDED_BY(mu);
  // The calls' header exchange (internal/direct_mesh.h); null in a group of one.
  std::shared_ptr<internal::DirectMesh> direct STRATA_GUARDED_BY(mu);
  uint64_t epoch STRATA_GUARDED_BY(mu) = 0;
  bool failed STRATA_GUARDED_BY(mu) = false;
  ErrorCode failure_code STRATA_GUARDED_BY(mu) = ErrorCode::OK;
  std::string failure STRATA_GUARDED_BY(mu);

  // The group part of every call's fingerprint: the key prefix and the size.
  uint64_t fingerprint(const CallSignature& sig) const {
    uint64_t h = sig.hash();
    for (const char c : reports.group()) {
      h ^= static_cast<uint8_t>(c);
      h *= 1099511628211ull;  // FNV-1a, continuing the signature's hash
    }
    return h;
  }

  // Records the first failure (later calls rethrow it) and throws the current one.
  [[noreturn]] void fail(ErrorCode code, const std::string& message) {
    MutexLock lock(mu);
    if (!failed) {
      failed = true;
      failure_code = code;
      failure = message;
    }
    throw_error(failure_code, failure);
  }

  // Maps an exception from Gloo: an abort wins; otherwise a timeout or a
  // transport failure (Gloo's message carries the peer's address; with two
  // ranks the peer is the other one).
  [[noreturn]] void fail_from_gloo(const std::string& what, uint64_t call,
                                   const std::string& gloo_message) {
    {
      MutexLock lock(mu);
      if (failed) throw_error(failure_code, failure);
    }
    const bool timed_out = gloo_message.find("imeout") != std::string::npos ||
                           gloo_message.find("imed out") != std::string::npos;
    // A connection closed by a peer whose data phase timed out (see
    // GlooFailureReports) makes this rank one of those that waited.
    const std::string timed_out_key = call_key("timed_out", call);
    if (timed_out || reports.peer_record({timed_out_key})) {
      const std::string verdict = reports.unfinished_verdict(what, call, timed_out_key);
      if (!verdict.empty()) fail(ErrorCode::DEADLINE_EXCEEDED, verdict);
    }
    fail(timed_out ? ErrorCode::DEADLINE_EXCEEDED : ErrorCode::UNAVAILABLE,
         reports.gloo_failure(what, call, timed_out, gloo_message));
  }

  // The store key under which the ranks of this epoch record `what`
  // ("<prefix>/<epoch>/<what>/"; each rank appends its number).
  std::string epoch_key(const char* what) {
    MutexLock lock(mu);
    return str_cat(options.prefix, "/", epoch, "/", what, "/");
  }
  // The same about one call: "<prefix>/<epoch>/<what>/<call>/".
  std::string call_key(const char* what, uint64_t call) {
    return str_cat(epoch_key(what), call, "/");
  }
  // A rank that finds the schedules differ leaves its own header (call number
  // and description) in the store before it fails: the failure resets its
  // connections, which can drop its header before a peer read it, and that
  // peer then reports the same difference instead of a lost connection. One
  // key per rank and epoch: a rank fails for good at its first difference.
  std::string mismatch_key() { return epoch_key("mismatch"); }
  [[noreturn]] void fail_schedules_differ(uint64_t call, const std::string& description, int p,
                                          uint64_t their_call,
                                          const std::string& their_description) {
    throw FailedPreconditionError(
        reports.schedules_differ(call, description, p, their_call, their_description));
  }
  // Throws the difference when some rank's header differs from `mine`.
  void check_schedules(const CallHeader& mine, const std::vector<CallHeader>& headers) {
    for (int p = 0; p < size; ++p) {
      const CallHeader& h = headers[p];
      if (h.call == mine.call && h.hash == mine.hash) continue;
      reports.leave_record(mismatch_key(), str_cat(mine.call, " ", mine.description));
      fail_schedules_differ(mine.call, mine.description, p, h.call, h.description);
    }
  }

  // The header-phase verdict: the missing ranks never entered the collective.
  // `verdict`: the missing ranks' names, a newline, what they were last heard doing.
  [[noreturn]] void fail_not_entered(const std::string& collective, const std::string& verdict) {
    const size_t newline = verdict.find('\n');
    fail(ErrorCode::DEADLINE_EXCEEDED,
         reports.not_entered(collective, verdict.substr(0, newline),
                             newline == std::string::npos ? "" : verdict.substr(newline + 1)));
  }

  // Rendezvous under the current epoch (no context installed), within the
  // rendezvous timeout: every store call gets what remains of it, and Gloo
  // waits five times its context timeout for each pair to connect, so the
  // context holds a fifth of it while connecting. A rank whose part fails
  // says so in the store (StoreAdapter::abandon) before it throws: the others
  // may be waiting for what it would have published next, and end their
  // waits at the notice instead of the deadline.
  void connect() STRATA_REQUIRES(call_mu) {
    uint64_t e;
    {
      MutexLock lock(mu);
      e = epoch;
    }
    const Milliseconds limit = rendezvous_timeout();
    const Clock::time_point deadline = Clock::now() + limit;
    auto ctx = std::make_shared<MeshContext>(rank, size);
    std::shared_ptr<internal::DirectMesh> mesh;
    ctx->setTimeout(std::max(limit / 5, Milliseconds(1)));
    StoreAdapter adapter(*store, str_cat(options.prefix, "/", e, "/"), deadline, rank, size,
                         [this](int p) { return reports.name(p); });
    const std::string failed_to = str_cat(kWho, " ", reports.me(), ": rendezvous ");
    try {
      // Published before the mesh forms, so a rank whose own connections fail
      // still leaves its number for the others' checks.
      const uint64_t check = publish_mesh_check(adapter);
      ctx->connect(adapter, device, options.timeout, gloo::Slot::build(kWatchSlotPrefix, 0));
      const std::vector<uint64_t> checks = check_mesh(*ctx, adapter, check, deadline);
      if (size > 1) mesh = connect_direct(*ctx, adapter, checks, deadline);
    } catch (const Error& err) {
      adapter.abandon(err.what());
      if (err.code() == ErrorCode::DEADLINE_EXCEEDED) {
        throw DeadlineExceededError(
            str_cat(failed_to, "timed out after ", limit.count(), "ms: ", err.what()));
      }
      throw_error(err.code(), str_cat(failed_to, "failed: ", err.what()));
    } catch (const gloo::EnforceNotMet& err) {
      adapter.abandon(err.what());
      throw UnavailableError(
          str_cat(failed_to, "failed: ", internal::with_host_order_ports(err.what())));
    } catch (const gloo::Exception& err) {
      adapter.abandon(err.what());
      const std::string m = internal::with_host_order_ports(err.what());
      if (m.find("imeout") != std::string::npos || Clock::now() >= deadline) {
        throw DeadlineExceededError(
            str_cat(failed_to, "timed out after ", limit.count(), "ms: ", m));
      }
      throw UnavailableError(str_cat(failed_to, "failed: ", m));
    }
    MutexLock lock(mu);
    context = std::move(ctx);
    direct = std::move(mesh);
    if (failed) abort_pairs_locked();  // aborted while connecting
  }

  // The direct mesh of this epoch: every rank listens where its Gloo
  // connections are, publishes the address, and connects to every other
  // rank, each proving itself with the check it published (check_mesh).
  std::shared_ptr<internal::DirectMesh> connect_direct(MeshContext& ctx,
                                                       internal::StoreAdapter& adapter,
                                                       const std::vector<uint64_t>& checks,
                                                       Clock::time_point deadline) {
    auto mesh = std::make_shared<internal::DirectMesh>(rank, size, ctx.local_host());
    adapter.set(str_cat("direct/", rank),
                std::vector<char>(mesh->address().begin(), mesh->address().end()));
    std::vector<std::string> addresses(static_cast<size_t>(size));
    for (int p = 0; p < size; ++p) {
      if (p == rank) {
        addresses[size_t(p)] = mesh->address();
        continue;
      }
      const std::vector<char> theirs = adapter.get(str_cat("direct/", p));
      addresses[size_t(p)].assign(theirs.begin(), theirs.end());
    }
    mesh->connect(addresses, checks, deadline, [&adapter] { adapter.throw_if_abandoned(); });
    return mesh;
  }

  // Gloo takes the first connection that reaches a pair's port as the peer,
  // without a handshake: a stray connection (a port scanner, a health check)
  // can take a peer's place while the mesh forms, and the real peer's
  // connection is then reset. So every rank proves itself on every pair: it
  // publishes a random number in the store (whose clients are authenticated)
  // before the mesh forms, sends it on each pair once it formed, and checks what each peer sent
  // against that peer's published number. A pair held by a stranger fails the check (wrong bytes),
  // or its wait (silence, or the reset of the displaced connection), and the attempt fails with
  // UnavailableError: the caller forms the mesh again on fresh ports. The wait is a tenth of the
  // rendezvous timeout (at least 2 s), within the deadline.
  uint64_t publish_mesh_check(internal::StoreAdapter& adapter) {
    if (size == 1) return 0;
    std::random_device random;
    const uint64_t mine = (uint64_t{random()} << 32) | random();
    std::vector<char> published(sizeof(mine));
    std::memcpy(published.data(), &mine, sizeof(mine));
    adapter.set(str_cat("mesh_check/", rank), published);
    return mine;
  }

  // Returns every rank's published number (this rank's own: `mine`).
  std::vector<uint64_t> check_mesh(MeshContext& ctx, internal::StoreAdapter& adapter, uint64_t mine,
                                   Clock::time_point deadline) {
    if (size == 1) return {mine};
    std::vector<uint64_t> expected(size, 0), arrived(size, 0);
    expected[size_t(rank)] = mine;
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      const std::vector<char> theirs = adapter.get(str_cat("mesh_check/", p));
      STRATA_CHECK(DATA_LOSS, theirs.size() == sizeof(uint64_t), kWho, " ", reports.me(),
                   ": the mesh check of ", reports.name(p), " in the store has ", theirs.size(),
                   " bytes");
      std::memcpy(&expected[p], theirs.data(), sizeof(uint64_t));
    }
    const Clock::time_point until =
        std::min(deadline, Clock::now() + std::max(rendezvous_timeout() / 10, Milliseconds(2000)));
    uint64_t out = mine;
    auto send = ctx.createUnboundBuffer(&out, sizeof(out));
    auto recv = ctx.createUnboundBuffer(arrived.data(), arrived.size() * sizeof(uint64_t));
    const uint64_t slot = gloo::Slot::build(kMeshCheckSlotPrefix, 0);
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      recv->recv(p, slot, p * sizeof(uint64_t), sizeof(uint64_t));
      send->send(p, slot);
    }
    std::vector<char> heard(size, 0);
    heard[rank] = 1;
    try {
      for (int k = 0; k < size - 1; ++k) {
        int src = -1;
        recv->waitRecv(&src, remaining(until));
        if (src >= 0 && src < size) heard[src] = 1;
      }
      for (int k = 0; k < size - 1; ++k) send->waitSend(remaining(until));
    } catch (const gloo::Exception& err) {
      std::vector<int> silent;
      for (int p = 0; p < size; ++p) {
        if (!heard[p]) silent.push_back(p);
      }
      throw UnavailableError(str_cat(
          "the connections to ", reports.names(silent),
          " did not pass the mesh check (a stray connection may have taken a peer's place, or a "
          "peer failed to connect): ",
          internal::with_host_order_ports(err.what())));
    }
    for (int p = 0; p < size; ++p) {
      if (p == rank || arrived[p] == expected[p]) continue;
      throw UnavailableError(str_cat("the connection to ", reports.name(p),
                                     " failed the mesh check: what arrived on it is not what ",
                                     reports.name(p),
                                     " published (a stray connection took its place)"));
    }
    return expected;
  }

  Milliseconds rendezvous_timeout() const {
    return options.rendezvous_timeout.count() > 0 ? options.rendezvous_timeout : options.timeout;
  }

  void abort_pairs_locked() STRATA_REQUIRES(mu) {
    if (context != nullptr) context->abort(str_cat("aborted: ", failure));
    if (direct != nullptr) direct->abort();
  }

  static uint64_t header_slot(int set) { return gloo::Slot::build(kHeaderSlotPrefix, set); }
  static uint64_t payload_slot(int set) { return gloo::Slot::build(kHeaderSlotPrefix, 2 + set); }

  CallBuffers& call_buffers(const std::shared_ptr<gloo::Context>& ctx) STRATA_REQUIRES(call_mu) {
    if (buffers == nullptr) {
      auto b = std::make_unique<CallBuffers>();
      b->inline_bytes = internal::inline_capacity(size);
      b->slot_bytes = kHeaderBytes + b->inline_bytes;
      b->out = std::make_unique_for_overwrite<char[]>(b->slot_bytes * size);
      b->send_header = ctx->createUnboundBuffer(b->out.get(), b->slot_bytes * size);
      // Gloo's TCP pair fails the pending operations of a connection that
      // breaks, but not the receive it is in the middle of: a peer that dies
      // while sending a payload would leave this rank waiting out its timeout.
      // A receive that never completes (no rank sends on its slot) keeps every
      // receiving buffer on every connection's pending list, so they are failed.
      const uint64_t sentinel = gloo::Slot::build(kHeaderSlotPrefix, 4);
      for (int set = 0; set < 2; ++set) {
        b->header_in[set] = std::make_unique_for_overwrite<char[]>(b->slot_bytes * size);
        b->payload_in[set] = std::make_unique_for_overwrite<std::byte[]>(capacity * size);
        b->recv_header[set] =
            ctx->createUnboundBuffer(b->header_in[set].get(), b->slot_bytes * size);
        b->recv_payload[set] = ctx->createUnboundBuffer(b->payload_in[set].get(), capacity * size);
        b->header_posted[set].assign(size, 0);
        b->payload_posted[set].assign(size, 0);
        for (int p = 0; p < size; ++p) {
          if (p == rank) continue;
          b->recv_header[set]->recv(p, sentinel, p * b->slot_bytes, 1);
          b->recv_payload[set]->recv(p, sentinel, p * capacity, 1);
        }
      }
      {
        MutexLock lock(mu);
        b->headers_direct = direct != nullptr;
      }
      buffers = std::move(b);
    }
    return *buffers;
  }

  // Posts every receive of both sets that is not pending: those the last
  // exchange took (its set serves the call after next: a peer can send on it
  // only once it has the next call's header, which follows these receives'
  // readiness notices on the same connection, and which this rank sends only
  // once it is done with the areas). Called at the end of every exchange, and
  // at the start of one for the first call.
  void post_receives(CallBuffers& b) STRATA_REQUIRES(call_mu) {
    for (int set = 0; set < 2; ++set) {
      for (int p = 0; p < size; ++p) {
        if (p == rank) continue;
        if (!b.header_posted[set][p] && !b.headers_direct) {
          b.recv_header[set]->recv(p, header_slot(set), p * b.slot_bytes, b.slot_bytes);
          b.header_posted[set][p] = 1;
        }
        if (!b.payload_posted[set][p]) {
          b.recv_payload[set]->recv(p, payload_slot(set), p * capacity, capacity);
          b.payload_posted[set][p] = 1;
        }
      }
    }
  }

  // Sends this rank's header (and payload, when attached) to every peer and
  // receives theirs: the headers (with the payloads that fit them) over the
  // direct mesh, larger payloads over Gloo. Names the ranks that never
  // arrived when the deadline passes.
  Exchange exchange(const std::shared_ptr<gloo::Context>& ctx, const CallHeader& mine,
                    const Payload& payload, Clock::time_point deadline) STRATA_REQUIRES(call_mu) {
    Exchange ex;
    ex.payloads.assign(size, nullptr);
    if (mine.attached) ex.payloads[rank] = payload.block(rank);
    if (size == 1) {
      ex.headers.push_back(mine);
      return ex;
    }
    std::shared_ptr<internal::DirectMesh> mesh;
    {
      MutexLock lock(mu);
      mesh = direct;
    }
    CallBuffers& b = call_buffers(ctx);
    const int set = static_cast<int>(mine.call % 2);
    post_receives(b);
    const bool inline_payload = mine.attached && mine.payload_bytes <= b.inline_bytes;
    const size_t message_bytes = kHeaderBytes + (inline_payload ? mine.payload_bytes : 0);
    // One message for every peer, or one per peer when their inline payloads differ.
    const bool distinct = payload.per_peer && inline_payload;
    auto message_at = [&](int p) { return distinct ? p * b.slot_bytes : 0; };
    for (int p = 0; p < size; ++p) {
      if (distinct ? p == rank : p > 0) continue;
      char* m = b.out.get() + message_at(p);
      internal::encode_call_header(mine, m);
      if (inline_payload) std::memcpy(m + kHeaderBytes, payload.block(p), mine.payload_bytes);
    }
    std::unique_ptr<gloo::transport::UnboundBuffer> send_payload;
    if (mine.attached && !inline_payload) {
      send_payload = ctx->createUnboundBuffer(const_cast<void*>(payload.data),
                                              payload.bytes * (payload.per_peer ? size : 1));
    }
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      if (mesh == nullptr) b.send_header->send(p, header_slot(set), message_at(p), message_bytes);
      if (send_payload) {
        send_payload->send(p, payload_slot(set), payload.per_peer ? p * payload.bytes : 0,
                           payload.bytes);
      }
    }
    if (mesh != nullptr) {
      const internal::DirectMesh::Outcome out = mesh->exchange(
          [&](int p) { return std::string_view(b.out.get() + message_at(p), message_bytes); },
          b.header_in[set].get(), b.slot_bytes, deadline);
      if (out.status != internal::DirectMesh::Status::kDone) {
        {
          MutexLock lock(mu);
          if (failed) throw_error(failure_code, failure);
        }
        STRATA_CHECK(ABORTED, out.status != internal::DirectMesh::Status::kAborted, kWho,
                     ": collective #", mine.call, " ", mine.description, ": aborted");
        const bool timed_out = out.status == internal::DirectMesh::Status::kTimeout;
        header_exchange_failed(mine, out.arrived, timed_out,
                               timed_out ? std::string("timed out")
                                         : str_cat("the connection to ", reports.name(out.lost),
                                                   " failed: ", out.why));
      }
    } else {
      std::vector<char> arrived(size, 0);
      arrived[rank] = 1;
      for (int k = 0; k < size - 1; ++k) {
        int src = -1;
        try {
          b.recv_header[set]->waitRecv(&src, remaining(deadline));
        } catch (const gloo::Exception& err) {
          {
            MutexLock lock(mu);
            if (failed) throw_error(failure_code, failure);
          }
          const std::string m = err.what();
          header_exchange_failed(
              mine, arrived, m.find("imed out") != std::string::npos || Clock::now() >= deadline,
              internal::with_host_order_ports(m));
        }
        // (Gloo reports the rank of the latest completion, not of the one this
        // wait took: good enough to name the missing ranks, not to count.)
        if (src >= 0 && src < size) arrived[src] = 1;
      }
      std::fill(b.header_posted[set].begin(), b.header_posted[set].end(), 0);
    }
    ex.headers.resize(size);
    ex.headers[rank] = mine;
    int separate = 0;  // peers whose payload follows on the payload slot
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      const char* m = b.header_in[set].get() + r * b.slot_bytes;
      ex.headers[r] = internal::decode_call_header(m, r);
      const CallHeader& h = ex.headers[r];
      if (!h.attached) continue;
      STRATA_CHECK(DATA_LOSS, h.payload_bytes <= capacity, kWho, ": corrupt call header from rank ",
                   r, " (payload of ", h.payload_bytes, " bytes)");
      if (h.payload_bytes <= b.inline_bytes) {
        ex.payloads[r] = reinterpret_cast<const std::byte*>(m + kHeaderBytes);
      } else {
        ex.payloads[r] = b.payload_in[set].get() + r * capacity;
        ++separate;
      }
    }
    // A payload too large for the header message follows it on Gloo's
    // connection. A peer that found a difference may fail (resetting its
    // connections) before it arrives: every header is here, so report the difference.
    try {
      for (int k = 0; k < separate; ++k)
        b.recv_payload[set]->waitRecv(nullptr, remaining(deadline));
      for (int r = 0; r < size; ++r) {
        if (ex.payloads[r] != nullptr && r != rank && ex.headers[r].payload_bytes > b.inline_bytes)
          b.payload_posted[set][r] = 0;
      }
      for (int k = 0; k < size - 1; ++k) {
        if (mesh == nullptr) b.send_header->waitSend(remaining(deadline));
        if (send_payload) send_payload->waitSend(remaining(deadline));
      }
    } catch (const gloo::Exception&) {
      check_schedules(mine, ex.headers);
      throw;
    }
    // The next call's receives now, off the path of its first message: no
    // peer can send on this set again before it has the next call's header.
    // A peer that left after its last call has closed its connection: that
    // fails the next call (which posts again), not this one.
    try {
      post_receives(b);
    } catch (const gloo::Exception&) {
    }
    return ex;
  }

  // The header exchange of collective `mine` ended before every header
  // arrived (`arrived`, per rank): at the deadline (`timed_out`), or because
  // a connection failed (`message` says how). Throws the verdict.
  [[noreturn]] void header_exchange_failed(const CallHeader& mine, const std::vector<char>& arrived,
                                           bool timed_out, const std::string& message) {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r) {
      if (!arrived[r]) missing.push_back(r);
    }
    const std::string collective =
        str_cat(kWho, ": collective #", mine.call, " ", mine.description);
    const std::string key = call_key("not_entered", mine.call);
    if (timed_out) {
      // The same verdict on every rank that waited (each saw the others'
      // headers arrive), then who reports it. Recorded for the peers whose
      // connections to this rank the timeout closes (peer_record).
      // The record: the missing ranks' names, a newline, what they were
      // last heard doing (names hold no newline).
      // Both store calls share one report's bound (the store's host may
      // be the rank that is missing, stopped).
      const Clock::time_point until = Clock::now() + reports.store_timeout();
      const std::string verdict =
          str_cat(reports.names(missing), "\n", reports.last_heard(missing, until));
      reports.leave_record(key, verdict, until);
      fail_not_entered(collective, verdict);
    }
    if (auto theirs = reports.peer_record({key, mismatch_key()})) {
      if (theirs->key == 0) fail_not_entered(collective, theirs->value);
      const size_t space = theirs->value.find(' ');
      fail_schedules_differ(mine.call, mine.description, theirs->rank,
                            std::stoull(theirs->value.substr(0, space)),
                            theirs->value.substr(space + 1));
    }
    fail(ErrorCode::UNAVAILABLE,
         str_cat(collective, ": ", reports.name(rank), " lost its connection while waiting for ",
                 reports.names(missing), " to enter it: ", message));
  }

  // Runs one call: header exchange, mismatch check, validation, then
  // data(ctx, headers, deadline).
  // `payload` is attached when it fits the peers' receive areas.
  template <typename Data>
  auto run(int r, const CallSignature& sig, int64_t dim0, const Payload& payload, Data&& data) {
    STRATA_CHECK_ARG(r == rank, kWho, ": this process is rank ", rank, " of ", size,
                     ", got a call for rank ", r);
    MutexLock call_lock(call_mu);
    const Clock::time_point deadline = Clock::now() + options.timeout;
    std::shared_ptr<gloo::Context> ctx;
    {
      MutexLock lock(mu);
      if (failed) throw_error(failure_code, failure);
      ctx = context;
    }
    const uint64_t call = ++calls;
    const uint64_t hash = fingerprint(sig);
    if (described.empty() || hash != described_hash || dim0 != described_dim0) {
      described = str_cat(sig.to_string(), " on ", reports.group());
      described_hash = hash;
      described_dim0 = dim0;
    }
    const std::string& description = described;
    try {
      const bool attach = payload.data != nullptr && payload.bytes > 0 &&
                          payload.bytes <= capacity && !options.before_data_for_testing;
      CallHeader mine{.kind = sig.kind,
                      .call = call,
                      .hash = hash,
                      .dim0 = dim0,
                      .attached = attach,
                      .payload_bytes = attach ? payload.bytes : 0,
                      .description = description};
      const Exchange ex = exchange(ctx, mine, payload, deadline);
      // Every rank holds every header, so every rank finds a difference if
      // there is one (each names itself and the first rank that differs).
      check_schedules(mine, ex.headers);
      sig.validate(kWho, size);
      if (options.before_data_for_testing) options.before_data_for_testing(call);
      // Noted once the data moved (a throwing call is not completed).
      struct NoteCompleted {
        GlooState& state;
        uint64_t call;
        const std::string& description;
        const int exceptions = std::uncaught_exceptions();
        ~NoteCompleted() {
          if (std::uncaught_exceptions() == exceptions) state.note_completed(call, description);
        }
      } note{*this, call, description};
      return data(ctx, ex, deadline);
    } catch (const gloo::EnforceNotMet& err) {
      fail_from_gloo(description, call, err.what());
    } catch (const gloo::Exception& err) {
      fail_from_gloo(description, call, err.what());
    }
  }

  // Publishes progress while the group lives (started after the rendezvous,
  // joined by stop_progress before anything it reads goes).
  std::thread progress_thread;

  // Element i of a call of n elements over `size` ranks belongs to block p
  // when block_begin(p) <= i < block_begin(p + 1) (equal blocks when size divides n).
  int64_t block_begin(int64_t n, int p) const {
    return n / size * p + std::min<int64_t>(n % size, p);
  }

  // Reduce-scatter by direct exchange (size > 1): every rank sends block p of
  // its `n` input elements to rank p and reduces its own block from all
  // ranks' blocks in rank order (the same order as the small calls' local
  // reduction), segment by segment as they arrive, into `out`, which holds
  // this rank's block. With `gather` (all_reduce), `out` holds all n elements:
  // this rank's block goes to its place, each reduced segment goes on to
  // every peer, and the peers' reduced blocks land in their places. Every
  // rank sends and receives (size - 1) / size of the data per phase, as in a
  // ring, and every receive is posted before the data is sent, so nothing
  // waits for a readiness notice after the first segment. Waits end by the
  // deadline; buffers come from the context, so abort() interrupts them.
  void exchange_reduce(const std::shared_ptr<gloo::Context>& ctx, DType dtype, ReduceOp op,
                       const void* in, void* out, int64_t n, bool gather,
                       Clock::time_point deadline) {
    const size_t esize = dtype_size(dtype);
    const int64_t mine = block_begin(n, rank);
    const int64_t len = block_begin(n, rank + 1) - mine;
    auto* own = static_cast<std::byte*>(out) + (gather ? mine * esize : 0);
    const int64_t seg = std::max<int64_t>(1, static_cast<int64_t>(kSegmentBytes / esize));
    auto segments = [seg](int64_t elements) { return (elements + seg - 1) / seg; };
    const uint64_t reduce_slot = gloo::Slot::build(kBlockSlotPrefix, 0);
    const uint64_t gather_slot = gloo::Slot::build(kBlockSlotPrefix, 1);
    // Two ranks reduce in place in `own`; more receive into a scratch block per peer.
    std::shared_ptr<Buffer> scratch;
    if (size > 2 && len > 0) {
      scratch = internal::BufferPool::get(pool, dtype, len * (size - 1));
    }
    auto landing = [&](int p) {
      if (size == 2) return own;
      const int index = p < rank ? p : p - 1;
      return static_cast<std::byte*>(scratch->data()) + index * len * esize;
    };
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> from(size), gathered(size);
    for (int p = 0; p < size; ++p) {
      if (p == rank) continue;
      if (len > 0) {
        from[p] = ctx->createUnboundBuffer(landing(p), len * esize);
        for (int64_t j = 0; j < segments(len); ++j) {
          from[p]->recv(p, reduce_slot, j * seg * esize, std::min(seg, len - j * seg) * esize);
        }
      }
      const int64_t theirs = block_begin(n, p + 1) - block_begin(n, p);
      if (gather && theirs > 0) {
        gathered[p] = ctx->createUnboundBuffer(
            static_cast<std::byte*>(out) + block_begin(n, p) * esize, theirs * esize);
        for (int64_t j = 0; j < segments(theirs); ++j) {
          gathered[p]->recv(p, gather_slot, j * seg * esize,
                            std::min(seg, theirs - j * seg) * esize);
        }
      }
    }
    auto input = ctx->createUnboundBuffer(const_cast<void*>(in), n * esize);
    int64_t input_sends = 0;
    for (int64_t j = 0;; ++j) {
      bool any = false;
      for (int k = 1; k < size; ++k) {
        const int p = (rank + k) % size;
        const int64_t begin = block_begin(n, p), theirs = block_begin(n, p + 1) - begin;
        if (j * seg >= theirs) continue;
        any = true;
        input->send(p, reduce_slot, (begin + j * seg) * esize,
                    std::min(seg, theirs - j * seg) * esize);
        ++input_sends;
      }
      if (!any) break;
    }
    std::unique_ptr<gloo::transport::UnboundBuffer> result;
    if (gather && len > 0) result = ctx->createUnboundBuffer(own, len * esize);
    const auto* my_input = static_cast<const std::byte*>(in) + mine * esize;
    std::vector<const void*> ins(size);
    for (int64_t j = 0; j < segments(len); ++j) {
      const int64_t at = j * seg, count = std::min(seg, len - at);
      for (int p = 0; p < size; ++p) {
        if (p != rank) from[p]->waitRecv(nullptr, remaining(deadline));
      }
      std::byte* o = own + at * esize;
      if (size == 2) {
        // In place, in rank order: the peer's segment is already in `o`.
        if (rank == 0) {
          internal::reduce_pair(dtype, op, o, my_input + at * esize, o, count);
        } else {
          internal::reduce_pair(dtype, op, o, o, my_input + at * esize, count);
        }
        if (op == ReduceOp::MEAN) internal::divide_in_place(dtype, o, count, size);
      } else {
        for (int p = 0; p < size; ++p) {
          ins[p] = p == rank ? my_input + at * esize : landing(p) + at * esize;
        }
        internal::reduce_n(dtype, op, o, ins, count, size);
      }
      if (result) {
        for (int k = 1; k < size; ++k) {
          result->send((rank + k) % size, gather_slot, at * esize, count * esize);
        }
      }
    }
    for (int p = 0; p < size; ++p) {
      if (gathered[p] == nullptr) continue;
      const int64_t theirs = block_begin(n, p + 1) - block_begin(n, p);
      for (int64_t j = 0; j < segments(theirs); ++j) {
        gathered[p]->waitRecv(nullptr, remaining(deadline));
      }
    }
    for (int64_t k = 0; k < input_sends; ++k) input->waitSend(nullptr, remaining(deadline));
    if (result) {
      for (int64_t k = 0; k < segments(len) * (size - 1); ++k) {
        result->waitSend(nullptr, remaining(deadline));
      }
    }
  }

  // Element-wise all-reduce of `n` elements from `in` into `out` (distinct buffers).
  void allreduce_buffer(const std::shared_ptr<gloo::Context>& ctx, DType dtype, ReduceOp op,
                        const void* in, void* out, int64_t n, Clock::time_point deadline) {
    if (n == 0) return;
    if (size == 1) {
      std::memcpy(out, in, n * dtype_size(dtype));
      return;
    }
    exchange_reduce(ctx, dtype, op, in, out, n, /*gather=*/true, deadline);
  }
};

namespace {
// Gloo writes to its sockets with plain write(2): a peer that closed its end
// (a dead worker, an abort) would raise SIGPIPE and kill the whole process
// instead of failing the collective with EPIPE. Ignore SIGPIPE unless the
// program installed its own handler (documented in the header).
void ignore_sigpipe_once() {
  static const bool done = [] {
    struct sigaction current {};
    if (::sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      std::signal(SIGPIPE, SIG_IGN);
    }
    return true;
  }();
  (void)done;
}
}  // namespace

GlooCollectives::GlooCollectives(int rank, int size, std::shared_ptr<Store> store,
                                 GlooOptions options) {
  ignore_sigpipe_once();
  STRATA_CHECK_ARG(size >= 1, kWho, ": expected size >= 1, got ", size);
  STRATA_CHECK_ARG(rank >= 0 && rank < size, kWho, ": expected a rank in [0, ", size, "), got ",
                   rank);
  STRATA_CHECK_ARG(store != nullptr, kWho, ": expected a Store, got nullptr");
  STRATA_CHECK_ARG(options.timeout.count() > 0, kWho, ": expected GlooOptions.timeout > 0, got ",
                   options.timeout.count(), "ms");
  STRATA_CHECK_ARG(options.rendezvous_timeout.count() >= 0, kWho,
                   ": expected GlooOptions.rendezvous_timeout >= 0, got ",
                   options.rendezvous_timeout.count(), "ms");
  STRATA_CHECK_ARG(options.rank_names.empty() || options.rank_names.size() == size_t(size), kWho,
                   ": expected GlooOptions.rank_names to name all ", size, " ranks, got ",
                   options.rank_names.size(), " names");
  state_ = std::make_unique<internal::GlooState>(rank, size, std::move(store), std::move(options));
  internal::GlooState& s = *state_;
  gloo::transport::tcp::attr attr;
  if (!s.options.iface.empty()) {
    attr.iface = s.options.iface;
  } else {
    attr.hostname = s.options.hostname;
  }
  try {
    s.device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& err) {
    throw UnavailableError(str_cat(
        kWho, " ", s.reports.me(), ": cannot listen on ",
        s.options.iface.empty() ? "host " + s.options.hostname : "interface " + s.options.iface,
        ": ", internal::with_host_order_ports(err.what())));
  }
  {
    MutexLock call_lock(s.call_mu);
    s.connect();
  }
  if (s.options.progress_interval.count() > 0 && size > 1) {
    s.progress_thread = std::thread([&s] { s.publish_progress_until_stopped(); });
  }
}

// A graceful close: the buffers go first (each holds the transport context),
// then the context, whose connections close with a FIN after everything this
// rank wrote, so a peer that is still finishing the last call receives it.
// (Gloo's device thread reaches a destroyed buffer only through weak
// references that the buffer's destructor waits out.)
GlooCollectives::~GlooCollectives() {
  if (state_ == nullptr) return;
  state_->stop_progress();
  // No call can be in progress here; call_mu is free, taken because it guards the buffers.
  MutexLock call_lock(state_->call_mu);
  MutexLock lock(state_->mu);
  state_->buffers.reset();
  state_->context.reset();  // before the device goes
}

int GlooCollectives::rank() const { return state_->rank; }
int GlooCollectives::size() const { return state_->size; }

namespace {

// One dtype's share of an all_reduce list: its tensors packed in list order.
struct PackGroup {
  DType dtype;
  int64_t total = 0;          // elements
  size_t payload_offset = 0;  // bytes into the packed payload
  std::vector<size_t> members = {};
  std::shared_ptr<Buffer> buffer = nullptr;  // the result
};

size_t align_up(size_t bytes) { return (bytes + 63) / 64 * 64; }

// True when every tensor is defined and of a dtype `reducible` accepts.
template <typename Pred>
bool all_defined(std::span<const Tensor> tensors, Pred&& ok) {
  return std::all_of(tensors.begin(), tensors.end(),
                     [&](const Tensor& t) { return t.defined() && ok(t.dtype()); });
}

using GlooExchange = internal::GlooState::Exchange;

}  // namespace

std::vector<Tensor> GlooCollectives::all_reduce(int rank, const std::vector<Tensor>& tensors,
                                                ReduceOp op) {
  internal::GlooState& s = *state_;
  const auto sig = CallSignature::of(CollectiveKind::all_reduce, op, -1, tensors);
  // Pack per dtype (in list order). Invalid lists fail validation on every
  // rank after the header exchange, before any of this is used.
  std::vector<PackGroup> groups;
  std::vector<std::pair<size_t, int64_t>> where(tensors.size());  // group, offset
  const bool valid = all_defined(tensors, internal::is_reducible);
  size_t payload_bytes = 0;
  if (valid) {
    for (size_t t = 0; t < tensors.size(); ++t) {
      const DType d = tensors[t].dtype();
      auto it = std::find_if(groups.begin(), groups.end(),
                             [d](const PackGroup& g) { return g.dtype == d; });
      if (it == groups.end()) {
        groups.push_back(PackGroup{.dtype = d});
        it = groups.end() - 1;
      }
      where[t] = {static_cast<size_t>(it - groups.begin()), it->total};
      it->total += tensors[t].num_elements();
      it->members.push_back(t);
    }
    for (PackGroup& g : groups) {
      g.payload_offset = payload_bytes;
      payload_bytes += align_up(g.total * dtype_size(g.dtype));
    }
  }
  // A small call sends its data with the header: one buffer of every group
  // (the input itself when it is a single tensor).
  Payload payload;
  std::shared_ptr<Buffer> staging;
  if (s.size > 1 && valid && payload_bytes > 0 && payload_bytes <= s.capacity) {
    if (tensors.size() == 1) {
      payload = {tensors[0].raw_data(), tensors[0].size_bytes()};
    } else {
      staging =
          internal::BufferPool::get(s.pool, DType::int64, static_cast<int64_t>(payload_bytes / 8));
      auto* base = reinterpret_cast<std::byte*>(staging->data());
      for (size_t t = 0; t < tensors.size(); ++t) {
        const PackGroup& g = groups[where[t].first];
        if (tensors[t].size_bytes() > 0) {
          std::memcpy(base + g.payload_offset + where[t].second * dtype_size(g.dtype),
                      tensors[t].raw_data(), tensors[t].size_bytes());
        }
      }
      payload = {staging->data(), payload_bytes};
    }
  }
  return s.run(
      rank, sig, 0, payload,
      [&](const std::shared_ptr<gloo::Context>& ctx, const GlooExchange& ex,
          Clock::time_point deadline) {
        if (ex.all_attached()) {
          // Every rank holds every rank's data: reduce locally, in rank order
          // (the same result bit for bit on every rank).
          std::vector<const void*> ins(s.size);
          for (PackGroup& g : groups) {
            g.buffer = internal::BufferPool::get(s.pool, g.dtype, g.total);
            for (int r = 0; r < s.size; ++r) ins[r] = ex.payloads[r] + g.payload_offset;
            internal::reduce_n(g.dtype, op, g.buffer->data(), ins, g.total, s.size);
          }
        } else {
          // A dtype with a single tensor is reduced straight from the input.
          for (PackGroup& g : groups) {
            g.buffer = internal::BufferPool::get(s.pool, g.dtype, g.total);
            auto* out = reinterpret_cast<std::byte*>(g.buffer->data());
            if (g.members.size() == 1) {
              s.allreduce_buffer(ctx, g.dtype, op, tensors[g.members[0]].raw_data(), out, g.total,
                                 deadline);
              continue;
            }
            const size_t esize = dtype_size(g.dtype);
            auto packed = internal::BufferPool::get(s.pool, g.dtype, g.total);
            auto* in = reinterpret_cast<std::byte*>(packed->data());
            for (size_t t : g.members) {
              const Tensor& x = tensors[t];
              if (x.size_bytes() > 0)
                std::memcpy(in + where[t].second * esize, x.raw_data(), x.size_bytes());
            }
            s.allreduce_buffer(ctx, g.dtype, op, in, out, g.total, deadline);
          }
        }
        std::vector<Tensor> result;
        result.reserve(tensors.size());
        for (size_t t = 0; t < tensors.size(); ++t) {
          result.push_back(Tensor::from_buffer(groups[where[t].first].buffer, tensors[t].shape(),
                                               where[t].second, &tensors[t].placement()));
        }
        return result;
      });
}

Tensor GlooCollectives::all_gather(int rank, const Tensor& tensor) {
  internal::GlooState& s = *state_;
  const auto sig = CallSignature::of(CollectiveKind::all_gather, ReduceOp::SUM, -1, {&tensor, 1});
  const bool valid = all_defined({&tensor, 1}, is_numeric) && tensor.rank() >= 1;
  const int64_t dim0 = valid ? tensor.shape().dim(0) : 0;
  Payload payload;
  if (s.size > 1 && valid) payload = {tensor.raw_data(), tensor.size_bytes()};
  return s.run(
      rank, sig, dim0, payload,
      [&](const std::shared_ptr<gloo::Context>& ctx, const GlooExchange& ex,
          Clock::time_point deadline) {
        const int64_t row = tensor.shape().removed(0).num_elements();
        std::vector<size_t> counts(s.size);
        int64_t rows = 0;
        for (int r = 0; r < s.size; ++r) {
          const CallHeader& h = ex.headers[r];
          STRATA_CHECK(DATA_LOSS, h.dim0 >= 0, kWho, ": corrupt dim0 from rank ", r);
          counts[r] = static_cast<size_t>(h.dim0 * row);
          STRATA_CHECK(DATA_LOSS,
                       !h.attached || h.payload_bytes == counts[r] * dtype_size(tensor.dtype()),
                       kWho, ": corrupt payload length from rank ", r);
          rows += h.dim0;
        }
        const TensorShape shape = tensor.shape().with_dim(0, rows);
        auto buffer = internal::BufferPool::get(s.pool, tensor.dtype(), shape.num_elements());
        if (shape.num_elements() > 0) {
          if (s.size == 1) {
            std::memcpy(buffer->data(), tensor.raw_data(), tensor.size_bytes());
          } else if (ex.all_attached()) {
            auto* out = reinterpret_cast<std::byte*>(buffer->data());
            for (int r = 0; r < s.size; ++r) {
              const size_t bytes = counts[r] * dtype_size(tensor.dtype());
              std::memcpy(out, ex.payloads[r], bytes);
              out += bytes;
            }
          } else {
            with_type(tensor.dtype(), [&](auto* typed) {
              using T = std::remove_pointer_t<decltype(typed)>;
              gloo::AllgathervOptions opts(ctx);
              opts.setInput(const_cast<T*>(static_cast<const T*>(tensor.raw_data())),
                            counts[s.rank]);
              opts.setOutput(reinterpret_cast<T*>(buffer->data()), counts);
              opts.setTimeout(remaining(deadline));
              gloo::allgatherv(opts);
            });
          }
        }
        return Tensor::from_buffer(buffer, shape, 0, &tensor.placement());
      });
}

Tensor GlooCollectives::reduce_scatter(int rank, const Tensor& tensor, ReduceOp op) {
  internal::GlooState& s = *state_;
  const auto sig = CallSignature::of(CollectiveKind::reduce_scatter, op, -1, {&tensor, 1});
  // Peer p receives only block p of this rank's input: with the header when
  // the block fits the receive area, else by exchange_reduce after the headers.
  const bool valid = all_defined({&tensor, 1}, internal::is_reducible) && tensor.rank() >= 1 &&
                     tensor.shape().dim(0) % s.size == 0;
  Payload payload;
  if (s.size > 1 && valid && tensor.num_elements() > 0) {
    payload = {.data = tensor.raw_data(), .bytes = tensor.size_bytes() / s.size, .per_peer = true};
  }
  return s.run(rank, sig, 0, payload,
               [&](const std::shared_ptr<gloo::Context>& ctx, const GlooExchange& ex,
                   Clock::time_point deadline) {
                 const int64_t rows = tensor.shape().dim(0) / s.size;
                 const int64_t block = tensor.num_elements() / s.size;
                 const TensorShape shape = tensor.shape().with_dim(0, rows);
                 auto buffer = internal::BufferPool::get(s.pool, tensor.dtype(), block);
                 if (block == 0) return Tensor::from_buffer(buffer, shape, 0, &tensor.placement());
                 if (s.size == 1) {
                   std::memcpy(buffer->data(), tensor.raw_data(), tensor.size_bytes());
                 } else if (ex.all_attached()) {
                   // Every rank's block of this rank arrived with the headers.
                   std::vector<const void*> ins(ex.payloads.begin(), ex.payloads.end());
                   internal::reduce_n(tensor.dtype(), op, buffer->data(), ins, block, s.size);
                 } else {
                   s.exchange_reduce(ctx, tensor.dtype(), op, tensor.raw_data(), buffer->data(),
                                     tensor.num_elements(), /*gather=*/false, deadline);
                 }
                 return Tensor::from_buffer(buffer, shape, 0, &tensor.placement());
               });
}

Tensor GlooCollectives::broadcast(int rank, const Tensor& tensor, int root) {
  internal::GlooState& s = *state_;
  const auto sig = CallSignature::of(CollectiveKind::broadcast, ReduceOp::SUM, root, {&tensor, 1});
  Payload payload;
  if (s.size > 1 && rank == root && all_defined({&tensor, 1}, is_numeric)) {
    payload = {tensor.raw_data(), tensor.size_bytes()};
  }
  return s.run(rank, sig, 0, payload,
               [&](const std::shared_ptr<gloo::Context>& ctx, const GlooExchange& ex,
                   Clock::time_point deadline) {
                 auto buffer =
                     internal::BufferPool::get(s.pool, tensor.dtype(), tensor.num_elements());
                 const int64_t n = tensor.num_elements();
                 if (n > 0) {
                   if (s.size == 1) {
                     std::memcpy(buffer->data(), tensor.raw_data(), tensor.size_bytes());
                   } else if (ex.payloads[root] != nullptr) {  // the root sent it with its header
                     std::memcpy(buffer->data(), ex.payloads[root], tensor.size_bytes());
                   } else {
                     with_type(tensor.dtype(), [&](auto* typed) {
                       using T = std::remove_pointer_t<decltype(typed)>;
                       gloo::BroadcastOptions opts(ctx);
                       if (s.rank == root)
                         opts.setInput(const_cast<T*>(static_cast<const T*>(tensor.raw_data())), n);
                       opts.setOutput(reinterpret_cast<T*>(buffer->data()), n);
                       opts.setRoot(root);
                       opts.setTimeout(remaining(deadline));
                       gloo::broadcast(opts);
                     });
                   }
                 }
                 return Tensor::from_buffer(buffer, tensor.shape(), 0, &tensor.placement());
               });
}

void GlooCollectives::barrier(int rank) {
  // The header exchange is an all-to-all: nobody leaves before everybody came.
  const auto sig = CallSignature::of(CollectiveKind::barrier, ReduceOp::SUM, -1, {});
  state_->run(rank, sig, 0, Payload{},
              [](const std::shared_ptr<gloo::Context>&, const GlooExchange&, Clock::time_point) {
                return 0;
              });
}

void GlooCollectives::set_activity(std::function<std::string()> activity) {
  MutexLock lock(state_->progress_mu);
  state_->activity = std::move(activity);
}

void GlooCollectives::abort(const std::string& reason) {
  internal::GlooState& s = *state_;
  MutexLock lock(s.mu);
  if (!s.failed) {
    s.failed = true;
    s.failure_code = ErrorCode::ABORTED;
    s.failure = reason;
  }
  s.abort_pairs_locked();
}

void GlooCollectives::reset() {
  internal::GlooState& s = *state_;
  STRATA_CHECK(FAILED_PRECONDITION, s.call_mu.try_lock(), kWho,
               "::reset: expected no call in progress on ", s.reports.me());
  internal::AdoptedLock call_lock(s.call_mu);
  std::shared_ptr<MeshContext> old;
  std::shared_ptr<internal::DirectMesh> old_direct;
  {
    MutexLock lock(s.mu);
    old = std::move(s.context);
    old_direct = std::move(s.direct);
    s.failed = false;
    s.failure_code = ErrorCode::OK;
    s.failure.clear();
    ++s.epoch;
  }
  s.buffers.reset();  // registered with the old context
  old.reset();        // a graceful close, as in the destructor
  old_direct.reset();
  s.calls = 0;
  try {
    s.connect();
  } catch (const Error& err) {
    MutexLock lock(s.mu);
    if (!s.failed) {
      s.failed = true;
      s.failure_code = err.code();
      s.failure = err.what();
    }
    throw;
  }
}

}  // namespace strata::collective

#if defined(__SANITIZE_THREAD__)
// Gloo's tcp::UnboundBuffer hands its device thread weak references to itself
// (gloo/common/memory.h): the device thread locks one into a shared_ptr while
// it completes a send or receive, and the buffer's destructor spins until
// every such shared_ptr is gone before the control block is freed. The
// ordering that makes this safe is the control block's atomic weak count:
// the device thread decrements it after its last read of the block, and the
// destroying thread frees the block only after its own decrement took the
// count to zero. The destroying thread's decrement and free run inside
// libgloo's ~UnboundBuffer, which is not instrumented, so TSan sees the free
// (operator delete is intercepted) without the acquire before it and reports
// a race against the device thread's read in _M_release_last_use (the
// above-limit all-reduce path, ~AbortableBuffer). The same holds when the
// device thread signals a connection error to a buffer (it holds the weak
// reference locked while it takes the buffer's mutex) as ~AbortableBuffer
// frees Gloo's buffer: the free shows up with only ~AbortableBuffer on the
// stack. The connection watch's buffer (~ConnectionWatch) is freed the same
// way. The suppressions match only reports with Gloo's ~UnboundBuffer,
// ~AbortableBuffer (which frees nothing but Gloo's buffer; the registry it
// leaves is mutex-guarded) or ~ConnectionWatch (which frees nothing else) on a
// stack; races on Strata's payload memory are still reported.
extern "C" __attribute__((weak)) const char* __tsan_default_suppressions() {
  return "race:gloo::transport::tcp::UnboundBuffer::~UnboundBuffer\n"
         "race:~AbortableBuffer\n"
         "race:~ConnectionWatch\n";
}
#endif
