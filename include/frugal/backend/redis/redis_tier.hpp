#pragma once
/// @file
/// redis_tier: a cache tier on a Redis server (over hiredis) that several engine processes
/// share: pipelined batches, timeouts, reconnection with backoff, and the server's own
/// eviction respected (a vanished key is a miss).

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <hiredis.h>

#include "frugal/cache/tier.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/record_frame.hpp"

namespace frugal::cache {

/// Where the server is and how long to wait for it.
struct redis_options {
    std::string host = "127.0.0.1";
    int port = 6379;
    std::chrono::milliseconds timeout{500};       ///< connect, and each read or write of a batch
    std::chrono::milliseconds max_backoff{2000};  ///< longest wait before reconnecting after a failure
    std::size_t pipeline = 64;                    ///< commands sent before their replies are read
    std::string prefix = "frugal";                ///< first part of every key
};

/// A cache tier on a Redis server. Each value is one framed record (magic, version,
/// namespace, key, length, payload, checksum) stored with one SET, so an entry is whole or
/// absent; a get checks the frame, and a truncated, corrupt or foreign value is a miss
/// (counted as refused), never wrong data. Keys are
/// `<prefix>:<namespace id>:{<chunk key>}`: the hash tag is the chunk key, so on a Redis
/// Cluster the chunks spread over the slots (this class talks to one server; a cluster
/// client sends each slot's keys to its node).
///
/// The server's memory policy decides what stays (run it with `maxmemory` and
/// `maxmemory-policy allkeys-lru`): a key it evicted is a miss. A server that cannot be
/// reached, times out or fails a batch drops the connection: `get` and `exists_prefix` then
/// return the run proven so far, `put` stores what it could (both counted in
/// `tier_stats::errors`), and the next call reconnects, after a backoff that doubles up to
/// `max_backoff` while the server stays away. Nothing blocks past the timeout.
///
/// One thread at a time per object (open one per thread).
/// @code
/// frugal::cache::redis_tier tier(ns, {.host = "10.0.0.5", .port = 6379});
/// tier.put(keys, pages);
/// std::size_t n = tier.get(keys, buffers);   // pages [0, n) loaded
/// @endcode
class redis_tier {
public:
    static constexpr std::array<char, 4> magic{'F', 'R', 'K', 'V'};
    static constexpr std::uint32_t version = 1;

    /// A tier of namespace `ns` on the server of `options`; connects now if it can (a
    /// server that is down is not an error: calls miss until it is back).
    explicit redis_tier(const tier_namespace& ns, redis_options options = {})
        : options_(std::move(options)), space_(ns.id()), key_prefix_(options_.prefix + ":" + hex(space_) + ":{") {
        FRUGAL_CHECK(options_.pipeline > 0, "redis_tier: pipeline must be > 0");
        FRUGAL_CHECK(options_.timeout.count() > 0, "redis_tier: timeout must be > 0 ms, got ", options_.timeout.count());
        FRUGAL_CHECK(options_.port > 0 && options_.port < 65536, "redis_tier: port ", options_.port, " out of range");
        (void)connected();
    }

    redis_tier(const redis_tier&) = delete;
    redis_tier& operator=(const redis_tier&) = delete;

    /// How many of `keys`, from the first, the server holds.
    [[nodiscard]] std::size_t exists_prefix(std::span<const tier_key> keys) {
        return run(keys, "EXISTS", [](const redisReply* r, std::size_t) {
            return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        });
    }

    /// Loads the longest run of `keys` from the first into `out` (out[i] exactly the size of
    /// key i's value); returns its length. A missing, resized, truncated, corrupt or foreign
    /// value ends the run.
    std::size_t get(std::span<const tier_key> keys, std::span<const std::span<std::byte>> out) {
        FRUGAL_CHECK(keys.size() == out.size(), "redis_tier::get: ", keys.size(), " keys but ", out.size(), " buffers");
        const std::size_t n = run(keys, "GET", [&](const redisReply* r, std::size_t i) {
            if (r->type != REDIS_REPLY_STRING) return false;
            const auto frame = std::as_bytes(std::span(r->str, r->len));
            const frame_status status = check_frame(frame, header_of(keys[i]), out[i].size());
            if (status != frame_status::whole) {
                stats_.refused += status != frame_status::other_length;  // another size: not for this buffer
                return false;
            }
            std::memcpy(out[i].data(), frame.data() + record_header::bytes, out[i].size());
            stats_.bytes_read += out[i].size();
            return true;
        });
        stats_.hits += n;
        stats_.misses += n < keys.size() ? 1 : 0;
        return n;
    }

    /// Stores `values[i]` under `keys[i]` unless the key exists (SET NX: a chunk's key names
    /// its content).
    void put(std::span<const tier_key> keys, std::span<const std::span<const std::byte>> values) {
        FRUGAL_CHECK(keys.size() == values.size(), "redis_tier::put: ", keys.size(), " keys but ", values.size(),
                     " values");
        for (std::size_t first = 0; first < keys.size(); first += options_.pipeline) {
            if (!connected()) {
                ++stats_.errors;
                return;
            }
            const std::size_t last = std::min(keys.size(), first + options_.pipeline);
            for (std::size_t i = first; i < last; ++i) {
                const std::string key = key_of(keys[i]);
                frame_ = frame_record(header_of(keys[i]), values[i]);
                redisAppendCommand(context_.get(), "SET %b %b NX", key.data(), key.size(), frame_.data(), frame_.size());
            }
            for (std::size_t i = first; i < last; ++i) {
                reply_ptr r = next_reply();
                if (!r || r->type == REDIS_REPLY_ERROR) return fail();
                if (r->type == REDIS_REPLY_STATUS) {  // OK: stored (nil: the key was there)
                    ++stats_.puts;
                    stats_.bytes_written += values[i].size();
                }
            }
        }
    }

    /// The value under `key`, of any size; nullopt when it is missing, truncated, corrupt or
    /// foreign, or the server cannot answer.
    [[nodiscard]] std::optional<std::string> read(const tier_key& key) {
        std::optional<std::string> value;
        const std::size_t found = run({&key, 1}, "GET", [&](const redisReply* r, std::size_t) {
            if (r->type != REDIS_REPLY_STRING) return false;
            const auto frame = std::as_bytes(std::span(r->str, r->len));
            if (check_frame(frame, header_of(key)) != frame_status::whole) {
                ++stats_.refused;
                return false;
            }
            value.emplace(r->str + record_header::bytes, r->len - record_header::bytes - record_header::checksum_bytes);
            stats_.bytes_read += value->size();
            return true;
        });
        stats_.hits += found;
        stats_.misses += 1 - found;
        return value;
    }

    /// The keys of the namespace on the server now (SCAN over `<prefix>:<namespace id>:{*`,
    /// so it walks the server's keys once; other processes' included). A server that fails
    /// midway gives the keys seen so far (counted in `tier_stats::errors`).
    [[nodiscard]] std::vector<tier_key> keys() {
        std::vector<tier_key> found;
        if (!connected()) {
            ++stats_.errors;
            return found;
        }
        const std::string pattern = key_prefix_ + "*";
        std::string cursor = "0";
        do {
            reply_ptr r(static_cast<redisReply*>(redisCommand(context_.get(), "SCAN %s MATCH %b COUNT 1000", cursor.c_str(),
                                                              pattern.data(), pattern.size())));
            if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
                r->element[1]->type != REDIS_REPLY_ARRAY) {
                fail();
                return found;
            }
            cursor.assign(r->element[0]->str, r->element[0]->len);
            for (std::size_t i = 0; i < r->element[1]->elements; ++i) {
                const redisReply* k = r->element[1]->element[i];
                if (k->type != REDIS_REPLY_STRING) continue;
                if (const auto key = key_of_name(std::string_view(k->str, k->len))) found.push_back(*key);
            }
        } while (cursor != "0");
        return found;
    }

    /// Counters since the tier was opened.
    [[nodiscard]] tier_stats stats() const noexcept { return stats_; }

    /// Whether a connection is up, connecting now if the backoff allows.
    [[nodiscard]] bool connected() {
        if (context_ && context_->err == 0) return true;
        const auto now = std::chrono::steady_clock::now();
        if (now < retry_at_) return false;
        const timeval tv = to_timeval(options_.timeout);
        context_.reset(redisConnectWithTimeout(options_.host.c_str(), options_.port, tv));
        if (context_ && context_->err == 0 && redisSetTimeout(context_.get(), tv) == REDIS_OK) {
            backoff_ = std::chrono::milliseconds(0);
            return true;
        }
        context_.reset();
        backoff_ = std::clamp(2 * backoff_, std::chrono::milliseconds(10), options_.max_backoff);
        retry_at_ = now + backoff_;
        return false;
    }

    /// The server key of `key`.
    [[nodiscard]] std::string key_of(const tier_key& key) const { return key_prefix_ + to_hex(key) + "}"; }

private:
    struct context_free {
        void operator()(redisContext* c) const noexcept { redisFree(c); }
    };
    struct reply_free {
        void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
    };
    using reply_ptr = std::unique_ptr<redisReply, reply_free>;

    static std::string hex(std::uint64_t v) {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
        return buf;
    }
    // The chunk key a server key of this namespace spells, if it is one.
    [[nodiscard]] std::optional<tier_key> key_of_name(std::string_view name) const {
        if (name.size() != key_prefix_.size() + 33 || !name.starts_with(key_prefix_) || name.back() != '}') return std::nullopt;
        return tier_key_from_hex(name.substr(key_prefix_.size(), 32));
    }
    static timeval to_timeval(std::chrono::milliseconds ms) {
        return {static_cast<decltype(timeval::tv_sec)>(ms.count() / 1000),
                static_cast<decltype(timeval::tv_usec)>((ms.count() % 1000) * 1000)};
    }
    [[nodiscard]] record_header header_of(const tier_key& k) const noexcept {
        return {.magic = magic, .version = version, .space = space_, .key_high = k.high, .key_low = k.low};
    }

    reply_ptr next_reply() {
        void* r = nullptr;
        if (redisGetReply(context_.get(), &r) != REDIS_OK) return nullptr;
        return reply_ptr(static_cast<redisReply*>(r));
    }
    // Drops the connection after a failed batch (its unread replies go with it).
    void fail() {
        ++stats_.errors;
        context_.reset();
        retry_at_ = std::chrono::steady_clock::now();  // reconnect at the next call; backoff after a failed connect
    }

    // Sends `command key` for `keys` in pipelined batches and returns how many replies, from
    // the first, `ok(reply, index)` accepts.
    template <class Ok>
    std::size_t run(std::span<const tier_key> keys, const char* command, Ok&& ok) {
        std::size_t n = 0;
        for (std::size_t first = 0; first < keys.size(); first += options_.pipeline) {
            if (!connected()) {
                ++stats_.errors;
                return n;
            }
            const std::size_t last = std::min(keys.size(), first + options_.pipeline);
            for (std::size_t i = first; i < last; ++i) {
                const std::string key = key_of(keys[i]);
                redisAppendCommand(context_.get(), "%s %b", command, key.data(), key.size());
            }
            bool going = true;
            for (std::size_t i = first; i < last; ++i) {
                reply_ptr r = next_reply();
                if (!r || r->type == REDIS_REPLY_ERROR) {
                    fail();
                    return n;
                }
                if (going && ok(r.get(), i)) ++n;
                else going = false;  // the run ended; the batch's replies are still read
            }
            if (!going) return n;
        }
        return n;
    }

    redis_options options_;
    std::uint64_t space_;
    std::string key_prefix_;
    std::unique_ptr<redisContext, context_free> context_;
    std::chrono::steady_clock::time_point retry_at_{};
    std::chrono::milliseconds backoff_{0};
    std::string frame_;  // put's scratch frame
    tier_stats stats_;
};

static_assert(listable_tier<redis_tier>);

}  // namespace frugal::cache
