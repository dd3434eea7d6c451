// The cache_policy concept: every policy of the module satisfies it, types that miss a piece
// of the contract do not, and a user's own policy plugs into both caches.
#include <cstddef>
#include <vector>

#include <gtest/gtest.h>

#include <frugal/cache/arc_policy.hpp>
#include <frugal/cache/basic_cache.hpp>
#include <frugal/cache/cache_policy.hpp>
#include <frugal/cache/count_min_sketch.hpp>
#include <frugal/cache/gdsf_policy.hpp>
#include <frugal/cache/lfu_policy.hpp>
#include <frugal/cache/lirs_policy.hpp>
#include <frugal/cache/lru_policy.hpp>
#include <frugal/cache/prefix_tree.hpp>
#include <frugal/cache/s3fifo_policy.hpp>
#include <frugal/cache/sieve_policy.hpp>
#include <frugal/cache/two_queue_policy.hpp>
#include <frugal/cache/wtinylfu_policy.hpp>

namespace {

namespace fc = frugal::cache;

// A user's policy: most recently admitted first out (a stack), in a few lines.
struct lifo_policy {
    struct node_data : fc::detail::lru_hook {};
    template <class Node>
    class state {
    public:
        explicit state(std::size_t) {}
        void admit(Node& n, double) { list_.push_back(n); }
        void touch(Node&) {}
        void remove(Node& n) { list_.erase(n); }
        void reattach(Node& n) { list_.push_back(n); }
        void replace(Node& n, double) { list_.push_back(n); }
        void evict(Node& n) { list_.erase(n); }
        Node* victim() {
            Node* last = nullptr;
            for (Node* n = list_.front(); n != nullptr; n = list_.next(*n)) last = n;
            return last;
        }
        void set_capacity(std::size_t) {}

    private:
        fc::detail::recency_list<Node> list_;
    };
};
static_assert(fc::cache_policy<lifo_policy>);

// Not policies: no victim(); no node_data; a victim() of the wrong type; a non-bool flag.
struct no_victim {
    struct node_data {};
    template <class Node>
    struct state {
        explicit state(std::size_t) {}
        void admit(Node&, double) {}
        void touch(Node&) {}
        void remove(Node&) {}
        void reattach(Node&) {}
        void replace(Node&, double) {}
        void evict(Node&) {}
        void set_capacity(std::size_t) {}
    };
};
struct no_node_data {
    template <class Node>
    struct state {};
};
struct wrong_victim : no_victim {
    template <class Node>
    struct state : no_victim::state<Node> {
        using no_victim::state<Node>::state;
        int victim() { return 0; }
    };
};

static_assert(!fc::cache_policy<no_victim>);
static_assert(!fc::cache_policy<no_node_data>);
static_assert(!fc::cache_policy<wrong_victim>);
static_assert(!fc::cache_policy<int>);

static_assert(fc::cache_policy<fc::lru_policy> && fc::cache_policy<fc::lfu_policy> && fc::cache_policy<fc::lfuda_policy> &&
              fc::cache_policy<fc::gdsf_policy> && fc::cache_policy<fc::wtinylfu_policy<>> &&
              fc::cache_policy<fc::adaptive_wtinylfu_policy> && fc::cache_policy<fc::s3fifo_policy> &&
              fc::cache_policy<fc::sieve_policy> && fc::cache_policy<fc::arc_policy> && fc::cache_policy<fc::lirs_policy> &&
              fc::cache_policy<fc::two_queue_policy> && fc::cache_policy<fc::wtinylfu_policy<fc::count_min_sketch>>);
static_assert(fc::expects_newcomers<fc::arc_policy::state<fc::detail::policy_probe_node<fc::arc_policy>>>);
static_assert(!fc::expects_newcomers<fc::lru_policy::state<fc::detail::policy_probe_node<fc::lru_policy>>>);

TEST(CachePolicyConcept, AUserPolicyDrivesTheCacheAndTheTree) {
    fc::basic_cache<int, int, lifo_policy> c(2);
    c.put(1, 1);
    c.put(2, 2);
    c.put(3, 3);  // evicts the newest resident, 2
    EXPECT_TRUE(c.contains(1));
    EXPECT_FALSE(c.contains(2));
    EXPECT_TRUE(c.contains(3));

    std::vector<int> evicted;
    fc::prefix_tree<int, int, lifo_policy> tree(frugal::memory_budget(2));
    tree.set_eviction_callback([&](const int& id, int&, std::size_t) { evicted.push_back(id); });
    const std::vector<fc::chunk_value<int>> one{{0, 1}};
    tree.insert(std::vector<int>{10}, one);
    tree.insert(std::vector<int>{11}, one);
    tree.insert(std::vector<int>{12}, one);  // the newest leaf, 11, goes
    EXPECT_EQ(evicted, std::vector<int>{11});
}

}  // namespace
