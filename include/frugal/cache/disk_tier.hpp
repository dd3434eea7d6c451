#pragma once
/// @file
/// disk_tier: a cache tier in a local directory, with a byte budget and any `cache_policy`
/// choosing what to delete; crash-safe writes, validated reads; several processes on one
/// host may share the directory.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#if __has_include(<signal.h>) && __has_include(<unistd.h>)
#include <signal.h>
#include <unistd.h>
#define FRUGAL_DETAIL_POSIX_PROCESSES 1
#endif

#include "frugal/cache/basic_cache.hpp"
#include "frugal/cache/cache_policy.hpp"
#include "frugal/cache/lru_policy.hpp"
#include "frugal/cache/tier.hpp"
#include "frugal/core/atomic_file.hpp"
#include "frugal/core/error.hpp"
#include "frugal/core/hash.hpp"
#include "frugal/core/record_frame.hpp"

namespace frugal::cache {

namespace detail {
// Weighs an index entry by its file's bytes.
struct file_bytes_weigher {
    std::size_t operator()(const tier_key&, const std::uint64_t& bytes) const noexcept { return bytes; }
};
}  // namespace detail

/// A cache tier in the directory `root`: each value is one file, a framed record (magic,
/// version, namespace, key, length, payload, checksum) written to a temporary file and
/// renamed into place, so an entry is whole or absent whatever happens to the writer; a
/// read checks the frame and reads a truncated, corrupt or foreign file as a miss (and
/// deletes it). The files of a namespace live under `root/<namespace id>/`.
///
/// The budget: the files this tier knows (written, read, or found when it was opened) are
/// kept under `byte_budget` bytes (frame included) by `Policy`, which chooses the file to
/// delete. Several processes may share `root`: each sees the others' entries (lookups go
/// to the file system), and each keeps its own budget over the files it knows, so N
/// processes hold at most N budgets. `durable` fsyncs each entry (a power loss cannot lose
/// it); without it a crash of the process still leaves whole entries or none.
///
/// One thread at a time per object (open one per thread, on the same directory, to read
/// from several).
/// @code
/// frugal::cache::disk_tier<> tier("/var/cache/engine-kv", ns, std::size_t{64} << 30);
/// tier.put(keys, pages);                          // std::span<const std::byte> per page
/// std::size_t n = tier.get(keys, buffers);        // pages [0, n) loaded into the buffers
/// @endcode
template <class Policy = lru_policy>
    requires cache_policy<Policy>
class disk_tier {
public:
    /// The format's magic and version (in every frame).
    static constexpr std::array<char, 4> magic{'F', 'R', 'K', 'V'};
    static constexpr std::uint32_t version = 1;

    /// Opens (creating it if needed) the tier of namespace `ns` under `root`, with
    /// `byte_budget` > 0 bytes; files already there are adopted (oldest first, as the
    /// least recently used), and temporary files left by dead writers are removed.
    disk_tier(std::filesystem::path root, tier_namespace ns, std::size_t byte_budget, bool durable = false)
        : dir_(std::move(root) / hex(ns.id())), space_(ns.id()), durable_(durable),
          index_(checked_budget(byte_budget)) {
        std::error_code ec;
        std::filesystem::create_directories(dir_, ec);
        FRUGAL_CHECK_AS(frugal::runtime_error, !ec, "disk_tier: cannot create ", dir_.string(), ": ", ec.message());
        index_.set_eviction_callback([this](const tier_key& k, std::uint64_t&, eviction_reason why) {
            if (why != eviction_reason::capacity) return;
            std::error_code ignored;
            std::filesystem::remove(path_of(k), ignored);
            ++stats_.evictions;
        });
        adopt_existing();
    }

    disk_tier(const disk_tier&) = delete;
    disk_tier& operator=(const disk_tier&) = delete;

    /// How many of `keys`, from the first, have a file.
    [[nodiscard]] std::size_t exists_prefix(std::span<const tier_key> keys) const {
        std::size_t n = 0;
        std::error_code ec;
        while (n < keys.size() && std::filesystem::exists(path_of(keys[n]), ec)) ++n;
        return n;
    }

    /// Loads the longest run of `keys` from the first into `out` (out[i] exactly the size of
    /// key i's value); returns the run's length. An entry missing, of another size,
    /// truncated or corrupt ends the run and counts as a miss.
    std::size_t get(std::span<const tier_key> keys, std::span<const std::span<std::byte>> out) {
        FRUGAL_CHECK(keys.size() == out.size(), "disk_tier::get: ", keys.size(), " keys but ", out.size(), " buffers");
        std::size_t n = 0;
        for (; n < keys.size(); ++n)
            if (!read_one(keys[n], out[n])) break;
        stats_.hits += n;
        stats_.misses += n < keys.size() ? 1 : 0;
        return n;
    }

    /// Stores `values[i]` under `keys[i]`; a key that has a file keeps it (a chunk's key
    /// names its content). A value whose frame is larger than the budget is refused.
    void put(std::span<const tier_key> keys, std::span<const std::span<const std::byte>> values) {
        FRUGAL_CHECK(keys.size() == values.size(), "disk_tier::put: ", keys.size(), " keys but ", values.size(),
                     " values");
        for (std::size_t i = 0; i < keys.size(); ++i) {
            const std::uint64_t bytes = record_header::bytes + values[i].size() + record_header::checksum_bytes;
            FRUGAL_CHECK(bytes <= index_.capacity(), "disk_tier::put: a value of ", values[i].size(),
                         " bytes does not fit the budget of ", index_.capacity(), " bytes");
            const auto path = path_of(keys[i]);
            std::error_code ec;
            if (std::filesystem::exists(path, ec)) {
                know(keys[i], bytes);
                continue;
            }
            std::filesystem::create_directories(path.parent_path(), ec);
            FRUGAL_CHECK_AS(frugal::runtime_error, !ec, "disk_tier::put: cannot create ", path.parent_path().string(),
                            ": ", ec.message());
            const std::string frame = frame_record(header_of(keys[i]), values[i]);
            write_file_atomically(path, std::string_view(frame), durable_);
            stats_.puts += 1;
            stats_.bytes_written += values[i].size();
            know(keys[i], bytes);
        }
    }

    /// The value under `key`, of any size; nullopt when its file is missing, truncated,
    /// corrupt or foreign (then deleted, as `get` does).
    [[nodiscard]] std::optional<std::string> read(const tier_key& key) {
        const auto path = path_of(key);
        std::error_code ec;
        const auto size = std::filesystem::file_size(path, ec);
        std::string frame;
        if (!ec) {
            frame.resize(size);
            std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
            if (!f) ec = std::make_error_code(std::errc::no_such_file_or_directory);
            else frame.resize(std::fread(frame.data(), 1, frame.size(), f.get()));
        }
        if (ec) {
            ++stats_.misses;
            return std::nullopt;
        }
        const auto bytes = std::as_bytes(std::span(frame));
        if (check_frame(bytes, header_of(key)) != frame_status::whole) {
            refuse(key);
            return std::nullopt;
        }
        ++stats_.hits;
        stats_.bytes_read += frame.size() - record_header::bytes - record_header::checksum_bytes;
        know(key, frame.size());
        return frame.substr(record_header::bytes, frame.size() - record_header::bytes - record_header::checksum_bytes);
    }

    /// The keys of every entry file in the namespace's directory now (other processes'
    /// included).
    [[nodiscard]] std::vector<tier_key> keys() const {
        std::vector<tier_key> found;
        std::error_code ec;
        for (auto it = std::filesystem::recursive_directory_iterator(dir_, ec);
             !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
            if (const auto key = key_of_file(it->path().filename().string()); key && it->is_regular_file(ec))
                found.push_back(*key);
        return found;
    }

    /// Counters since the tier was opened.
    [[nodiscard]] tier_stats stats() const noexcept { return stats_; }
    /// Bytes of the files this tier knows (at most the budget).
    [[nodiscard]] std::size_t bytes() const noexcept { return index_.weight(); }
    /// Files this tier knows.
    [[nodiscard]] std::size_t size() const noexcept { return index_.size(); }
    /// The namespace's directory.
    [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }
    /// The file of `key`.
    [[nodiscard]] std::filesystem::path path_of(const tier_key& key) const {
        const std::string name = to_hex(key);
        return dir_ / name.substr(0, 2) / (name + ".kv");
    }

private:
    static std::string hex(std::uint64_t v) {
        char buf[17];
        std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
        return buf;
    }
    static std::size_t checked_budget(std::size_t b) {
        FRUGAL_CHECK(b > 0, "disk_tier: byte_budget must be > 0");
        return b;
    }

    [[nodiscard]] record_header header_of(const tier_key& k) const noexcept {
        return {.magic = magic, .version = version, .space = space_, .key_high = k.high, .key_low = k.low};
    }

    // Records that this tier holds `key`'s file of `bytes`, or that it was used again.
    void know(const tier_key& key, std::uint64_t bytes) {
        if (index_.get(key) == nullptr) index_.put(key, bytes);
    }

    bool read_one(const tier_key& key, std::span<std::byte> out) {
        const auto path = path_of(key);
        std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
        if (!f) return false;
        std::setvbuf(f.get(), nullptr, _IONBF, 0);  // page-sized reads go straight to the buffer
        std::array<std::byte, record_header::bytes> head{};
        std::uint64_t sum = 0;
        const bool named = std::fread(head.data(), 1, head.size(), f.get()) == head.size() &&
                           record_header::decode(head).same_record(header_of(key));
        // A whole entry of another size: the caller's buffer is not for it (a miss, kept).
        if (named && record_header::decode(head).length != out.size()) return false;
        const bool whole = named && std::fread(out.data(), 1, out.size(), f.get()) == out.size() &&
                           std::fread(&sum, 1, sizeof sum, f.get()) == sizeof sum && std::fgetc(f.get()) == EOF &&
                           sum == frame_checksum(head, out);
        if (!whole) {  // a renamed-in file is never partial: this one is damaged or foreign
            f.reset();
            refuse(key);
            return false;
        }
        stats_.bytes_read += out.size();
        know(key, record_header::bytes + out.size() + record_header::checksum_bytes);
        return true;
    }

    // Deletes `key`'s damaged or foreign file.
    void refuse(const tier_key& key) {
        ++stats_.refused;
        std::error_code ignored;
        std::filesystem::remove(path_of(key), ignored);
        index_.erase(key);
    }

    // The key an entry file's name spells (32 hex digits and ".kv"), if it is one.
    static std::optional<tier_key> key_of_file(const std::string& name) {
        if (name.size() != 35 || !name.ends_with(".kv")) return std::nullopt;
        return tier_key_from_hex(std::string_view(name).substr(0, 32));
    }

    // Adopts the namespace's files (oldest first) and removes dead writers' temporary files.
    void adopt_existing() {
        std::vector<std::pair<std::filesystem::file_time_type, tier_key>> found;
        std::error_code ec;
        for (auto it = std::filesystem::recursive_directory_iterator(dir_, ec);
             !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
            if (!it->is_regular_file(ec)) continue;
            const std::string name = it->path().filename().string();
            if (const auto key = key_of_file(name)) {
                found.emplace_back(it->last_write_time(ec), *key);
            } else if (const auto at = name.find(".kv.tmp."); at != std::string::npos && !writer_alive(name, at + 8)) {
                std::error_code ignored;
                std::filesystem::remove(it->path(), ignored);
            }
        }
        std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
        for (const auto& [when, key] : found) {
            const auto bytes = std::filesystem::file_size(path_of(key), ec);
            if (!ec && bytes <= index_.capacity()) know(key, bytes);
        }
    }

    // Whether the process that wrote a `<name>.tmp.<pid>.<n>` file still runs.
    static bool writer_alive([[maybe_unused]] const std::string& name, [[maybe_unused]] std::size_t pid_at) {
#ifdef FRUGAL_DETAIL_POSIX_PROCESSES
        const long pid = std::strtol(name.c_str() + pid_at, nullptr, 10);
        return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH);
#else
        return true;
#endif
    }

    std::filesystem::path dir_;
    std::uint64_t space_;
    bool durable_;
    basic_cache<tier_key, std::uint64_t, Policy, detail::file_bytes_weigher, tier_key_hash> index_;
    tier_stats stats_;
};

static_assert(listable_tier<disk_tier<>>);

}  // namespace frugal::cache
