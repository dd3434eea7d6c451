// streaming_reranker: a small transformer encoder with RANDOM weights, run two ways over one
// pool of candidates:
//   memory: every layer's weights loaded up front, candidates in fixed batches, no pruning;
//   stream: GRATING's monolithic forwarding (frugal::prune::progressive_rank) with the dual-layer
//           sliding window (frugal::stream::layer_window reading the weight file), chunks planned by
//           frugal::schedule::plan_chunks from a measured layer load and per-candidate compute, and
//           progressive cluster pruning.
// Each mode runs in its own process so that each peak RSS is its own. The weights are
// random, so the scores, and which candidates win, carry no meaning: the example shows the
// mechanics (what is resident, what is computed) and the memory, nothing about ranking quality.
//
//   streaming_reranker [--layers L] [--dim D] [--ffn F] [--tokens T] [--candidates N] [--k K]
//                      [--chunk-memory-kib M]   (intermediates of one chunk; default: 4 candidates')
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <Eigen/Dense>

#include <frugal/prune/cluster_pruner.hpp>
#include <frugal/prune/progressive_ranker.hpp>
#include <frugal/stream/file_layer_loader.hpp>
#include <frugal/stream/layer_window.hpp>

namespace {

struct config {
    std::size_t layers = 6, dim = 64, ffn = 256, tokens = 16, candidates = 20, k = 10, batch = 4, vocab = 1000;
    std::size_t chunk_memory_kib = 0;  // 0: room for `batch` candidates' intermediates
    std::size_t layer_floats() const { return 4 * dim * dim + 2 * dim * ffn; }
    // One candidate's intermediates inside encoder_layer: q, k, v, the attention matrix, the
    // attention output and the MLP's hidden activations.
    double intermediate_bytes() const { return double(tokens * (4 * dim + tokens + ffn) * sizeof(float)); }
};

using matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using cmap = Eigen::Map<const matrix>;

long peak_rss_kib() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;  // KiB on Linux
}

void rms_normalize(matrix& x) {
    for (Eigen::Index r = 0; r < x.rows(); ++r) x.row(r) /= std::sqrt(x.row(r).squaredNorm() / float(x.cols()) + 1e-6f);
}

// One encoder layer (single-head attention + ReLU MLP, residuals, RMS norms) in place.
void encoder_layer(const config& c, std::span<const float> w, matrix& x) {
    const auto d = Eigen::Index(c.dim), f = Eigen::Index(c.ffn);
    const float* p = w.data();
    const cmap wq(p, d, d), wk(p + d * d, d, d), wv(p + 2 * d * d, d, d), wo(p + 3 * d * d, d, d);
    const cmap w1(p + 4 * d * d, d, f), w2(p + 4 * d * d + d * f, f, d);
    const matrix q = x * wq, k = x * wk, v = x * wv;
    matrix a = (q * k.transpose()) / std::sqrt(float(d));
    for (Eigen::Index r = 0; r < a.rows(); ++r) {
        a.row(r).array() -= a.row(r).maxCoeff();
        a.row(r) = a.row(r).array().exp().matrix();
        a.row(r) /= a.row(r).sum();
    }
    x += (a * v) * wo;
    rms_normalize(x);
    x += (x * w1).cwiseMax(0.0f) * w2;
    rms_normalize(x);
}

struct shared_inputs {
    matrix embedding;                        // vocab x dim
    std::vector<std::vector<int>> tokens;    // per candidate
    Eigen::VectorXf head;                    // classifier
};

shared_inputs make_inputs(const config& c) {
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    shared_inputs in;
    in.embedding = matrix::NullaryExpr(Eigen::Index(c.vocab), Eigen::Index(c.dim), [&] { return normal(rng); });
    in.head = Eigen::VectorXf::NullaryExpr(Eigen::Index(c.dim), [&] { return normal(rng); });
    std::uniform_int_distribution<int> tok(0, int(c.vocab) - 1);
    in.tokens.resize(c.candidates);
    for (auto& t : in.tokens) {
        t.resize(c.tokens);
        for (int& id : t) id = tok(rng);
    }
    return in;
}

matrix embed(const config& c, const shared_inputs& in, std::size_t id) {
    matrix x(Eigen::Index(c.tokens), Eigen::Index(c.dim));
    for (std::size_t t = 0; t < c.tokens; ++t) x.row(Eigen::Index(t)) = in.embedding.row(in.tokens[id][t]);
    return x;
}

float score(const shared_inputs& in, const matrix& x) {
    const float z = x.colwise().mean().dot(in.head.transpose()) / std::sqrt(float(x.cols()));
    return 1.0f / (1.0f + std::exp(-z));
}

std::filesystem::path write_weights(const config& c, std::vector<std::size_t>& offsets) {
    const auto path = std::filesystem::temp_directory_path() / ("frugal_streaming_reranker_" + std::to_string(::getpid()) + ".bin");
    std::ofstream out(path, std::ios::binary);
    std::mt19937 rng(11);
    const float scale = 1.0f / std::sqrt(float(c.dim));
    std::normal_distribution<float> normal(0.0f, scale);
    offsets = {0};
    std::vector<float> layer(c.layer_floats());
    for (std::size_t l = 0; l < c.layers; ++l) {
        for (float& v : layer) v = normal(rng);
        out.write(reinterpret_cast<const char*>(layer.data()), std::streamsize(layer.size() * sizeof(float)));
        offsets.push_back(offsets.back() + layer.size() * sizeof(float));
    }
    return path;
}

// What the chunk planner needs, measured on this machine before the run: one layer's read
// from the weight file, and one candidate through one layer (a CPU gains nothing from
// batching candidates, so one candidate is also the chunk that saturates it, and the plan is
// the smallest chunk: fewest intermediates resident). The probe's buffer is freed before the
// window allocates its two.
frugal::prune::chunk_planning measure_planning(const config& c, const shared_inputs& in, frugal::stream::file_layer_loader& loader) {
    using clock = std::chrono::steady_clock;
    std::vector<float> layer(c.layer_floats());
    auto start = clock::now();
    loader.load(0, std::as_writable_bytes(std::span<float>(layer)));
    const double load = std::chrono::duration<double>(clock::now() - start).count();
    matrix x = embed(c, in, 0);
    // the fastest of three: the first run also warms the caches
    double per_candidate = std::numeric_limits<double>::infinity();
    for (int run = 0; run < 3; ++run) {
        start = clock::now();
        encoder_layer(c, layer, x);
        per_candidate = std::min(per_candidate, std::chrono::duration<double>(clock::now() - start).count());
    }
    const double limit =
        c.chunk_memory_kib > 0 ? double(c.chunk_memory_kib) * 1024.0 : double(c.batch) * c.intermediate_bytes();
    return {.cost = {.per_token_seconds = per_candidate, .min_chunk_seconds = per_candidate,
                     .intermediate_bytes_per_token = c.intermediate_bytes()},
            .next_layer_load_seconds = load, .memory_limit_bytes = limit};
}

// frugal::prune::progressive_model over the encoder; weights come from the sliding window.
struct streamed_encoder {
    const config* c;
    const shared_inputs* in;
    frugal::stream::layer_window<frugal::stream::file_layer_loader>* window;
    std::vector<matrix> hidden;
    std::span<const float> weights;
    std::size_t layers() const { return c->layers; }
    void embed(std::span<const std::size_t> ids) {
        hidden.resize(c->candidates);
        for (std::size_t id : ids) hidden[id] = ::embed(*c, *in, id);
    }
    void begin_layer(std::size_t l) {
        const auto bytes = window->acquire(l);
        weights = {reinterpret_cast<const float*>(bytes.data()), bytes.size() / sizeof(float)};
    }
    void end_layer(std::size_t l) { window->release(l); }
    void forward(std::size_t, std::span<const std::size_t> chunk) {
        for (std::size_t id : chunk) encoder_layer(*c, weights, hidden[id]);
    }
    void score(std::span<const std::size_t> ids, std::span<float> out) const {
        for (std::size_t i = 0; i < ids.size(); ++i) out[i] = ::score(*in, hidden[ids[i]]);
    }
};
static_assert(frugal::prune::progressive_model<streamed_encoder>);

int run_mode(const config& c, const std::string& mode, const std::filesystem::path& file,
             const std::vector<std::size_t>& offsets) {
    const shared_inputs in = make_inputs(c);
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::size_t> top;
    std::size_t computed = 0;
    double io_wait = 0.0;
    std::string chunks = "fixed batches of " + std::to_string(c.batch);
    if (mode == "memory") {
        std::vector<std::vector<float>> weights(c.layers, std::vector<float>(c.layer_floats()));
        std::ifstream f(file, std::ios::binary);
        for (auto& w : weights) f.read(reinterpret_cast<char*>(w.data()), std::streamsize(w.size() * sizeof(float)));
        std::vector<float> final_scores(c.candidates);
        for (std::size_t b = 0; b < c.candidates; b += c.batch) {  // fixed batches, every layer
            for (std::size_t id = b; id < std::min(c.candidates, b + c.batch); ++id) {
                matrix x = embed(c, in, id);
                for (const auto& w : weights) encoder_layer(c, w, x);
                final_scores[id] = score(in, x);
                computed += c.layers;
            }
        }
        std::vector<std::size_t> idx(c.candidates);
        std::iota(idx.begin(), idx.end(), std::size_t{0});
        std::partial_sort(idx.begin(), idx.begin() + std::ptrdiff_t(c.k), idx.end(),
                          [&](std::size_t a, std::size_t b) { return final_scores[a] > final_scores[b]; });
        top.assign(idx.begin(), idx.begin() + std::ptrdiff_t(c.k));
    } else {
        frugal::stream::file_layer_loader loader(file, offsets);
        const frugal::prune::chunk_planning plan = measure_planning(c, in, loader);
        frugal::stream::layer_window window(loader);
        streamed_encoder model{&c, &in, &window, {}, {}};
        frugal::prune::cluster_pruner pruner({.threshold = 0.05});
        const auto r = frugal::prune::progressive_rank(model, c.candidates, c.k, pruner, {.planning = plan});
        top = r.top;
        computed = r.candidate_layers_computed;
        io_wait = window.wait_seconds();
        std::ostringstream planned;
        planned << "planned per layer (load " << plan.next_layer_load_seconds * 1e3 << " ms, one candidate "
                << plan.cost.per_token_seconds * 1e3 << " ms):";
        for (const auto& l : r.layers) planned << " " << l.chunk_size;
        chunks = planned.str();
    }
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::cout << "mode=" << mode << " peak_rss_kib=" << peak_rss_kib() << " time_ms=" << ms
              << " candidate_layers=" << computed << " io_wait_ms=" << io_wait * 1e3 << " top=";
    for (std::size_t id : top) std::cout << id << ",";
    std::cout << "\n  chunks: " << chunks << "\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    config c;
    std::string mode, file;
    std::vector<std::size_t> offsets;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string key = argv[i], value = argv[i + 1];
        if (key == "--mode") mode = value;
        else if (key == "--file") file = value;
        else if (key == "--offsets") {
            std::istringstream s(value);
            for (std::string part; std::getline(s, part, ',');) offsets.push_back(std::stoul(part));
        } else {
            std::size_t* slot = key == "--layers" ? &c.layers : key == "--dim" ? &c.dim : key == "--ffn" ? &c.ffn
                              : key == "--tokens" ? &c.tokens : key == "--candidates" ? &c.candidates
                              : key == "--k" ? &c.k : key == "--chunk-memory-kib" ? &c.chunk_memory_kib
                              : nullptr;
            if (slot == nullptr) {
                std::cerr << "unknown option " << key << "\n";
                return 2;
            }
            *slot = std::stoul(value);
        }
    }
    try {
        if (!mode.empty()) return run_mode(c, mode, file, offsets);
        // Parent: write the random weights, then run each mode in a child process.
        const auto path = write_weights(c, offsets);
        std::string common = " --layers " + std::to_string(c.layers) + " --dim " + std::to_string(c.dim) + " --ffn " +
                             std::to_string(c.ffn) + " --tokens " + std::to_string(c.tokens) + " --candidates " +
                             std::to_string(c.candidates) + " --k " + std::to_string(c.k) + " --chunk-memory-kib " +
                             std::to_string(c.chunk_memory_kib) + " --file " + path.string() +
                             " --offsets ";
        for (std::size_t i = 0; i < offsets.size(); ++i) common += (i ? "," : "") + std::to_string(offsets[i]);
        std::cout << "random-weight encoder: " << c.layers << " layers x " << c.layer_floats() * 4 / 1024
                  << " KiB of weights, " << c.candidates << " candidates x " << c.tokens << " tokens, top-" << c.k << "\n";
        int rc = 0;
        for (const char* m : {"memory", "stream"}) {
            std::cout.flush();
            rc |= std::system((std::string(argv[0]) + " --mode " + m + common).c_str());
        }
        std::filesystem::remove(path);
        std::cout << "These weights are random: the scores carry no meaning. The example shows what is resident\n"
                     "(two layers of weights instead of all) and what is computed (pruned candidate-layers).\n";
        return rc == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "streaming_reranker: " << e.what() << "\n";
        return 1;
    }
}
