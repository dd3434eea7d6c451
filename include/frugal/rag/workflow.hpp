#pragma once
/// @file
/// RAGraph (HedraRAG 4.1, Listing 1): a RAG workflow as a graph of generation,
/// retrieval and user nodes with plain and conditional edges, its validation, the
/// per-request state the conditions read, and Listing 1's workflows.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "frugal/core/error.hpp"

namespace frugal::rag {

/// A node id, chosen by the user as in Listing 1 (`add_generation(0, ...)`).
using rag_node_id = std::size_t;
/// The entry and exit pseudo-nodes of every workflow (Listing 1's START and END).
inline constexpr rag_node_id rag_start = std::numeric_limits<rag_node_id>::max() - 1;
inline constexpr rag_node_id rag_end = std::numeric_limits<rag_node_id>::max();

/// What a node does: LLM generation, vector retrieval, or a user callback on the state.
enum class rag_node_kind : std::uint8_t { generation, retrieval, user };

/// The state of one request as it walks its workflow: the user's question (Listing 1's
/// `{input}`, `add_request("What is RAG?", g1)`), the named outputs of its generations so
/// far (text, Listing 1's `output="hypopara"`, and integers, Listing 1's
/// `s.get("subquestion")`), how often each node has finished, and the documents of every
/// retrieval so far. The generator writes the outputs when a generation is kept; the
/// retriever reads its query from here; conditional edges and user nodes read and write it.
/// @code
/// frugal::rag::rag_state s{.input = "Compare RAG with long-context models."};
/// s.values["subquestions"] = 3;
/// @endcode
struct rag_state {
    std::size_t request = 0;
    std::string input{};
    std::map<std::string, std::string, std::less<>> texts{};
    std::map<std::string, std::int64_t, std::less<>> values{};
    std::map<rag_node_id, std::size_t> visits{};
    std::vector<std::vector<std::uint64_t>> retrieved{};

    /// The text output named `key`, empty when unset.
    [[nodiscard]] std::string_view text(std::string_view key) const {
        auto it = texts.find(key);
        return it == texts.end() ? std::string_view{} : std::string_view(it->second);
    }
    /// The value named `key`, 0 when unset.
    [[nodiscard]] std::int64_t get(std::string_view key) const {
        auto it = values.find(key);
        return it == values.end() ? 0 : it->second;
    }
    /// How many times node `id` has finished for this request.
    [[nodiscard]] std::size_t visited(rag_node_id id) const {
        auto it = visits.find(id);
        return it == visits.end() ? 0 : it->second;
    }
};

/// One node: its kind and name; `tokens` (decode steps) and `prompt_tokens` for
/// generation, `top_k` for retrieval, `action` for user nodes.
struct rag_node {
    rag_node_kind kind = rag_node_kind::generation;
    std::string name;
    std::size_t tokens = 0, prompt_tokens = 0, top_k = 0;
    std::function<void(rag_state&)> action;
};

/// HedraRAG's RAGraph (Listing 1): nodes added by id, edges from START, between nodes and
/// to END. A node has one outgoing edge: plain, or conditional, where a router (a callable
/// over the request's state) picks the successor among the declared targets (Listing 1's
/// Multistep loop). Every loop is bounded: some node on it has a visit bound
/// (`bound_visits`), and a request that would run it once more fails, naming the node.
/// `validate()` rejects dangling edges, unknown nodes, dead ends, cycles that no conditional
/// edge can leave and cycles without a bounded node.
/// @code
/// frugal::rag::rag_graph g;  // Listing 1, HyDE
/// g.add_generation(0, "hypothesis", 64);
/// g.add_retrieval(1, "search", 5);
/// g.add_generation(2, "answer", 128);
/// g.add_edge(frugal::rag::rag_start, 0); g.add_edge(0, 1); g.add_edge(1, 2); g.add_edge(2, frugal::rag::rag_end);
/// g.validate();
/// @endcode
class rag_graph {
public:
    /// Adds a generation node of `tokens` decode steps over a prompt of `prompt_tokens`.
    void add_generation(rag_node_id id, std::string name, std::size_t tokens, std::size_t prompt_tokens = 256) {
        FRUGAL_CHECK(tokens > 0, "rag_graph: generation node ", id, " with 0 tokens");
        add(id, {rag_node_kind::generation, std::move(name), tokens, prompt_tokens, 0, {}});
    }
    /// Adds a retrieval node returning `top_k` documents.
    void add_retrieval(rag_node_id id, std::string name, std::size_t top_k) {
        FRUGAL_CHECK(top_k > 0, "rag_graph: retrieval node ", id, " with top_k = 0");
        add(id, {rag_node_kind::retrieval, std::move(name), 0, 0, top_k, {}});
    }
    /// Adds a user node: `action` runs on the request state when the node is reached.
    void add_user(rag_node_id id, std::string name, std::function<void(rag_state&)> action) {
        FRUGAL_CHECK(static_cast<bool>(action), "rag_graph: user node ", id, " without an action");
        add(id, {rag_node_kind::user, std::move(name), 0, 0, 0, std::move(action)});
    }

    /// Bounds how many times node `id` may run for one request (a loop's bound).
    void bound_visits(rag_node_id id, std::size_t max_visits) {
        FRUGAL_CHECK(nodes_.contains(id), "rag_graph: bound on unknown node ", id);
        FRUGAL_CHECK(max_visits > 0, "rag_graph: node ", name_of(id), " bounded to 0 visits");
        bounds_[id] = max_visits;
    }
    /// Throws `frugal::runtime_error` when a request whose state is `s` has run node `id` as
    /// many times as its bound allows (the scheduler fails that request).
    void check_visit(rag_node_id id, const rag_state& s) const {
        auto it = bounds_.find(id);
        if (it == bounds_.end()) return;
        FRUGAL_CHECK_AS(frugal::runtime_error, s.visited(id) < it->second, "rag_graph: request ", s.request,
                        " would run node ", name_of(id), " a ", s.visited(id) + 1, "th time, beyond its bound of ",
                        it->second);
    }

    /// Adds the plain edge `from` -> `to`.
    void add_edge(rag_node_id from, rag_node_id to) { add_out(from, {{to}, {}}); }
    /// Adds a conditional edge: `choose(state)` returns the successor, which must be one of
    /// `targets` (declared so that validation can check the graph).
    void add_edge(rag_node_id from, std::function<rag_node_id(const rag_state&)> choose,
                  std::vector<rag_node_id> targets) {
        FRUGAL_CHECK(static_cast<bool>(choose), "rag_graph: conditional edge from ", name_of(from), " without a callable");
        FRUGAL_CHECK(!targets.empty(), "rag_graph: conditional edge from ", name_of(from), " declares no targets");
        add_out(from, {std::move(targets), std::move(choose)});
    }

    [[nodiscard]] bool contains(rag_node_id id) const { return nodes_.contains(id); }
    [[nodiscard]] const rag_node& node(rag_node_id id) const {
        auto it = nodes_.find(id);
        FRUGAL_CHECK_AS(frugal::out_of_range, it != nodes_.end(), "rag_graph: unknown node ", id);
        return it->second;
    }
    /// Whether the edge leaving `from` is conditional.
    [[nodiscard]] bool conditional(rag_node_id from) const { return static_cast<bool>(edge_of(from).choose); }

    /// The successor of `from` for `state` (START's successor when `from` is rag_start).
    /// Throws when a conditional edge returns a target it did not declare.
    [[nodiscard]] rag_node_id next(rag_node_id from, const rag_state& state) const {
        const edge& e = edge_of(from);
        if (!e.choose) return e.targets.front();
        const rag_node_id to = e.choose(state);
        FRUGAL_CHECK(std::find(e.targets.begin(), e.targets.end(), to) != e.targets.end(), "rag_graph: conditional edge from ",
                     name_of(from), " chose ", name_of(to), ", which is not among its declared targets");
        return to;
    }

    /// Checks the graph: START has an edge; every edge leaves and reaches a known node (or
    /// END); every node is reachable from START and has an outgoing edge; END is reachable
    /// from every node, so every cycle has a conditional exit. Throws frugal::invalid_argument
    /// naming the offending nodes.
    void validate() const {
        FRUGAL_CHECK(out_.contains(rag_start), "rag_graph: no edge from START");
        for (const auto& [from, e] : out_) {
            FRUGAL_CHECK(from == rag_start || nodes_.contains(from), "rag_graph: edge from unknown node ", from);
            for (rag_node_id to : e.targets)
                FRUGAL_CHECK(to == rag_end || nodes_.contains(to), "rag_graph: dangling edge ", name_of(from), " -> ", to,
                             " (no node ", to, ")");
        }
        for (const auto& [id, n] : nodes_)
            FRUGAL_CHECK(out_.contains(id), "rag_graph: node ", name_of(id), " has no outgoing edge (add one to END)");
        const std::set<rag_node_id> reachable = reach(rag_start);
        for (const auto& [id, n] : nodes_)
            FRUGAL_CHECK(reachable.contains(id), "rag_graph: node ", name_of(id), " is unreachable from START");
        for (const auto& [id, n] : nodes_) {
            const std::set<rag_node_id> from_here = reach(id);
            if (from_here.contains(rag_end)) continue;
            const bool on_cycle = from_here.contains(id);
            FRUGAL_CHECK(!on_cycle, "rag_graph: the cycle through node ", name_of(id),
                         " has no conditional edge leading out of it (it never reaches END)");
            FRUGAL_FAIL(frugal::invalid_argument, "rag_graph: END is unreachable from node ", name_of(id));
        }
        // Every cycle passes a bounded node: without them the graph is acyclic.
        for (const auto& [id, n] : nodes_)
            FRUGAL_CHECK(bounds_.contains(id) || !reach(id, true).contains(id), "rag_graph: the loop through node ",
                         name_of(id), " has no visit bound (bound_visits on one of its nodes)");
    }

private:
    struct edge {
        std::vector<rag_node_id> targets;
        std::function<rag_node_id(const rag_state&)> choose;
    };

    void add(rag_node_id id, rag_node n) {
        FRUGAL_CHECK(id != rag_start && id != rag_end, "rag_graph: node id ", id, " is reserved for START/END");
        FRUGAL_CHECK(!nodes_.contains(id), "rag_graph: node ", id, " added twice");
        nodes_.emplace(id, std::move(n));
    }
    void add_out(rag_node_id from, edge e) {
        FRUGAL_CHECK(from != rag_end, "rag_graph: edge out of END");
        for (rag_node_id to : e.targets) FRUGAL_CHECK(to != rag_start, "rag_graph: edge into START from ", name_of(from));
        FRUGAL_CHECK(!out_.contains(from), "rag_graph: ", name_of(from),
                     " already has an outgoing edge (branch with one conditional edge)");
        out_.emplace(from, std::move(e));
    }
    [[nodiscard]] const edge& edge_of(rag_node_id from) const {
        auto it = out_.find(from);
        FRUGAL_CHECK_AS(frugal::out_of_range, it != out_.end(), "rag_graph: no edge from ", name_of(from));
        return it->second;
    }
    [[nodiscard]] std::string name_of(rag_node_id id) const {
        if (id == rag_start) return "START";
        if (id == rag_end) return "END";
        std::ostringstream s;
        s << id;
        if (auto it = nodes_.find(id); it != nodes_.end() && !it->second.name.empty()) s << " (" << it->second.name << ")";
        return s.str();
    }
    // Nodes reachable from `from` over one or more edges (all declared targets); with
    // `unbounded_only`, never through a bounded node.
    [[nodiscard]] std::set<rag_node_id> reach(rag_node_id from, bool unbounded_only = false) const {
        std::set<rag_node_id> seen;
        std::vector<rag_node_id> stack{from};
        while (!stack.empty()) {
            const rag_node_id at = stack.back();
            stack.pop_back();
            auto it = out_.find(at);
            if (it == out_.end()) continue;
            for (rag_node_id to : it->second.targets)
                if ((!unbounded_only || !bounds_.contains(to)) && seen.insert(to).second) stack.push_back(to);
        }
        return seen;
    }

    std::map<rag_node_id, rag_node> nodes_;
    std::map<rag_node_id, edge> out_;
    std::map<rag_node_id, std::size_t> bounds_;
};

/// Decode-step counts of the workflows below (typical Llama-3-8B RAG lengths).
struct rag_workflow_lengths {
    std::size_t hypothesis = 64;  ///< HyDE hypothesis, Multistep decomposition
    std::size_t answer = 96;      ///< answers
    std::size_t prompt = 256;     ///< prompt tokens before retrieved documents
};

/// One-shot: retrieve top-k for the input, then answer (HedraRAG 6.1).
/// @code
/// auto g = frugal::rag::one_shot_workflow(5);
/// @endcode
[[nodiscard]] inline rag_graph one_shot_workflow(std::size_t top_k = 5, rag_workflow_lengths len = {}) {
    rag_graph g;
    g.add_retrieval(0, "retrieve", top_k);
    g.add_generation(1, "answer", len.answer, len.prompt);
    g.add_edge(rag_start, 0);
    g.add_edge(0, 1);
    g.add_edge(1, rag_end);
    return g;
}

/// Listing 1's HyDE workflow: generate a hypothesis, retrieve with it, answer.
/// @code
/// auto g = frugal::rag::hyde_workflow(5);
/// @endcode
[[nodiscard]] inline rag_graph hyde_workflow(std::size_t top_k = 5, rag_workflow_lengths len = {}) {
    rag_graph g;
    g.add_generation(0, "hypothesis", len.hypothesis, len.prompt);
    g.add_retrieval(1, "retrieve", top_k);
    g.add_generation(2, "answer", len.answer, len.prompt);
    g.add_edge(rag_start, 0);
    g.add_edge(0, 1);
    g.add_edge(1, 2);
    g.add_edge(2, rag_end);
    return g;
}

/// Listing 1's Multistep workflow: decompose into sub-questions, then retrieve and answer
/// once per sub-question; the router loops back to retrieval while the state's
/// "subquestions" value exceeds the answers given so far, at most `max_rounds` times.
/// @code
/// auto g = frugal::rag::multistep_workflow(2);
/// frugal::rag::rag_state s; s.values["subquestions"] = 3;  // three rounds
/// @endcode
[[nodiscard]] inline rag_graph multistep_workflow(std::size_t top_k = 2, rag_workflow_lengths len = {},
                                                  std::size_t max_rounds = 16) {
    rag_graph g;
    g.add_generation(0, "decompose", len.hypothesis, len.prompt);
    g.add_retrieval(1, "retrieve", top_k);
    g.add_generation(2, "answer", len.answer, len.prompt);
    g.add_edge(rag_start, 0);
    g.add_edge(0, 1);
    g.add_edge(1, 2);
    g.add_edge(
        2,
        [](const rag_state& s) {
            return static_cast<std::int64_t>(s.visited(2)) < s.get("subquestions") ? rag_node_id{1} : rag_end;
        },
        {1, rag_end});
    g.bound_visits(1, max_rounds);
    return g;
}

/// IRG (iterative retrieval-generation, HedraRAG 6.1): retrieve with the question, generate,
/// then retrieve again with what was generated and generate again, `rounds` times in all.
/// @code
/// auto g = frugal::rag::irg_workflow(5, 3);
/// @endcode
[[nodiscard]] inline rag_graph irg_workflow(std::size_t top_k = 5, std::size_t rounds = 3, rag_workflow_lengths len = {}) {
    FRUGAL_CHECK(rounds > 0, "irg_workflow: 0 rounds");
    rag_graph g;
    g.add_retrieval(0, "retrieve", top_k);
    g.add_generation(1, "generate", len.answer, len.prompt);
    g.add_edge(rag_start, 0);
    g.add_edge(0, 1);
    g.add_edge(
        1, [rounds](const rag_state& s) { return s.visited(1) < rounds ? rag_node_id{0} : rag_end; }, {0, rag_end});
    g.bound_visits(0, rounds);
    return g;
}

}  // namespace frugal::rag
