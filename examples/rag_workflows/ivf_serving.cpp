// Serving RAG requests over a real vector index: the passages below are embedded (a hashed
// bag-of-words embedder stands in for an embedding model), indexed by frugal's IVF-Flat, and
// searched through `frugal::rag::ivf_retriever`; a small generator stands in for the LLM
// engine and shows what an engine implements: decode steps per batch, its own text per
// request, commit (kept: publish the output into the request's state) and discard (a
// rolled-back speculation: free it). One-shot requests retrieve with the question; HyDE
// requests retrieve with the hypothesis their first generation wrote. Questions arrive over
// time and are handed to a rag_event_loop as they come; every request gets the documents a
// direct index search returns.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <frugal/core/hash.hpp>
#include <frugal/rag/ivf_retriever.hpp>
#include <frugal/rag/scheduler.hpp>
#include <frugal/sim/rag_event_loop.hpp>
#include <frugal/rag/workflow.hpp>
#include <frugal/retrieve/ivf_flat.hpp>

namespace {

const std::vector<std::string> passages = {
    "Mercury is the smallest planet and the closest to the sun.",
    "Venus has a thick atmosphere of carbon dioxide and is the hottest planet.",
    "Mars is a cold desert planet with the tallest volcano, Olympus Mons.",
    "Jupiter is the largest planet, a gas giant with a great red storm.",
    "Saturn is a gas giant known for its bright rings of ice.",
    "Neptune is an ice giant with the fastest winds in the solar system.",
    "Retrieval-augmented generation retrieves documents and conditions the answer on them.",
    "A vector index stores embeddings and finds the nearest ones to a query embedding.",
    "An inverted file index groups vectors into lists around k-means centroids.",
    "Speculative decoding drafts tokens cheaply and verifies them with the large model.",
    "The KV cache keeps the keys and values of past tokens so decoding does not recompute them.",
    "Continuous batching adds new requests to a running decode batch at every step.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "Mitochondria produce most of the energy of a cell as ATP.",
    "DNA stores genetic information in sequences of four bases.",
    "Enzymes are proteins that speed up chemical reactions in cells.",
};

constexpr std::size_t dim = 256;

// A hashed bag-of-words embedding, unit length: texts sharing words point the same way.
std::vector<float> embed_text(std::string_view text) {
    std::vector<float> v(dim, 0.0f);
    std::string word;
    auto flush = [&] {
        static const std::set<std::string, std::less<>> stop = {"a",   "an",   "and",  "are",   "does", "has", "how", "is",
                                                                  "its", "of",   "the",  "that",  "to",   "what", "which", "with"};
        if (!word.empty() && !stop.contains(word)) {  // stop words say nothing about the topic
            const std::uint64_t h = frugal::fnv1a(word);
            v[h % dim] += (h >> 63) != 0 ? 1.0f : -1.0f;
        }
        word.clear();
    };
    for (char c : text) {
        if (std::isalnum(static_cast<unsigned char>(c)) != 0) word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        else flush();
    }
    flush();
    double norm = 0.0;
    for (float x : v) norm += double(x) * x;
    if (norm > 0.0)
        for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
    return v;
}

// The LLM engine stand-in: a generation of `node` decodes `node.tokens` words of a text it
// derives from the prompt (the hypothesis restates the question; the answer quotes the best
// document), one word per step, and keeps them per request until the scheduler commits or
// discards them. Its step costs follow a memory-bound decode (a fixed part per batch).
class template_engine {
public:
    double step(std::span<const frugal::rag::generation_slot> batch) {
        for (const auto& s : batch) {
            generation& g = running_[s.request];
            if (s.step == 0) g = {words(target(*s.state, *s.node, s.docs)), {}};
            if (s.step < g.target.size()) g.text += (g.text.empty() ? "" : " ") + g.target[s.step];
        }
        return step_time(batch.size(), 0);
    }
    double step_time(std::size_t batch, std::size_t context) const {
        return 6.0 + 0.05 * static_cast<double>(batch) + 5e-5 * static_cast<double>(context);
    }
    std::size_t length(const frugal::rag::rag_state&, const frugal::rag::rag_node& n) const { return n.tokens; }
    void commit(frugal::rag::rag_state& s, const frugal::rag::rag_node& n) {
        s.texts[n.name] = std::move(running_[s.request].text);
        running_.erase(s.request);
    }
    void discard(std::size_t request) { running_.erase(request); }

private:
    static std::string target(const frugal::rag::rag_state& s, const frugal::rag::rag_node& n,
                              std::span<const std::uint64_t> docs) {
        if (n.name == "hypothesis") return "Hypothetically: " + s.input;
        return docs.empty() ? std::string("I do not know.") : passages[docs.front()];
    }
    static std::vector<std::string> words(const std::string& text) {
        std::istringstream in(text);
        std::vector<std::string> out;
        for (std::string w; in >> w;) out.push_back(w);
        return out;
    }
    struct generation {
        std::vector<std::string> target;  // what this generation decodes, a word per step
        std::string text;                 // decoded so far
    };
    std::map<std::size_t, generation> running_;  // by request
};
static_assert(frugal::rag::rag_generator<template_engine>);

}  // namespace

int main() {
    std::vector<float> data;
    for (const auto& p : passages) {
        const auto v = embed_text(p);
        data.insert(data.end(), v.begin(), v.end());
    }
    const auto index = frugal::retrieve::ivf_flat::train(data, dim, /*lists=*/4, /*iterations=*/10, /*seed=*/1);

    // Listing 1's workflows, decoding 10-word hypotheses and 12-word answers.
    const frugal::rag::rag_workflow_lengths len{.hypothesis = 10, .answer = 12};
    const auto one_shot = frugal::rag::one_shot_workflow(/*top_k=*/2, len), hyde = frugal::rag::hyde_workflow(2, len);

    // A retrieval's query: the embedding of the hypothesis when the request wrote one, else
    // of the question.
    auto query_text = [](const frugal::rag::rag_state& s) {
        return s.texts.contains("hypothesis") ? std::string(s.text("hypothesis")) : s.input;
    };
    auto embed = [&](const frugal::rag::rag_state& s, const frugal::rag::rag_node&) { return embed_text(query_text(s)); };
    frugal::rag::ivf_retriever retriever(index, embed, {.nprobe = 2});

    // Questions arrive every 15 ms; the serving loop hands each to the scheduler as it
    // arrives, advances the scheduler's clock in 10 ms slices and replies as requests finish.
    const std::vector<std::string> questions = {
        "Which planet has rings of ice?", "What does a vector index store?", "What do mitochondria produce?",
        "Which planet is the hottest?",   "What does the KV cache keep?",    "How does retrieval-augmented generation answer?",
    };
    template_engine engine;
    frugal::sim::rag_event_loop scheduler(engine, retriever, {.policy = frugal::rag::rag_policy::wavefront});
    bool same = true;
    std::size_t asked = 0, answered = 0;
    for (double now = 10.0; answered < questions.size(); now += 10.0) {
        for (; asked < questions.size() && 15.0 * static_cast<double>(asked) < now; ++asked)
            (void)scheduler.submit({15.0 * static_cast<double>(asked), asked % 2 == 0 ? &one_shot : &hyde,
                                    {.input = questions[asked]}});
        scheduler.run_until(now);
        for (const auto& done : scheduler.take_finished()) {
            const auto& s = done.state;
            const auto direct = index.search(embed_text(query_text(s)), 2, 2);
            same = same && s.retrieved.back() == direct;
            std::printf("%5.0f ms  %-48s -> [%llu, %llu] %s\n", done.finish, s.input.c_str(),
                        static_cast<unsigned long long>(s.retrieved.back()[0]),
                        static_cast<unsigned long long>(s.retrieved.back()[1]), std::string(s.text("answer")).c_str());
            ++answered;
        }
    }
    std::printf("times on the scheduler's clock (modelled decode, measured search); same documents as direct search: %s\n",
                same ? "yes" : "no");
    return same ? 0 : 1;
}
