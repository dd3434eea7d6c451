// frugal.attention: the tile plan and tiled attention over numpy float32 arrays, and batched
// attention over a paged K/V cache in float32, float16 or bfloat16 (planned once per step, run
// per layer), computed in place by the reference CPU backend (Eigen + xsimd), with the GIL
// released.

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <frugal/attention/attention_plan.hpp>
#include <frugal/attention/batch_attention.hpp>
#include <frugal/attention/dtype.hpp>
#include <frugal/attention/paged_kv.hpp>
#include <frugal/attention/heads_view.hpp>
#include <frugal/attention/masks.hpp>
#include <frugal/attention/tiled_attention.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>

#include <pybind11/stl.h>

#include "common.hpp"

namespace frugal::python {
namespace {

using namespace frugal::attention;

// A [heads, tokens, dim] (hnd) or [tokens, heads, dim] (nhd) float32 array as a heads_view,
// in place: any strides with a contiguous last axis.
template <bool Mutable>
heads_view<std::conditional_t<Mutable, float, const float>> heads_of(const array_view<float, Mutable>& a, kv_layout l) {
    const std::size_t h = l == kv_layout::hnd ? 0 : 1, t = 1 - h;
    return {a.data(), a.shape(static_cast<py::ssize_t>(h)), a.shape(static_cast<py::ssize_t>(t)), a.shape(2),
            a.stride(static_cast<py::ssize_t>(h)), a.stride(static_cast<py::ssize_t>(t))};
}

void reject_half(py::handle a, const char* name) {
    if (py::isinstance<py::array>(a) && py::reinterpret_borrow<py::array>(a).dtype().kind() == 'f' &&
        py::reinterpret_borrow<py::array>(a).dtype().itemsize() == 2)
        throw py::type_error(std::string(name) +
                             " is float16: frugal::attention::tiled::run computes in float32 on this build; "
                             "pass a float32 array (numpy: a.astype(numpy.float32))");
}

// The numpy dtype that carries storage type `T`: float32, float16, and uint16 for bfloat16
// (numpy has no bfloat16; its arrays hold the raw bits, e.g. `t.view(torch.int16).numpy()`).
template <class T>
py::dtype numpy_dtype() {
    if constexpr (std::is_same_v<T, float>) return py::dtype::of<float>();
    else if constexpr (std::is_same_v<T, float16>) return py::dtype("float16");
    else return py::dtype::of<std::uint16_t>();
}
template <class T>
const char* numpy_name() {
    if constexpr (std::is_same_v<T, float>) return "float32";
    else if constexpr (std::is_same_v<T, float16>) return "float16";
    else return "uint16 (bfloat16 bits)";
}

// The storage dtype an array carries (float32, float16, or uint16 as bfloat16 bits).
storage_dtype dtype_of_array(py::handle a, const char* name) {
    if (!py::isinstance<py::array>(a)) throw py::type_error(std::string(name) + " must be a numpy array");
    const py::dtype dt = py::reinterpret_borrow<py::array>(a).dtype();
    if (dt.equal(numpy_dtype<float>())) return storage_dtype::f32;
    if (dt.equal(numpy_dtype<float16>())) return storage_dtype::f16;
    if (dt.equal(numpy_dtype<bfloat16>())) return storage_dtype::bf16;
    throw py::type_error(std::string(name) + " must be float32, float16 or uint16 (bfloat16 bits), got " +
                         py::str(py::handle(dt)).cast<std::string>());
}

// The storage dtype named by `dtype`: numpy.float32, numpy.float16 (or anything numpy.dtype
// reads as them) or frugal.bfloat16. The names "float32", "float16" and "bfloat16" of the
// previous release still work, with a DeprecationWarning.
storage_dtype dtype_named(py::handle dtype) {
    constexpr std::array<std::pair<storage_dtype, const char*>, 3> names{
        {{storage_dtype::f32, "float32"}, {storage_dtype::f16, "float16"}, {storage_dtype::bf16, "bfloat16"}}};
    const std::string name = [&] {
        if (!py::isinstance<py::str>(dtype)) return dtype_name_of(dtype);
        const auto s = dtype.cast<std::string>();
        for (const auto& [dt, n] : names)
            if (s == n) {
                warn_deprecated(std::string("dtype=\"") + n + "\" is deprecated: pass " +
                                (dt == storage_dtype::bf16 ? "frugal.bfloat16" : "numpy." + s));
                return s;
            }
        throw py::type_error("dtype must be numpy.float32, numpy.float16 or frugal.bfloat16, got the string \"" + s + "\"");
    }();
    for (const auto& [dt, n] : names)
        if (name == n) return dt;
    throw py::type_error("dtype must be numpy.float32, numpy.float16 or frugal.bfloat16, got " + name);
}
// The dtype object of a storage dtype: numpy.dtype("float32"), numpy.dtype("float16") or frugal.bfloat16.
py::object dtype_object(storage_dtype dt) {
    if (dt == storage_dtype::bf16) return bfloat16_object();
    return dt == storage_dtype::f16 ? py::object(numpy_dtype<float16>()) : py::object(numpy_dtype<float>());
}

// An index array of a batch (indptr, page indices, lengths) as int32, FlashInfer's index
// dtype: an int32 array (or a list) is read as it is, an int64 one converted once when every
// value fits.
std::vector<std::int32_t> indices_of(py::handle obj, const char* name) {
    if (py::isinstance<py::array>(obj) && py::reinterpret_borrow<py::array>(obj).dtype().equal(py::dtype::of<std::int64_t>())) {
        const array_view<std::int64_t> a(obj, name);
        std::vector<std::int32_t> out(a.size());
        for (std::size_t i = 0; i < out.size(); ++i) {
            const std::int64_t v = a.data()[i];
            FRUGAL_CHECK(v >= std::numeric_limits<std::int32_t>::min() && v <= std::numeric_limits<std::int32_t>::max(),
                         name, "[", i, "] = ", v, " does not fit the index dtype int32");
            out[i] = static_cast<std::int32_t>(v);
        }
        return out;
    }
    const array_view<std::int32_t> a(obj, name);
    return {a.data(), a.data() + a.size()};
}

// Calls f(T{}) with T the storage type of `dt`.
template <class F>
decltype(auto) with_storage(storage_dtype dt, F&& f) {
    switch (dt) {
        case storage_dtype::f16: return f(float16{});
        case storage_dtype::bf16: return f(bfloat16{});
        case storage_dtype::f32: break;
    }
    return f(float{});
}

// A C-contiguous numpy array of `T` with `ndim` dimensions, used in place.
template <class T>
T* storage_of(py::handle obj, const char* name, py::ssize_t ndim, const char* like = "the plan's dtype") {
    using E = std::remove_const_t<T>;
    if (!py::isinstance<py::array>(obj)) throw py::type_error(std::string(name) + " must be a numpy array");
    auto a = py::reinterpret_borrow<py::array>(obj);
    if (!a.dtype().equal(numpy_dtype<E>()))
        throw py::type_error(std::string(name) + " must be " + numpy_name<E>() + " (" + like + "), got " +
                             py::str(a.dtype()).cast<std::string>());
    if (a.ndim() != ndim)
        throw py::value_error(std::string(name) + " must have " + std::to_string(ndim) + " dimensions, got " +
                              std::to_string(a.ndim()));
    if (!(a.flags() & py::array::c_style)) throw py::value_error(std::string(name) + " must be C-contiguous");
    if constexpr (!std::is_const_v<T>) {
        if (!a.writeable()) throw py::value_error(std::string(name) + " is read-only");
        return static_cast<T*>(a.mutable_data());
    } else {
        return static_cast<T*>(a.data());
    }
}

// A batch plan for one engine step over a paged K/V cache: the page table (copied), the plan
// and its workspace, reused by every layer's run. Runs on one plan take turns (they share the
// workspace).
class py_batch_plan {
public:
    py_batch_plan(py::handle kv_indptr, py::handle kv_indices, py::handle kv_last_page_len, py::handle qo_indptr,
                  std::size_t page_size, std::size_t q_heads, std::size_t kv_heads, std::size_t head_dim,
                  storage_dtype dtype, const attention_mask& mask, float scale, std::size_t threads)
        : indptr_(indices_of(kv_indptr, "kv_indptr")),
          indices_(indices_of(kv_indices, "kv_indices")),
          last_(indices_of(kv_last_page_len, "kv_last_page_len")),
          table_{indptr_, indices_, last_, page_size},
          plan_(make_plan(table_, qo_indptr, q_heads, kv_heads, head_dim, dtype, mask, scale, threads)),
          workspace_(plan_.workspace_bytes() / sizeof(float)) {}
    py_batch_plan(const py_batch_plan&) = delete;
    py_batch_plan& operator=(const py_batch_plan&) = delete;

    [[nodiscard]] const batch_plan& plan() const noexcept { return plan_; }
    [[nodiscard]] std::size_t page_size() const noexcept { return table_.page_size; }

    // batch::run for one layer: q and out [tokens, q_heads, d]; the pools
    // [pages, page_size, kv_heads, d] (nhd) or [pages, kv_heads, page_size, d] (hnd).
    py::object run(py::handle q, py::handle k_pages, py::handle v_pages, py::object out, py::object lse,
                   kv_layout kl) {
        if (out.is_none()) {
            if (!py::isinstance<py::array>(q)) throw py::type_error("q must be a numpy array");
            const auto qa = py::reinterpret_borrow<py::array>(q);
            out = py::array(qa.dtype(), std::vector<py::ssize_t>(qa.shape(), qa.shape() + qa.ndim()));
        }
        std::optional<array_view<float, true>> la;
        matrix_view<float> lse_view;
        if (!lse.is_none()) {
            la.emplace(lse, "lse", 2);
            FRUGAL_CHECK(la->shape(0) == plan_.q_heads() && la->shape(1) == plan_.q_tokens(), "BatchPlan.run: lse is ",
                         la->shape(0), " x ", la->shape(1), ", expected q_heads x tokens = ", plan_.q_heads(), " x ",
                         plan_.q_tokens());
            lse_view = matrix_view<float>(la->data(), la->shape(0), la->shape(1), la->shape(1));
        }
        with_storage(plan_.dtype(), [&]<class T>(T) { run_as<T>(q, k_pages, v_pages, out, lse_view, kl); });
        return out;
    }

private:
    static batch_plan make_plan(const page_table& table, py::handle qo_indptr, std::size_t q_heads,
                                std::size_t kv_heads, std::size_t head_dim, storage_dtype dtype,
                                const attention_mask& mask, float scale, std::size_t threads) {
        table.validate(std::numeric_limits<std::int32_t>::max());  // page indices: checked against each run's pools
        const std::vector<std::int32_t> qo = indices_of(qo_indptr, "qo_indptr");
        std::vector<std::size_t> qo_sizes(qo.size()), kv_lens(table.batch());
        for (std::size_t i = 0; i < qo_sizes.size(); ++i) {
            FRUGAL_CHECK(qo[i] >= 0, "BatchPlan: qo_indptr[", i, "] = ", qo[i], " is negative");
            qo_sizes[i] = static_cast<std::size_t>(qo[i]);
        }
        for (std::size_t s = 0; s < kv_lens.size(); ++s) kv_lens[s] = table.kv_len(s);
        const batch_shape shape{.q_heads = q_heads, .kv_heads = kv_heads, .head_dim = head_dim, .qo_indptr = qo_sizes,
                                .kv_lens = kv_lens};
        return batch::plan(shape, {.mask = mask, .scale = scale, .dtype = dtype, .threads = threads});
    }
    template <class T>
    void run_as(py::handle q, py::handle k_pages, py::handle v_pages, py::handle out, matrix_view<float> lse,
                kv_layout kl) {
        const T* qd = storage_of<const T>(q, "q", 3);
        T* od = storage_of<T>(out, "out", 3);
        const T* kd = storage_of<const T>(k_pages, "k_pages", 4);
        const T* vd = storage_of<const T>(v_pages, "v_pages", 4);
        const auto qa = py::reinterpret_borrow<py::array>(q), ka = py::reinterpret_borrow<py::array>(k_pages);
        const auto oa = py::reinterpret_borrow<py::array>(out), va = py::reinterpret_borrow<py::array>(v_pages);
        const std::size_t d = plan_.head_dim(), kv_heads = plan_.kv_heads();
        const std::size_t pool_page = kl == kv_layout::nhd ? ka.shape(1) : ka.shape(2);
        const std::size_t pool_heads = kl == kv_layout::nhd ? ka.shape(2) : ka.shape(1);
        FRUGAL_CHECK(pool_page == table_.page_size && pool_heads == kv_heads && ka.shape(3) == py::ssize_t(d),
                     "BatchPlan.run: k_pages holds pages of ", pool_page, " tokens x ", pool_heads, " KV heads x ",
                     ka.shape(3), ", the plan ", table_.page_size, " x ", kv_heads, " x ", d);
        for (py::ssize_t i = 0; i < 4; ++i)
            FRUGAL_CHECK(va.shape(i) == ka.shape(i), "BatchPlan.run: v_pages shape differs from k_pages' at axis ", i,
                         ": ", va.shape(i), " != ", ka.shape(i));
        FRUGAL_CHECK(qa.shape(0) == py::ssize_t(plan_.q_tokens()), "BatchPlan.run: q has ", qa.shape(0),
                     " tokens, the plan's qo_indptr ends at ", plan_.q_tokens());
        FRUGAL_CHECK(qa.shape(1) == py::ssize_t(plan_.q_heads()) && qa.shape(2) == py::ssize_t(d), "BatchPlan.run: q has ",
                     qa.shape(1), " heads x ", qa.shape(2), ", the plan ", plan_.q_heads(), " x ", d);
        for (py::ssize_t i = 0; i < 3; ++i) {
            FRUGAL_CHECK(oa.shape(i) == qa.shape(i), "BatchPlan.run: out shape differs from q's at axis ", i, ": ",
                         oa.shape(i), " != ", qa.shape(i));
        }
        const auto kv = paged_kv<const T>::separate(kd, vd, static_cast<std::size_t>(ka.shape(0)), kv_heads, d, kl,
                                                    table_);
        const auto qv = heads_view<const T>::token_major(qd, plan_.q_tokens(), plan_.q_heads(), d);
        const auto ov = heads_view<T>::token_major(od, plan_.q_tokens(), plan_.q_heads(), d);
        py::gil_scoped_release release;
        const std::lock_guard lock(mutex_);
        batch::run(plan_, eigen::attention_backend{}, qv, kv, ov, lse, std::span<float>(workspace_),
                   default_thread_pool());
    }

    std::vector<std::int32_t> indptr_, indices_, last_;
    page_table table_;
    batch_plan plan_;
    std::vector<float> workspace_;
    std::mutex mutex_;
};

// merge_output on every (token, head) row of two partial results over disjoint keys: `out`
// and `other` [tokens, heads, d] of one storage type, their natural LSEs [heads, tokens].
template <class T>
void merge_rows(py::handle out, py::handle lse, py::handle other, py::handle other_lse) {
    T* o = storage_of<T>(out, "out", 3, "out's dtype");
    const T* ob = storage_of<const T>(other, "other", 3, "out's dtype");
    const auto oa = py::reinterpret_borrow<py::array>(out), ba = py::reinterpret_borrow<py::array>(other);
    for (py::ssize_t i = 0; i < 3; ++i)
        FRUGAL_CHECK(ba.shape(i) == oa.shape(i), "merge_state_in_place: other's shape differs from out's at axis ", i,
                     ": ", ba.shape(i), " != ", oa.shape(i));
    const std::size_t tokens = oa.shape(0), heads = oa.shape(1), d = oa.shape(2);
    const array_view<float, true> la(lse, "lse", 2);
    const array_view<float> lb(other_lse, "other_lse", 2);
    FRUGAL_CHECK(la.shape(0) == heads && la.shape(1) == tokens && lb.shape(0) == heads && lb.shape(1) == tokens,
                 "merge_state_in_place: lse is ", la.shape(0), " x ", la.shape(1), " and other_lse ", lb.shape(0), " x ",
                 lb.shape(1), ", expected heads x tokens = ", heads, " x ", tokens);
    // Before anything is written: a NaN or +inf LSE would turn its row into NaN.
    using named = std::pair<const float*, const char*>;
    for (const auto& [l, what] : {named{la.data(), "lse"}, named{lb.data(), "other_lse"}})
        for (std::size_t i = 0; i < heads * tokens; ++i)
            FRUGAL_CHECK(!std::isnan(l[i]) && l[i] != std::numeric_limits<float>::infinity(), "merge_state_in_place: ",
                         what, "[", i / tokens, ", ", i % tokens, "] = ", l[i], " (head ", i / tokens, ", token ",
                         i % tokens, ") must be finite or -inf (a row that saw no keys)");
    py::gil_scoped_release release;
    std::vector<float> a(d), b(d);
    for (std::size_t t = 0; t < tokens; ++t)
        for (std::size_t h = 0; h < heads; ++h) {
            T* row = o + (t * heads + h) * d;
            to_floats(row, a.data(), d);
            to_floats(ob + (t * heads + h) * d, b.data(), d);
            merge_output<softmax_base::e>(a, la.data()[h * tokens + t], b, lb.data()[h * tokens + t]);
            from_floats(a.data(), row, d);
        }
}

}  // namespace

void bind_attention(py::module_ m) {
    py::enum_<causal_alignment>(m, "CausalAlignment", "Where the causal diagonal of a q_len x kv_len score matrix sits.")
        .value("top_left", causal_alignment::top_left, "Query i sees keys j <= i.")
        .value("bottom_right", causal_alignment::bottom_right, "The last query sees the last key.")
        .value("offset", causal_alignment::offset, "Query i sees keys j <= i + offset.");
    py::enum_<softmax_base>(m, "SoftmaxBase", "Base of the log-sum-exp output.")
        .value("e", softmax_base::e)
        .value("two", softmax_base::two);
    py::enum_<kv_layout>(m, "Layout", R"doc(
Axis order of attention arrays, FlashInfer's names: nhd = [tokens, heads, head_dim], hnd =
[heads, tokens, head_dim]. run() reads q, k, v and out in either; a paged pool's pages
(BatchPlan.run, batch_run) are [page_size, kv_heads, head_dim] (nhd) or [kv_heads, page_size,
head_dim] (hnd).

    run(p, q, k, v, layout=Layout.nhd)      # views of a fused QKV projection's output
)doc")
        .value("nhd", kv_layout::nhd, "[tokens, heads, head_dim]: token-major, as a fused QKV projection writes it")
        .value("hnd", kv_layout::hnd, "[heads, tokens, head_dim]: head-major");

    py::class_<attention_mask>(m, "Mask", R"doc(
An analytic attention mask (never stored as a tensor).

    Mask.none(); Mask.causal(); Mask.sliding_window(4096)
)doc")
        .def_static("none", &attention_mask::none, "Every query sees every key.")
        .def_static("causal", &attention_mask::causal, py::arg("alignment") = causal_alignment::bottom_right,
                    py::arg("offset") = 0, "Causal mask with the given alignment.")
        .def_static("sliding_window", &attention_mask::sliding_window, py::arg("window"),
                    py::arg("alignment") = causal_alignment::bottom_right, py::arg("offset") = 0,
                    "Causal mask limited to the `window` most recent keys.")
        .def("visible", &attention_mask::visible, py::arg("i"), py::arg("j"), py::arg("q_len"), py::arg("kv_len"),
             "Whether query i may attend to key j.")
        .def_readonly("is_causal", &attention_mask::is_causal)
        .def_readonly("alignment", &attention_mask::alignment)
        .def_readonly("offset", &attention_mask::offset)
        .def_readonly("window", &attention_mask::window);

    const attention_options d;
    py::class_<attention_plan>(m, "Plan", "A validated tile plan: tile sizes, workers and the exact workspace bytes.")
        .def_property_readonly("q_heads", [](const attention_plan& p) { return p.shape().q_heads; })
        .def_property_readonly("kv_heads", [](const attention_plan& p) { return p.shape().kv_heads; })
        .def_property_readonly("q_len", [](const attention_plan& p) { return p.shape().q_len; })
        .def_property_readonly("kv_len", [](const attention_plan& p) { return p.shape().kv_len; })
        .def_property_readonly("head_dim", [](const attention_plan& p) { return p.shape().head_dim; })
        .def_property_readonly("q_tile", &attention_plan::q_tile)
        .def_property_readonly("kv_tile", &attention_plan::kv_tile)
        .def_property_readonly("workers", &attention_plan::workers, "Work items processed at once.")
        .def_property_readonly("workspace_bytes", &attention_plan::workspace_bytes, "Exact bytes of workspace run() uses.");

    m.def("plan",
          [](std::size_t q_heads, std::size_t kv_heads, std::size_t q_len, std::size_t kv_len, std::size_t head_dim,
             const attention_mask& mask, float scale, softmax_base lse_base, std::size_t threads, std::size_t q_tile,
             std::size_t kv_tile, std::size_t budget_bytes) {
              return tiled::plan({q_heads, kv_heads, q_len, kv_len, head_dim},
                                 {mask, scale, lse_base, threads, q_tile, kv_tile}, memory_budget(budget_bytes));
          },
          py::kw_only(), py::arg("q_heads"), py::arg("kv_heads"), py::arg("q_len"), py::arg("kv_len"), py::arg("head_dim"),
          py::arg("mask") = d.mask, py::arg("scale") = d.scale, py::arg("lse_base") = d.lse_base,
          py::arg("threads") = d.threads, py::arg("q_tile") = d.q_tile, py::arg("kv_tile") = d.kv_tile,
          py::arg("budget_bytes") = std::size_t{16} << 20,
          R"doc(Plans tiled attention so its workspace fits `budget_bytes`: tiles shrink, then workers, until it
fits. scale 0 means 1/sqrt(head_dim); q_heads must be a multiple of kv_heads (GQA/MQA).

    p = plan(q_heads=8, kv_heads=2, q_len=512, kv_len=512, head_dim=64, mask=Mask.causal(), threads=2))doc");

    m.def("run",
          [](const attention_plan& p, py::handle q, py::handle k, py::handle v, py::object out, py::object lse,
             kv_layout l) -> py::object {
              for (auto [a, name] : {std::pair{q, "q"}, std::pair{k, "k"}, std::pair{v, "v"}}) reject_half(a, name);
              const array_view<float> qa(q, "q", 3, true), ka(k, "k", 3, true), va(v, "v", 3, true);
              if (out.is_none()) {
                  const auto& sh = p.shape();
                  out = l == kv_layout::hnd ? py::array_t<float>({sh.q_heads, sh.q_len, sh.head_dim})
                                            : py::array_t<float>({sh.q_len, sh.q_heads, sh.head_dim});
              }
              reject_half(out, "out");
              const array_view<float, true> oa(out, "out", 3, true);
              matrix_view<float> lse_view;
              std::optional<array_view<float, true>> la;
              if (!lse.is_none()) {
                  la.emplace(lse, "lse", 2);
                  lse_view = matrix_view<float>(la->data(), la->shape(0), la->shape(1), la->shape(1));
              }
              const auto qv = heads_of(qa, l), kv = heads_of(ka, l), vv = heads_of(va, l);
              const auto ov = heads_of(oa, l);
              {
                  py::gil_scoped_release release;
                  tiled::run(p, eigen::attention_backend{}, qv, kv, vv, ov, lse_view);
              }
              return out;
          },
          py::arg("plan"), py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(), py::arg("out") = py::none(),
          py::arg("lse") = py::none(), py::arg("layout") = kv_layout::hnd,
          R"doc(out = softmax(scale Q K^T + mask) V per head, computed tile by tile in place on float32 arrays
(3-D in `layout`: Layout.hnd [heads, tokens, dim] or Layout.nhd [tokens, heads, dim]; last axis
contiguous, any other strides; no copies). `out` is allocated when not given; `lse` (q_heads x
q_len float32) receives the log-sum-exp. Deterministic for any thread count.

    out = run(p, q, k, v)              # q: [8, 512, 64], k and v: [2, 512, 64] float32)doc");

    py::class_<py_batch_plan>(m, "BatchPlan", R"doc(
One engine step's batch over a paged K/V cache, planned once and run per layer (FlashInfer's
plan/run): the page table (FlashInfer's: sequence s owns pages kv_indices[kv_indptr[s] ..
kv_indptr[s + 1]] (int32) and uses kv_last_page_len[s] tokens of its last one), the query
rows (sequence s owns rows qo_indptr[s] .. qo_indptr[s + 1]), the work split and the workspace,
fixed here. Index arrays are int32 (int64 is converted); dtype is numpy.float32,
numpy.float16 or frugal.bfloat16 (numpy has no bfloat16: its arrays are uint16 holding the
bits). Each sequence's last q_len keys are its new tokens (bottom-right causal mask by
default). Runs on one plan take turns.

    plan = BatchPlan(kv_indptr, kv_indices, kv_last_page_len, qo_indptr, page_size=16,
                     q_heads=32, kv_heads=8, head_dim=128, dtype=frugal.bfloat16, threads=4)
    for layer in layers:
        out = plan.run(layer.q, layer.k_pool, layer.v_pool))doc")
        .def(py::init([](py::handle indptr, py::handle indices, py::handle last, py::handle qo, std::size_t page_size,
                         std::size_t q_heads, std::size_t kv_heads, std::size_t head_dim, py::handle dtype,
                         const attention_mask& mask, float scale, std::size_t threads) {
                 return std::make_unique<py_batch_plan>(indptr, indices, last, qo, page_size, q_heads, kv_heads,
                                                        head_dim, dtype_named(dtype), mask, scale, threads);
             }),
             py::arg("kv_indptr"), py::arg("kv_indices"), py::arg("kv_last_page_len"), py::arg("qo_indptr"),
             py::kw_only(), py::arg("page_size"), py::arg("q_heads"), py::arg("kv_heads"), py::arg("head_dim"),
             py::arg("dtype") = numpy_dtype<float>(), py::arg("mask") = attention_mask::causal(), py::arg("scale") = 0.0f,
             py::arg("threads") = 1)
        .def("run", &py_batch_plan::run, py::arg("q"), py::arg("k_pages"), py::arg("v_pages"), py::kw_only(),
             py::arg("out") = py::none(), py::arg("lse") = py::none(), py::arg("kv_layout") = kv_layout::nhd,
             R"doc(Attention for one layer: q and out [tokens, q_heads, head_dim], the pools [pages, page_size,
kv_heads, head_dim] (Layout.nhd) or [pages, kv_heads, page_size, head_dim] (Layout.hnd), all of the
plan's dtype and C-contiguous; `out` is allocated when not given; `lse` (float32, q_heads x
tokens) receives each row's natural log-sum-exp (for merging with another pass, e.g. a shared
prefix). Allocates nothing else; the result does not depend on the thread count.

    out = plan.run(q, k_pool, v_pool, lse=lse))doc")
        .def_property_readonly("batch", [](const py_batch_plan& p) { return p.plan().batch(); })
        .def_property_readonly("tokens", [](const py_batch_plan& p) { return p.plan().q_tokens(); },
                               "Query rows of the batch (q's first axis).")
        .def_property_readonly("kv_lens", [](const py_batch_plan& p) {
            const auto l = p.plan().kv_lens();
            return std::vector<std::size_t>(l.begin(), l.end());
        })
        .def_property_readonly("page_size", &py_batch_plan::page_size)
        .def_property_readonly("dtype", [](const py_batch_plan& p) { return dtype_object(p.plan().dtype()); },
                               "numpy.dtype(\"float32\"), numpy.dtype(\"float16\") or frugal.bfloat16.")
        .def_property_readonly("workers", [](const py_batch_plan& p) { return p.plan().workers(); })
        .def_property_readonly("kv_chunk", [](const py_batch_plan& p) { return p.plan().kv_chunk(); },
                               "Keys per split-KV chunk of a long decode.")
        .def_property_readonly("workspace_bytes", [](const py_batch_plan& p) { return p.plan().workspace_bytes(); },
                               "Exact bytes of workspace the plan holds for its runs.");

    m.def("batch_run",
          [](py::handle q, py::handle k_pages, py::handle v_pages, py::handle kv_indptr, py::handle kv_indices,
             py::handle kv_last_page_len, py::handle qo_indptr, py::object out, kv_layout kl, const attention_mask& mask,
             float scale, std::size_t threads) -> py::object {
              const storage_dtype dt = dtype_of_array(q, "q");
              if (!py::isinstance<py::array>(k_pages)) throw py::type_error("k_pages must be a numpy array");
              const auto ka = py::reinterpret_borrow<py::array>(k_pages);
              FRUGAL_CHECK(ka.ndim() == 4, "batch_run: k_pages must have 4 dimensions, got ", ka.ndim());
              const auto qa = py::reinterpret_borrow<py::array>(q);
              FRUGAL_CHECK(qa.ndim() == 3, "batch_run: q must have 3 dimensions, got ", qa.ndim());
              const std::size_t page_size = kl == kv_layout::nhd ? ka.shape(1) : ka.shape(2);
              const std::size_t kv_heads = kl == kv_layout::nhd ? ka.shape(2) : ka.shape(1);
              py_batch_plan plan(kv_indptr, kv_indices, kv_last_page_len, qo_indptr, page_size, qa.shape(1), kv_heads,
                                 qa.shape(2), dt, mask, scale, threads);
              return plan.run(q, k_pages, v_pages, std::move(out), py::none(), kl);
          },
          py::arg("q"), py::arg("k_pages"), py::arg("v_pages"), py::arg("kv_indptr"), py::arg("kv_indices"),
          py::arg("kv_last_page_len"), py::arg("qo_indptr"), py::kw_only(), py::arg("out") = py::none(),
          py::arg("kv_layout") = kv_layout::nhd, py::arg("mask") = attention_mask::causal(), py::arg("scale") = 0.0f,
          py::arg("threads") = 1,
          R"doc(Attention for a batch of sequences over a paged K/V cache (prefills, decodes or both), planned
and run once (an engine reuses a BatchPlan across layers), in float32, float16 or bfloat16 (uint16
arrays of bfloat16 bits); q, the pools and out share the dtype, computed in float32 and rounded
once. q and out are ragged [tokens, q_heads, head_dim]: sequence s owns rows
qo_indptr[s]..qo_indptr[s + 1]. The page table is FlashInfer's: sequence s owns pages
kv_indices[kv_indptr[s]..kv_indptr[s + 1]] and uses kv_last_page_len[s] tokens of its last one;
its last q_len keys are its new tokens under the bottom-right causal mask. Index arrays are
int32 (int64 is converted).

    # two decodes: 3 and 1 pages of 16 tokens, 32 query heads over 8 KV heads, d = 128
    out = batch_run(q, k_pool, v_pool, np.array([0, 3, 4], np.int32), np.array([5, 0, 7, 2], np.int32),
                    np.array([16, 9], np.int32), np.array([0, 1, 2], np.int32))   # q: [2, 32, 128] float16)doc");

    m.def("merge_state_in_place",
          [](py::handle out, py::handle lse, py::handle other, py::handle other_lse) {
              with_storage(dtype_of_array(out, "out"), [&]<class T>(T) { merge_rows<T>(out, lse, other, other_lse); });
          },
          py::arg("out"), py::arg("lse"), py::arg("other"), py::arg("other_lse"),
          R"doc(Merges the attention of the same queries over another, disjoint set of keys into (out, lse) in
place (FlashInfer's merge_state_in_place; cascade attention: a shared prefix's pages in one
BatchPlan, each request's own pages in another). out and other are [tokens, heads, head_dim]
of one dtype (float32, float16, or uint16 bfloat16 bits), lse and other_lse float32
[heads, tokens] natural log-sum-exps as BatchPlan.run writes them; a row that saw no keys
(lse -inf) takes the other's.

    merge_state_in_place(out, lse, out_suffix, lse_suffix))doc");
}

}  // namespace frugal::python
