// A consumer of the installed frugal::redis component: builds and links a Redis tier
// against hiredis; with no server on the port, every call is a miss within the timeout.
#include <cstdio>
#include <vector>

#include <frugal/backend/redis/redis_tier.hpp>

int main() {
    const frugal::cache::tier_namespace ns{.model = "consumer", .dtype = "f32", .layout = "nhd", .page_tokens = 2};
    frugal::cache::redis_tier tier(ns, {.port = 1, .timeout = std::chrono::milliseconds(50)});
    const std::vector<int> tokens{1, 2, 3, 4};
    const auto keys = frugal::cache::chunk_keys<int>(ns, tokens);
    const std::size_t held = tier.exists_prefix(keys);
    std::printf("frugal redis tier: %zu keys, %zu held, %s\n", keys.size(), held,
                tier.stats().errors > 0 ? "ok" : "unexpected");
}
