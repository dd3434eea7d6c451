// frugal.attention: the tile plan and tiled attention over numpy float32 arrays, computed
// in place by the reference CPU backend (Eigen + xsimd), with the GIL released.

#include <cstdint>
#include <string>

#include <frugal/attention/attention_plan.hpp>
#include <frugal/attention/heads_view.hpp>
#include <frugal/attention/masks.hpp>
#include <frugal/attention/tiled_attention.hpp>
#include <frugal/backend/eigen/attention_backend.hpp>

#include "common.hpp"

namespace frugal::python {
namespace {

using namespace frugal::attention;

enum class layout : std::uint8_t { head_major, token_major };

// A [heads, tokens, dim] (head_major) or [tokens, heads, dim] (token_major) float32 array
// as a heads_view, in place: any strides with a contiguous last axis.
template <bool Mutable>
heads_view<std::conditional_t<Mutable, float, const float>> heads_of(const array_view<float, Mutable>& a, layout l) {
    const std::size_t h = l == layout::head_major ? 0 : 1, t = 1 - h;
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

}  // namespace

void bind_attention(py::module_ m) {
    py::enum_<causal_alignment>(m, "CausalAlignment", "Where the causal diagonal of a q_len x kv_len score matrix sits.")
        .value("top_left", causal_alignment::top_left, "Query i sees keys j <= i.")
        .value("bottom_right", causal_alignment::bottom_right, "The last query sees the last key.")
        .value("offset", causal_alignment::offset, "Query i sees keys j <= i + offset.");
    py::enum_<softmax_base>(m, "SoftmaxBase", "Base of the log-sum-exp output.")
        .value("e", softmax_base::e)
        .value("two", softmax_base::two);
    py::enum_<layout>(m, "Layout", "Axis order of a q/k/v/out array.")
        .value("head_major", layout::head_major, "[heads, tokens, dim]")
        .value("token_major", layout::token_major, "[tokens, heads, dim] (as a fused QKV projection writes it)");

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
             layout l) -> py::object {
              for (auto [a, name] : {std::pair{q, "q"}, std::pair{k, "k"}, std::pair{v, "v"}}) reject_half(a, name);
              const array_view<float> qa(q, "q", 3, true), ka(k, "k", 3, true), va(v, "v", 3, true);
              if (out.is_none()) {
                  const auto& sh = p.shape();
                  out = l == layout::head_major ? py::array_t<float>({sh.q_heads, sh.q_len, sh.head_dim})
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
          py::arg("lse") = py::none(), py::arg("layout") = layout::head_major,
          R"doc(out = softmax(scale Q K^T + mask) V per head, computed tile by tile in place on float32 arrays
(3-D, last axis contiguous, any other strides; no copies). `out` is allocated when not given;
`lse` (q_heads x q_len float32) receives the log-sum-exp. Deterministic for any thread count.

    out = run(p, q, k, v)              # q: [8, 512, 64], k and v: [2, 512, 64] float32)doc");
}

}  // namespace frugal::python
