// frugal.attention: the tile plan and tiled attention over numpy float32 arrays, and batched
// attention over a paged K/V cache in float32, float16 or bfloat16 (planned once per step, run
// per layer; the pages also FP8 or int8 with their scales, which quantize_into writes),
// computed in place by the reference CPU backend (Eigen + xsimd), with the GIL released.

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
#include <frugal/attention/kv_quantization.hpp>
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

// The numpy dtype that carries storage type `T`: float32, float16, int8, and the unsigned
// integers of the bits for the formats numpy lacks (uint16 for bfloat16, uint8 for FP8; e.g.
// `t.view(torch.int16).numpy()`).
template <class T>
py::dtype numpy_dtype() {
    if constexpr (std::is_same_v<T, float>) return py::dtype::of<float>();
    else if constexpr (std::is_same_v<T, float16>) return py::dtype("float16");
    else if constexpr (std::is_same_v<T, bfloat16>) return py::dtype::of<std::uint16_t>();
    else if constexpr (std::is_same_v<T, std::int8_t>) return py::dtype::of<std::int8_t>();
    else return py::dtype::of<std::uint8_t>();
}
template <class T>
const char* numpy_name() {
    if constexpr (std::is_same_v<T, float>) return "float32";
    else if constexpr (std::is_same_v<T, float16>) return "float16";
    else if constexpr (std::is_same_v<T, bfloat16>) return "uint16 (bfloat16 bits)";
    else if constexpr (std::is_same_v<T, std::int8_t>) return "int8";
    else if constexpr (std::is_same_v<T, float8_e4m3>) return "uint8 (float8_e4m3 bits)";
    else return "uint8 (float8_e5m2 bits)";
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

// Each storage dtype with the name dtype_name_of gives its Python dtype.
constexpr std::array<std::pair<storage_dtype, const char*>, 6> python_names{
    {{storage_dtype::f32, "float32"},
     {storage_dtype::f16, "float16"},
     {storage_dtype::bf16, "bfloat16"},
     {storage_dtype::fp8_e4m3, "float8_e4m3"},
     {storage_dtype::fp8_e5m2, "float8_e5m2"},
     {storage_dtype::int8, "int8"}}};
constexpr const char* kv_dtypes_text = "frugal.float8_e4m3, frugal.float8_e5m2 or numpy.int8";
const char* python_name(storage_dtype dt) {
    for (const auto& [d, n] : python_names)
        if (d == dt) return n;
    return "?";
}

bool is_8bit(storage_dtype dt) {
    return dt == storage_dtype::fp8_e4m3 || dt == storage_dtype::fp8_e5m2 || dt == storage_dtype::int8;
}

// A dtype argument: its name (dtype_name_of) and the storage dtype of that name, if frugal
// stores one.
struct named_dtype {
    std::string name;
    std::optional<storage_dtype> storage;
};
// The dtype `dtype` given as argument `arg`; uint8 is refused as ambiguous (FP8 arrays are
// uint8, but which format?).
named_dtype storage_dtype_named(py::handle dtype, const char* arg) {
    named_dtype out{dtype_name_of(dtype), std::nullopt};
    for (const auto& [dt, n] : python_names)
        if (out.name == n) out.storage = dt;
    if (out.name == "uint8")
        throw py::type_error(std::string(arg) + "=uint8 is ambiguous: FP8 arrays are uint8, name their format with "
                                                "frugal.float8_e4m3 or frugal.float8_e5m2");
    return out;
}

// The storage dtype of Q and the output named by `dtype`: numpy.float32, numpy.float16 (or
// anything numpy.dtype reads as them) or frugal.bfloat16. The names "float32", "float16" and
// "bfloat16" of the previous release still work, with a DeprecationWarning.
storage_dtype dtype_named(py::handle dtype) {
    constexpr const char* expected = "dtype must be numpy.float32, numpy.float16 or frugal.bfloat16, got ";
    if (py::isinstance<py::str>(dtype)) {
        const auto s = dtype.cast<std::string>();
        for (const auto& [dt, n] : python_names)
            if (s == n && !is_8bit(dt)) {
                warn_deprecated(std::string("dtype=\"") + n + "\" is deprecated: pass " +
                                (dt == storage_dtype::bf16 ? "frugal.bfloat16" : "numpy." + s));
                return dt;
            }
        throw py::type_error(std::string(expected) + "the string \"" + s + "\"");
    }
    const auto [name, dt] = storage_dtype_named(dtype, "dtype");
    if (dt && !is_8bit(*dt)) return *dt;
    throw py::type_error(expected + name + (dt ? std::string(" (a K/V format: pass it as kv_dtype)") : ""));
}

// The storage dtype of K and V named by `kv_dtype` for a plan of `dtype`: None (or `dtype`
// itself) for K/V of the plan's dtype, or an 8-bit format.
storage_dtype kv_dtype_named(py::handle kv_dtype, storage_dtype dtype) {
    if (kv_dtype.is_none()) return dtype;
    const auto [name, dt] = storage_dtype_named(kv_dtype, "kv_dtype");
    if (dt && (is_8bit(*dt) || *dt == dtype)) return *dt;
    throw py::type_error(std::string("kv_dtype must be None (the plan's dtype), ") + kv_dtypes_text + ", got " + name);
}

// The dtype object of a storage dtype: a numpy.dtype (float32, float16, int8), or frugal.bfloat16,
// frugal.float8_e4m3, frugal.float8_e5m2.
py::object dtype_object(storage_dtype dt) {
    switch (dt) {
        case storage_dtype::bf16: return bits_dtype_object(bits_dtype::bfloat16);
        case storage_dtype::fp8_e4m3: return bits_dtype_object(bits_dtype::float8_e4m3);
        case storage_dtype::fp8_e5m2: return bits_dtype_object(bits_dtype::float8_e5m2);
        case storage_dtype::f16: return numpy_dtype<float16>();
        case storage_dtype::int8: return numpy_dtype<std::int8_t>();
        case storage_dtype::f32: break;
    }
    return numpy_dtype<float>();
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

// Calls f(T{}) with T the storage type of `dt`, any of K/V's (the 8-bit ones too).
template <class F>
decltype(auto) with_kv_storage(storage_dtype dt, F&& f) {
    switch (dt) {
        case storage_dtype::f16: return f(float16{});
        case storage_dtype::bf16: return f(bfloat16{});
        case storage_dtype::fp8_e4m3: return f(float8_e4m3{});
        case storage_dtype::fp8_e5m2: return f(float8_e5m2{});
        case storage_dtype::int8: return f(std::int8_t{});
        case storage_dtype::f32: break;
    }
    return f(float{});
}
// Calls f(T{}) with T the storage type of `dt`, one of Q's and the output's (f32, bf16, f16;
// dtype_named and dtype_of_array give no other).
template <class F>
decltype(auto) with_storage(storage_dtype dt, F&& f) {
    return with_kv_storage(dt, [&]<class T>(T t) {
        if constexpr (storage_type<T>) return f(t);
        else throw py::type_error(std::string(python_name(dt)) + " is a K/V format, not one of Q and the output");
    });
}

// A C-contiguous numpy array of `T` with `ndim` dimensions, used in place.
template <class T>
T* storage_of(py::handle obj, const char* name, py::ssize_t ndim, const char* like = "the plan's dtype") {
    using E = std::remove_const_t<T>;
    if (!py::isinstance<py::array>(obj)) throw py::type_error(std::string(name) + " must be a numpy array");
    auto a = py::reinterpret_borrow<py::array>(obj);
    if (!a.dtype().equal(numpy_dtype<E>())) {
        // 8-bit pages for a plan without kv_dtype: say where the format goes.
        const bool wants_kv_dtype = !quantized_kv_type<E> && a.itemsize() == 1 && std::string(name).ends_with("_pages");
        throw py::type_error(std::string(name) + " must be " + numpy_name<E>() + " (" + like + "), got " +
                             py::str(a.dtype()).cast<std::string>() +
                             (wants_kv_dtype ? std::string(" (8-bit K/V: give the plan kv_dtype=") + kv_dtypes_text + ")"
                                             : ""));
    }
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

// The pages of a pool: [pages, page_size, kv_heads, head_dim] (nhd) or [pages, kv_heads,
// page_size, head_dim] (hnd), read from k_pages' shape; v_pages must have the same.
struct pool_shape {
    std::size_t pages, page_size, kv_heads, head_dim;
    kv_layout layout;

    pool_shape(py::handle k_pages, py::handle v_pages, kv_layout l, const char* who) : layout(l) {
        const auto ka = py::reinterpret_borrow<py::array>(k_pages), va = py::reinterpret_borrow<py::array>(v_pages);
        for (py::ssize_t i = 0; i < 4; ++i)
            FRUGAL_CHECK(va.shape(i) == ka.shape(i), who, ": v_pages shape differs from k_pages' at axis ", i, ": ",
                         va.shape(i), " != ", ka.shape(i));
        pages = static_cast<std::size_t>(ka.shape(0));
        page_size = static_cast<std::size_t>(l == kv_layout::nhd ? ka.shape(1) : ka.shape(2));
        kv_heads = static_cast<std::size_t>(l == kv_layout::nhd ? ka.shape(2) : ka.shape(1));
        head_dim = static_cast<std::size_t>(ka.shape(3));
    }
    // The shape of a per-token scale pool: the pages' without head_dim.
    [[nodiscard]] std::string token_scales_text() const {
        const std::size_t a = layout == kv_layout::nhd ? page_size : kv_heads, b = layout == kv_layout::nhd ? kv_heads : page_size;
        return "(" + std::to_string(pages) + ", " + std::to_string(a) + ", " + std::to_string(b) + ") = " +
               (layout == kv_layout::nhd ? "(pages, page_size, kv_heads) for Layout.nhd"
                                         : "(pages, kv_heads, page_size) for Layout.hnd");
    }
};

// The dequantization scales of an 8-bit K/V cache as Python gives them (k_scale, v_scale):
// float32 arrays of 1 value (per tensor; a number or a 0-d array too), of kv_heads values (per
// head) or per-token pools shaped as the pages without head_dim, the granularity read from the
// shape (with kv_heads = 1, one value is per tensor and per head alike). Per-token pools that
// `writes` (quantize_into) must be writable numpy arrays; the rest is only read. Both arguments
// are given for an 8-bit `dt`, neither for another.
class scales_arg {
public:
    scales_arg(storage_dtype dt, py::handle k, py::handle v, const pool_shape& pool, bool writes, const char* who) {
        if (!is_8bit(dt)) {
            FRUGAL_CHECK(k.is_none() && v.is_none(), who, ": ", k.is_none() ? "v_scale" : "k_scale",
                         " given for K/V of ", python_name(dt), ": scales are for 8-bit K/V (kv_dtype=", kv_dtypes_text,
                         ")");
            return;
        }
        FRUGAL_CHECK(!k.is_none() && !v.is_none(), who, ": ", python_name(dt), " K/V needs k_scale and v_scale (float32: ",
                     "1 value per tensor, kv_heads = ", pool.kv_heads, " per head, or per token ",
                     pool.token_scales_text(), ")");
        const auto [gk, pk] = parse(k, "k_scale", pool, writes, who);
        const auto [gv, pv] = parse(v, "v_scale", pool, writes, who);
        FRUGAL_CHECK(gk == gv, who, ": k_scale is ", granularity_text(gk), " but v_scale ", granularity_text(gv),
                     ": give both at one granularity");
        scales_ = {gk, pk, pv};
    }
    // The scales, for a cache that reads them or (quantize_into) writes per-token ones.
    [[nodiscard]] const basic_kv_scales<float>& scales() const noexcept { return scales_; }
    [[nodiscard]] kv_scales read_only() const noexcept { return {scales_.granularity, scales_.k, scales_.v}; }

private:
    static const char* granularity_text(scale_granularity g) {
        return g == scale_granularity::tensor ? "per tensor" : g == scale_granularity::head ? "per head" : "per token";
    }
    std::pair<scale_granularity, float*> parse(py::handle obj, const char* name, const pool_shape& pool, bool writes,
                                               const char* who) {
        py::object a = py::reinterpret_borrow<py::object>(obj);
        if (!py::isinstance<py::array>(a) && PyNumber_Check(a.ptr())) a = py::make_tuple(a);  // a number, numpy's too
        else if (py::isinstance<py::array>(a) && py::reinterpret_borrow<py::array>(a).ndim() == 0) a = a.attr("reshape")(1);
        const py::ssize_t ndim = py::isinstance<py::array>(a) ? py::reinterpret_borrow<py::array>(a).ndim() : 1;
        if (ndim == 3) {
            const std::size_t x = pool.layout == kv_layout::nhd ? pool.page_size : pool.kv_heads;
            const std::size_t y = pool.layout == kv_layout::nhd ? pool.kv_heads : pool.page_size;
            float* data = nullptr;
            std::array<std::size_t, 3> shape{};
            if (writes) {
                const array_view<float, true> view(a, name, 3);
                data = view.data();
                shape = {view.shape(0), view.shape(1), view.shape(2)};
                keep_.push_back(view.array());
            } else {
                const array_view<float> view(a, name, 3);
                data = const_cast<float*>(view.data());  // read only: the cache is paged_kv<const KV>
                shape = {view.shape(0), view.shape(1), view.shape(2)};
                keep_.push_back(view.array());
            }
            FRUGAL_CHECK(shape[0] == pool.pages && shape[1] == x && shape[2] == y, who, ": ", name,
                         " is a per-token pool of shape (", shape[0], ", ", shape[1], ", ", shape[2], "), expected ",
                         pool.token_scales_text());
            return {scale_granularity::token, data};
        }
        FRUGAL_CHECK(ndim == 1, who, ": ", name, " has ", ndim, " dimensions: give 1 value (per tensor), kv_heads = ",
                     pool.kv_heads, " (per head) or a per-token pool ", pool.token_scales_text());
        const array_view<float> view(a, name, 1);
        keep_.push_back(view.array());
        FRUGAL_CHECK(view.size() == 1 || view.size() == pool.kv_heads, who, ": ", name, " has ", view.size(),
                     " values: give 1 (per tensor), kv_heads = ", pool.kv_heads,
                     " (per head) or a per-token pool ", pool.token_scales_text());
        // Only read (quantize_into writes per-token scales alone).
        return {view.size() == 1 ? scale_granularity::tensor : scale_granularity::head, const_cast<float*>(view.data())};
    }

    basic_kv_scales<float> scales_{};
    std::vector<py::array> keep_;  // the arrays (or conversions) the scales point into
};

// A batch plan for one engine step over a paged K/V cache: the page table (copied), the plan
// and its workspace, reused by every layer's run. Runs on one plan take turns (they share the
// workspace).
class py_batch_plan {
public:
    py_batch_plan(py::handle kv_indptr, py::handle kv_indices, py::handle kv_last_page_len, py::handle qo_indptr,
                  std::size_t page_size, std::size_t q_heads, std::size_t kv_heads, std::size_t head_dim,
                  storage_dtype dtype, storage_dtype kv_dtype, const attention_mask& mask, float scale,
                  std::size_t threads)
        : indptr_(indices_of(kv_indptr, "kv_indptr")),
          indices_(indices_of(kv_indices, "kv_indices")),
          last_(indices_of(kv_last_page_len, "kv_last_page_len")),
          table_{indptr_, indices_, last_, page_size},
          plan_(make_plan(table_, qo_indptr, q_heads, kv_heads, head_dim, dtype, kv_dtype, mask, scale, threads)),
          workspace_(plan_.workspace_bytes() / sizeof(float)) {}
    py_batch_plan(const py_batch_plan&) = delete;
    py_batch_plan& operator=(const py_batch_plan&) = delete;

    [[nodiscard]] const batch_plan& plan() const noexcept { return plan_; }
    [[nodiscard]] std::size_t page_size() const noexcept { return table_.page_size; }

    // batch::run for one layer: q and out [tokens, q_heads, d]; the pools
    // [pages, page_size, kv_heads, d] (nhd) or [pages, kv_heads, page_size, d] (hnd), with
    // their scales when 8-bit.
    py::object run(py::handle q, py::handle k_pages, py::handle v_pages, py::object out, py::object lse,
                   kv_layout kl, py::handle k_scale, py::handle v_scale) {
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
        with_storage(plan_.dtype(), [&]<class T>(T) {
            with_kv_storage(plan_.kv_dtype(), [&]<class KV>(KV) {
                // kv_dtype_named gives 8-bit K/V or the plan's dtype.
                if constexpr (quantized_kv_type<KV> || std::is_same_v<KV, T>)
                    run_as<T, KV>(q, k_pages, v_pages, out, lse_view, kl, k_scale, v_scale);
            });
        });
        return out;
    }

private:
    static batch_plan make_plan(const page_table& table, py::handle qo_indptr, std::size_t q_heads,
                                std::size_t kv_heads, std::size_t head_dim, storage_dtype dtype, storage_dtype kv_dtype,
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
        return batch::plan(shape, {.mask = mask, .scale = scale, .dtype = dtype, .kv_dtype = kv_dtype, .threads = threads});
    }
    template <class T, class KV>
    void run_as(py::handle q, py::handle k_pages, py::handle v_pages, py::handle out, matrix_view<float> lse,
                kv_layout kl, py::handle k_scale, py::handle v_scale) {
        const T* qd = storage_of<const T>(q, "q", 3);
        T* od = storage_of<T>(out, "out", 3);
        const char* kv_like = quantized_kv_type<KV> ? "the plan's kv_dtype" : "the plan's dtype";
        const KV* kd = storage_of<const KV>(k_pages, "k_pages", 4, kv_like);
        const KV* vd = storage_of<const KV>(v_pages, "v_pages", 4, kv_like);
        const auto qa = py::reinterpret_borrow<py::array>(q), oa = py::reinterpret_borrow<py::array>(out);
        const pool_shape pool(k_pages, v_pages, kl, "BatchPlan.run");
        const std::size_t d = plan_.head_dim(), kv_heads = plan_.kv_heads();
        FRUGAL_CHECK(pool.page_size == table_.page_size && pool.kv_heads == kv_heads && pool.head_dim == d,
                     "BatchPlan.run: k_pages holds pages of ", pool.page_size, " tokens x ", pool.kv_heads,
                     " KV heads x ", pool.head_dim, ", the plan ", table_.page_size, " x ", kv_heads, " x ", d);
        FRUGAL_CHECK(qa.shape(0) == py::ssize_t(plan_.q_tokens()), "BatchPlan.run: q has ", qa.shape(0),
                     " tokens, the plan's qo_indptr ends at ", plan_.q_tokens());
        FRUGAL_CHECK(qa.shape(1) == py::ssize_t(plan_.q_heads()) && qa.shape(2) == py::ssize_t(d), "BatchPlan.run: q has ",
                     qa.shape(1), " heads x ", qa.shape(2), ", the plan ", plan_.q_heads(), " x ", d);
        for (py::ssize_t i = 0; i < 3; ++i) {
            FRUGAL_CHECK(oa.shape(i) == qa.shape(i), "BatchPlan.run: out shape differs from q's at axis ", i, ": ",
                         oa.shape(i), " != ", qa.shape(i));
        }
        const scales_arg scales(dtype_of<KV>, k_scale, v_scale, pool, false, "BatchPlan.run");
        auto kv = paged_kv<const KV>::separate(kd, vd, pool.pages, kv_heads, d, kl, table_);
        if constexpr (quantized_kv_type<KV>) kv = kv.with_scales(scales.read_only());
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

// A token position argument of quantize_into (seq, token): an int, or a 1-D array of them
// (int32; int64 and lists converted); every value non-negative.
struct positions {
    std::vector<std::int32_t> values;
    bool scalar = false;

    positions(py::handle obj, const char* name) {
        if (!py::isinstance<py::array>(obj) && PyIndex_Check(obj.ptr())) {
            const Py_ssize_t v = PyNumber_AsSsize_t(obj.ptr(), PyExc_OverflowError);
            if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
            FRUGAL_CHECK(v >= 0 && v <= std::numeric_limits<std::int32_t>::max(), "quantize_into: ", name, " = ", v,
                         " is outside [0, 2^31)");
            values.assign(1, static_cast<std::int32_t>(v));
            scalar = true;
            return;
        }
        values = indices_of(obj, name);
        for (std::size_t i = 0; i < values.size(); ++i)
            FRUGAL_CHECK(values[i] >= 0, "quantize_into: ", name, "[", i, "] = ", values[i], " is negative");
    }
    [[nodiscard]] std::size_t at(std::size_t i) const { return static_cast<std::size_t>(values[scalar ? 0 : i]); }
};

// quantize_into for tokens (seq[i], token[i]) of K/V rows k[i], v[i] of type S into pools of KV.
template <class KV, class S>
void quantize_rows(py::handle k_pages, py::handle v_pages, const pool_shape& pool, const page_table& table,
                   const positions& seq, const positions& tok, std::size_t n, py::handle k, py::handle v,
                   py::handle k_scale, py::handle v_scale) {
    KV* kp = storage_of<KV>(k_pages, "k_pages", 4, "kv_dtype");
    KV* vp = storage_of<KV>(v_pages, "v_pages", 4, "kv_dtype");
    const py::ssize_t rows_ndim = seq.scalar && tok.scalar ? 2 : 3;
    const S* kd = storage_of<const S>(k, "k", rows_ndim, "v's dtype");
    const S* vd = storage_of<const S>(v, "v", rows_ndim, "k's dtype");
    const auto ka = py::reinterpret_borrow<py::array>(k), va = py::reinterpret_borrow<py::array>(v);
    for (py::ssize_t i = 0; i < rows_ndim; ++i)
        FRUGAL_CHECK(va.shape(i) == ka.shape(i), "quantize_into: v's shape differs from k's at axis ", i, ": ",
                     va.shape(i), " != ", ka.shape(i));
    const py::ssize_t h = rows_ndim - 2;
    FRUGAL_CHECK((rows_ndim == 2 || ka.shape(0) == py::ssize_t(n)) && ka.shape(h) == py::ssize_t(pool.kv_heads) &&
                     ka.shape(h + 1) == py::ssize_t(pool.head_dim),
                 "quantize_into: k has shape ", py::str(ka.attr("shape")).cast<std::string>(), ", expected ",
                 rows_ndim == 2 ? "" : std::to_string(n) + " tokens x ", "kv_heads x head_dim = ", pool.kv_heads,
                 " x ", pool.head_dim, " (the pages')");
    const scales_arg scales(dtype_of<KV>, k_scale, v_scale, pool, true, "quantize_into");
    auto kv = paged_kv<KV>::separate(kp, vp, pool.pages, pool.kv_heads, pool.head_dim, pool.layout, table);
    if constexpr (quantized_kv_type<KV>) kv = kv.with_scales(scales.scales());
    const std::size_t row = pool.kv_heads * pool.head_dim;
    py::gil_scoped_release release;
    for (std::size_t i = 0; i < n; ++i)
        quantize_into(kv, seq.at(i), tok.at(i), std::span<const S>(kd + i * row, row), std::span<const S>(vd + i * row, row));
}

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
fixed here. Index arrays are int32 (int64 is converted); dtype (of q and the output) is
numpy.float32, numpy.float16 or frugal.bfloat16 (numpy has no bfloat16: its arrays are uint16
holding the bits); kv_dtype (of the pages) is None for the same, or an 8-bit format:
frugal.float8_e4m3, frugal.float8_e5m2 (uint8 arrays of the bits) or numpy.int8, whose pages
run() reads with their scales. Each sequence's last q_len keys are its new tokens (bottom-right
causal mask by default). Runs on one plan take turns.

    plan = BatchPlan(kv_indptr, kv_indices, kv_last_page_len, qo_indptr, page_size=16,
                     q_heads=32, kv_heads=8, head_dim=128, dtype=frugal.bfloat16, threads=4)
    for layer in layers:
        out = plan.run(layer.q, layer.k_pool, layer.v_pool))doc")
        .def(py::init([](py::handle indptr, py::handle indices, py::handle last, py::handle qo, std::size_t page_size,
                         std::size_t q_heads, std::size_t kv_heads, std::size_t head_dim, py::handle dtype,
                         py::handle kv_dtype, const attention_mask& mask, float scale, std::size_t threads) {
                 const storage_dtype dt = dtype_named(dtype);
                 return std::make_unique<py_batch_plan>(indptr, indices, last, qo, page_size, q_heads, kv_heads,
                                                        head_dim, dt, kv_dtype_named(kv_dtype, dt), mask, scale,
                                                        threads);
             }),
             py::arg("kv_indptr"), py::arg("kv_indices"), py::arg("kv_last_page_len"), py::arg("qo_indptr"),
             py::kw_only(), py::arg("page_size"), py::arg("q_heads"), py::arg("kv_heads"), py::arg("head_dim"),
             py::arg("dtype") = numpy_dtype<float>(), py::arg("kv_dtype") = py::none(),
             py::arg("mask") = attention_mask::causal(), py::arg("scale") = 0.0f, py::arg("threads") = 1)
        .def("run", &py_batch_plan::run, py::arg("q"), py::arg("k_pages"), py::arg("v_pages"), py::kw_only(),
             py::arg("out") = py::none(), py::arg("lse") = py::none(), py::arg("kv_layout") = kv_layout::nhd,
             py::arg("k_scale") = py::none(), py::arg("v_scale") = py::none(),
             R"doc(Attention for one layer: q and out [tokens, q_heads, head_dim] of the plan's dtype, the pools
[pages, page_size, kv_heads, head_dim] (Layout.nhd) or [pages, kv_heads, page_size, head_dim]
(Layout.hnd) of its kv_dtype, all C-contiguous; `out` is allocated when not given; `lse`
(float32, q_heads x tokens) receives each row's natural log-sum-exp (for merging with another
pass, e.g. a shared prefix). 8-bit pages take their dequantization scales (a value is its
stored element times its scale): k_scale and v_scale, float32, each 1 value (per tensor; a
number too), kv_heads values (per head) or a per-token pool shaped as the pages without
head_dim ([pages, page_size, kv_heads] for Layout.nhd, [pages, kv_heads, page_size] for
Layout.hnd), as quantize_into fills it; the shape says which. Allocates nothing else; the
result does not depend on the thread count.

    out = plan.run(q, k_pool, v_pool, lse=lse)
    out = plan8.run(q, k_codes, v_codes, k_scale=k_scale, v_scale=v_scale)   # kv_dtype=numpy.int8)doc")
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
        .def_property_readonly("kv_dtype", [](const py_batch_plan& p) { return dtype_object(p.plan().kv_dtype()); },
                               "The pages' dtype: the plan's dtype, frugal.float8_e4m3, frugal.float8_e5m2 or "
                               "numpy.dtype(\"int8\").")
        .def_property_readonly("workers", [](const py_batch_plan& p) { return p.plan().workers(); })
        .def_property_readonly("kv_chunk", [](const py_batch_plan& p) { return p.plan().kv_chunk(); },
                               "Keys per split-KV chunk of a long decode.")
        .def_property_readonly("workspace_bytes", [](const py_batch_plan& p) { return p.plan().workspace_bytes(); },
                               "Exact bytes of workspace the plan holds for its runs.");

    m.def("batch_run",
          [](py::handle q, py::handle k_pages, py::handle v_pages, py::handle kv_indptr, py::handle kv_indices,
             py::handle kv_last_page_len, py::handle qo_indptr, py::object out, kv_layout kl, const attention_mask& mask,
             float scale, std::size_t threads, py::handle kv_dtype, py::handle k_scale,
             py::handle v_scale) -> py::object {
              const storage_dtype dt = dtype_of_array(q, "q");
              if (!py::isinstance<py::array>(k_pages)) throw py::type_error("k_pages must be a numpy array");
              const auto ka = py::reinterpret_borrow<py::array>(k_pages);
              FRUGAL_CHECK(ka.ndim() == 4, "batch_run: k_pages must have 4 dimensions, got ", ka.ndim());
              const auto qa = py::reinterpret_borrow<py::array>(q);
              FRUGAL_CHECK(qa.ndim() == 3, "batch_run: q must have 3 dimensions, got ", qa.ndim());
              const std::size_t page_size = kl == kv_layout::nhd ? ka.shape(1) : ka.shape(2);
              const std::size_t kv_heads = kl == kv_layout::nhd ? ka.shape(2) : ka.shape(1);
              py_batch_plan plan(kv_indptr, kv_indices, kv_last_page_len, qo_indptr, page_size, qa.shape(1), kv_heads,
                                 qa.shape(2), dt, kv_dtype_named(kv_dtype, dt), mask, scale, threads);
              return plan.run(q, k_pages, v_pages, std::move(out), py::none(), kl, k_scale, v_scale);
          },
          py::arg("q"), py::arg("k_pages"), py::arg("v_pages"), py::arg("kv_indptr"), py::arg("kv_indices"),
          py::arg("kv_last_page_len"), py::arg("qo_indptr"), py::kw_only(), py::arg("out") = py::none(),
          py::arg("kv_layout") = kv_layout::nhd, py::arg("mask") = attention_mask::causal(), py::arg("scale") = 0.0f,
          py::arg("threads") = 1, py::arg("kv_dtype") = py::none(), py::arg("k_scale") = py::none(),
          py::arg("v_scale") = py::none(),
          R"doc(Attention for a batch of sequences over a paged K/V cache (prefills, decodes or both), planned
and run once (an engine reuses a BatchPlan across layers), in float32, float16 or bfloat16 (uint16
arrays of bfloat16 bits); q and out share the dtype, and the pools too unless kv_dtype names an
8-bit format (frugal.float8_e4m3, frugal.float8_e5m2, numpy.int8; with k_scale and v_scale, as
BatchPlan.run takes them); computed in float32 and rounded once. q and out are ragged [tokens,
q_heads, head_dim]: sequence s owns rows qo_indptr[s]..qo_indptr[s + 1]. The page table is
FlashInfer's: sequence s owns pages kv_indices[kv_indptr[s]..kv_indptr[s + 1]] and uses
kv_last_page_len[s] tokens of its last one; its last q_len keys are its new tokens under the
bottom-right causal mask. Index arrays are int32 (int64 is converted).

    # two decodes: 3 and 1 pages of 16 tokens, 32 query heads over 8 KV heads, d = 128
    out = batch_run(q, k_pool, v_pool, np.array([0, 3, 4], np.int32), np.array([5, 0, 7, 2], np.int32),
                    np.array([16, 9], np.int32), np.array([0, 1, 2], np.int32))   # q: [2, 32, 128] float16)doc");

    m.def("quantize_into",
          [](py::handle k_pages, py::handle v_pages, py::handle kv_indptr, py::handle kv_indices,
             py::handle kv_last_page_len, py::handle seq, py::handle token, py::handle k, py::handle v,
             py::handle kv_dtype, py::handle k_scale, py::handle v_scale, kv_layout kl) {
              const auto [name, kd] = storage_dtype_named(kv_dtype, "kv_dtype");
              if (!kd)
                  throw py::type_error("kv_dtype must be numpy.float32, numpy.float16, frugal.bfloat16, " +
                                       std::string(kv_dtypes_text) + ", got " + name);
              const std::vector<std::int32_t> indptr = indices_of(kv_indptr, "kv_indptr"),
                                              indices = indices_of(kv_indices, "kv_indices"),
                                              last = indices_of(kv_last_page_len, "kv_last_page_len");
              if (!py::isinstance<py::array>(k_pages)) throw py::type_error("k_pages must be a numpy array");
              if (!py::isinstance<py::array>(v_pages)) throw py::type_error("v_pages must be a numpy array");
              FRUGAL_CHECK(py::reinterpret_borrow<py::array>(k_pages).ndim() == 4 &&
                               py::reinterpret_borrow<py::array>(v_pages).ndim() == 4,
                           "quantize_into: k_pages and v_pages must have 4 dimensions");
              const pool_shape pool(k_pages, v_pages, kl, "quantize_into");
              const page_table table{indptr, indices, last, pool.page_size};
              const positions seqs(seq, "seq"), tokens(token, "token");
              FRUGAL_CHECK(seqs.scalar || tokens.scalar || seqs.values.size() == tokens.values.size(),
                           "quantize_into: seq has ", seqs.values.size(), " values but token ", tokens.values.size());
              const std::size_t n = seqs.scalar ? tokens.values.size() : seqs.values.size();
              with_kv_storage(*kd, [&]<class KV>(KV) {
                  with_storage(dtype_of_array(k, "k"), [&]<class S>(S) {
                      quantize_rows<KV, S>(k_pages, v_pages, pool, table, seqs, tokens, n, k, v, k_scale, v_scale);
                  });
              });
          },
          py::arg("k_pages"), py::arg("v_pages"), py::arg("kv_indptr"), py::arg("kv_indices"),
          py::arg("kv_last_page_len"), py::arg("seq"), py::arg("token"), py::arg("k"), py::arg("v"), py::kw_only(),
          py::arg("kv_dtype"), py::arg("k_scale") = py::none(), py::arg("v_scale") = py::none(),
          py::arg("kv_layout") = kv_layout::nhd,
          R"doc(Writes K/V rows into their page slots as an engine appends tokens (frugal::attention::quantize_into):
token token[i] of sequence seq[i] gets k[i] and v[i] ([kv_heads, head_dim] each; float32,
float16 or uint16 bfloat16 bits), in the pools' kv_dtype: numpy.float32, numpy.float16 and
frugal.bfloat16 pools get the values rounded; 8-bit ones (frugal.float8_e4m3 and
frugal.float8_e5m2: uint8 arrays of the bits; numpy.int8) get value / scale, rounded to
nearest even and saturated (int8: to [-127, 127]), with k_scale and v_scale as BatchPlan.run
takes them. Per-token scale pools (writable float32) get each row's scale, max|row| / the
format's largest value (448, 57344, 127; 0 for a zero row); per-tensor and per-head scales are
the engine's, only read. seq and token are ints (k and v [kv_heads, head_dim]) or int arrays of
n positions (k and v [n, kv_heads, head_dim]; an int applies to every row). The page table is
BatchPlan's (int32; int64 is converted); a token may be anywhere in its sequence's pages. Rows
are written in order: a value that is not finite raises after the rows before it are written.

    # sequence 3 appends its token 57, K/V of 8 heads x 128 (int8 pages, a scale per token)
    quantize_into(k_codes, v_codes, kv_indptr, kv_indices, kv_last_page_len, 3, 57, k_row, v_row,
                  kv_dtype=numpy.int8, k_scale=k_scales, v_scale=v_scales))doc");

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
