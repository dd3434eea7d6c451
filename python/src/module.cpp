// The `frugal._frugal` extension module: frugal's exceptions as Python exceptions, and one
// submodule per C++ module (frugal.draft, frugal.cache, ...), each bound in its own file.

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <string>

#include <frugal/core/version.hpp>

#include "common.hpp"

namespace frugal::python {

py::module_ submodule(py::module_& parent, const char* name, const char* doc) {
    py::module_ m = parent.def_submodule(name, doc);
    const std::string full = std::string("frugal.") + name;
    m.attr("__name__") = full;  // classes defined after this report `frugal.<name>` as their module
    py::module_::import("sys").attr("modules")[full.c_str()] = m;
    return m;
}

namespace {
// The objects of the dtypes numpy lacks, by bits_dtype; kept for the process, as the module's
// other constants.
std::array<PyObject*, 3> bits_dtype_instances{};
}  // namespace

py::object bits_dtype_object(bits_dtype d) {
    return py::reinterpret_borrow<py::object>(bits_dtype_instances[static_cast<std::size_t>(d)]);
}

std::string dtype_name_of(py::handle dtype) {
    for (PyObject* marker : bits_dtype_instances)
        if (py::type::handle_of(dtype).is(py::type::handle_of(marker))) return py::str(dtype.attr("name"));
    try {
        return py::dtype::from_args(py::reinterpret_borrow<py::object>(dtype)).attr("name").cast<std::string>();
    } catch (py::error_already_set&) {
        throw py::type_error("not a dtype: " + py::repr(dtype).cast<std::string>() +
                             " (give a numpy dtype such as numpy.float16, or frugal.bfloat16, frugal.float8_e4m3, "
                             "frugal.float8_e5m2)");
    }
}

namespace {

// Binds the class `cls` of the dtype `D` numpy lacks and its one object frugal.<name>: its name,
// itemsize and `dtype` (the numpy dtype of its bits, which numpy reads it as), equal only to
// itself (frugal.bfloat16 also to the string "bfloat16", deprecated).
template <bits_dtype D, class Bits>
void bind_bits_dtype(py::module_& m, const char* cls, const char* name, const char* doc) {
    using marker = bits_dtype_marker<D>;
    py::class_<marker> c(m, cls, doc);
    const std::string repr = std::string("frugal.") + name;
    c.def_property_readonly("name", [name](const marker&) { return name; })
        .def_property_readonly("itemsize", [](const marker&) { return sizeof(Bits); })
        .def_property_readonly("dtype", [](const marker&) { return py::dtype::of<Bits>(); },
                               "The numpy dtype of its arrays: the unsigned integers of its bits.")
        .def("__repr__", [repr](const marker&) { return repr; })
        .def("__hash__", [name](const marker&) { return py::hash(py::str(name)); })
        .def("__eq__", [](const marker&, py::handle other) {
            if (py::isinstance<marker>(other)) return true;
            if constexpr (D == bits_dtype::bfloat16) {
                if (py::isinstance<py::str>(other) && other.cast<std::string>() == "bfloat16") {
                    warn_deprecated("comparing frugal.bfloat16 with the string \"bfloat16\" is deprecated: compare "
                                    "with frugal.bfloat16");
                    return true;
                }
            }
            return false;
        });
    bits_dtype_instances[static_cast<std::size_t>(D)] = py::cast(marker{}).release().ptr();
    m.attr(name) = bits_dtype_object(D);
}

void bind_bits_dtypes(py::module_& m) {
    bind_bits_dtype<bits_dtype::bfloat16, std::uint16_t>(m, "BFloat16", "bfloat16", R"doc(
The type of frugal.bfloat16: the bfloat16 dtype wherever frugal takes a dtype, beside
numpy.float32 and numpy.float16. numpy has no bfloat16, so bfloat16 arrays are uint16 arrays
holding the bits (from PyTorch: t.view(torch.int16).numpy().view(numpy.uint16)); numpy reads
frugal.bfloat16 as that uint16 dtype.

    plan = attention.BatchPlan(..., dtype=frugal.bfloat16)
    out = numpy.empty((tokens, heads, dim), frugal.bfloat16)    # a uint16 array for bfloat16 bits
)doc");
    bind_bits_dtype<bits_dtype::float8_e4m3, std::uint8_t>(m, "Float8E4M3", "float8_e4m3", R"doc(
The type of frugal.float8_e4m3: FP8 E4M3 (1 sign, 4 exponent bits of bias 7, 3 mantissa bits;
finite up to 448, no infinities; PyTorch's float8_e4m3fn, vLLM's fp8_e4m3), a dtype of 8-bit K/V
caches. numpy has no FP8, so its arrays are uint8 arrays holding the bits (from PyTorch:
t.view(torch.uint8).numpy()); numpy reads frugal.float8_e4m3 as that uint8 dtype.

    plan = attention.BatchPlan(..., dtype=frugal.bfloat16, kv_dtype=frugal.float8_e4m3)
    k_pages = numpy.zeros((pages, page_size, kv_heads, head_dim), frugal.float8_e4m3)   # uint8 bits
)doc");
    bind_bits_dtype<bits_dtype::float8_e5m2, std::uint8_t>(m, "Float8E5M2", "float8_e5m2", R"doc(
The type of frugal.float8_e5m2: FP8 E5M2 (1 sign, 5 exponent bits of bias 15, 2 mantissa bits;
finite up to 57344, IEEE infinities and NaNs; PyTorch's float8_e5m2, vLLM's fp8_e5m2), a dtype of
8-bit K/V caches. numpy has no FP8, so its arrays are uint8 arrays holding the bits (from
PyTorch: t.view(torch.uint8).numpy()); numpy reads frugal.float8_e5m2 as that uint8 dtype.

    plan = attention.BatchPlan(..., dtype=frugal.bfloat16, kv_dtype=frugal.float8_e5m2)
)doc");
}

// `frugal.Error` and its subclasses, each also the built-in exception that fits, so
// `except ValueError` keeps working. Created once, kept for the translator.
PyObject* new_error(const char* name, PyObject* bases, const char* doc) {
    PyObject* type = PyErr_NewExceptionWithDoc(name, doc, bases, nullptr);
    if (type == nullptr) throw py::error_already_set();
    return type;
}

}  // namespace
}  // namespace frugal::python

PYBIND11_MODULE(_frugal, m) {
    namespace fp = frugal::python;
    namespace py = pybind11;
    m.doc() = "frugal: algorithms that make LLM inference cheaper (C++ core, pybind11 bindings)";
    m.attr("__version__") = frugal::version;

    static PyObject* error = fp::new_error("frugal.Error", PyExc_Exception,
                                           "Base of every error frugal raises; catch it to catch them all.");
    static PyObject* invalid_argument = fp::new_error(
        "frugal.InvalidArgumentError", py::make_tuple(py::handle(error), py::handle(PyExc_ValueError)).release().ptr(),
        "Bad input: NaN scores, k > n, empty pools, zero budgets, shape mismatches (also a ValueError).");
    static PyObject* out_of_range = fp::new_error(
        "frugal.OutOfRangeError", py::make_tuple(py::handle(error), py::handle(PyExc_IndexError)).release().ptr(),
        "An index or id outside the valid range (also an IndexError).");
    static PyObject* runtime_failure = fp::new_error(
        "frugal.RuntimeFailureError", py::make_tuple(py::handle(error), py::handle(PyExc_RuntimeError)).release().ptr(),
        "A failure outside the caller's arguments: I/O, corrupt files, concurrent use (also a RuntimeError).");
    m.attr("Error") = py::handle(error);
    m.attr("InvalidArgumentError") = py::handle(invalid_argument);
    m.attr("OutOfRangeError") = py::handle(out_of_range);
    m.attr("RuntimeFailureError") = py::handle(runtime_failure);

    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const frugal::out_of_range& e) {
            PyErr_SetString(out_of_range, e.what());
        } catch (const frugal::invalid_argument& e) {
            PyErr_SetString(invalid_argument, e.what());
        } catch (const frugal::runtime_error& e) {
            PyErr_SetString(runtime_failure, e.what());
        } catch (const frugal::error& e) {
            PyErr_SetString(error, e.what());
        }
    });

    fp::bind_bits_dtypes(m);
    fp::bind_draft(fp::submodule(m, "draft", "Speculative drafting: suffix automaton, drafter, history, verification."));
    fp::bind_cache(fp::submodule(m, "cache", "Caches: eviction policies, the prefix tree, the semantic cache."));
    fp::bind_prune(fp::submodule(m, "prune", "Progressive cluster pruning of reranker candidates (GRATING)."));
    fp::bind_attention(fp::submodule(m, "attention", "Tiled attention with an online softmax under a workspace budget."));
    fp::bind_schedule(fp::submodule(m, "schedule", "Planners that overlap compute with I/O: graph switch, placement."));
    fp::bind_rag(fp::submodule(m, "rag", "RAG serving (HedraRAG): workflow graphs and the wall-clock runtime over Python engines."));
    fp::bind_sim(fp::submodule(m, "sim", "The lab: paper baselines (Prompt Lookup Decoding, the paper's greedy switch)."));
    fp::bind_overhead(fp::submodule(m, "_overhead", "C++ loops that python/benchmarks/overhead.py times against the bindings."));
}
