#pragma once
// Shared by every binding file of the `frugal` Python package: numpy views without copies,
// numpy arrays that adopt a std::vector, the busy guard of objects used with the GIL
// released, and deferred Python callbacks.

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <frugal/core/error.hpp>

namespace frugal::python {

namespace py = pybind11;

/// The numpy name of T ("int32", "float32", ...), for error messages.
template <class T>
[[nodiscard]] std::string dtype_name() {
    return py::str(py::dtype::of<T>()).cast<std::string>();
}

/// A read-only (or, with Mutable, writable) view of a numpy array of T. An ndarray is used
/// in place and must have exactly dtype T, `ndim` dimensions and C-contiguous rows (the last
/// axis contiguous; with `any_strides` the outer axes may have any non-negative stride);
/// anything else raises TypeError / ValueError naming `name`. A list or tuple is converted
/// once (a new array) when its values are of T's kind (integers for an integer T, numbers for
/// a float T) and fit T. The view keeps the array alive.
template <class T, bool Mutable = false>
class array_view {
public:
    using element = std::conditional_t<Mutable, T, const T>;

    array_view(py::handle obj, const char* name, py::ssize_t ndim = 1, bool any_strides = false) {
        if (py::isinstance<py::array>(obj)) {
            array_ = py::reinterpret_borrow<py::array>(obj);
        } else {
            if constexpr (Mutable) throw py::type_error(std::string(name) + " must be a writable numpy array of " + dtype_name<T>());
            array_ = convert(obj, name);
        }
        if (!array_.dtype().equal(py::dtype::of<T>()))
            throw py::type_error(std::string(name) + " must be a numpy array of " + dtype_name<T>() + ", got " +
                                 py::str(array_.dtype()).cast<std::string>());
        if (array_.ndim() != ndim)
            throw py::value_error(std::string(name) + " must have " + std::to_string(ndim) + " dimension(s), got " +
                                  std::to_string(array_.ndim()));
        if (Mutable && !array_.writeable()) throw py::value_error(std::string(name) + " is read-only");
        const auto item = static_cast<py::ssize_t>(sizeof(T));
        py::ssize_t expect = item;
        for (py::ssize_t d = ndim; d-- > 0;) {
            const bool last = d == ndim - 1;
            if (array_.shape(d) > 1 && array_.strides(d) != expect && (last || !any_strides))
                throw py::value_error(std::string(name) + " must be C-contiguous" +
                                      (any_strides ? " along its last axis" : "") + " (use numpy.ascontiguousarray)");
            if (any_strides && !last && array_.strides(d) % item != 0)
                throw py::value_error(std::string(name) + " has strides that are not a multiple of its item size");
            // Strides are unsigned in frugal's views: a reversed axis (a[::-1], numpy.flip) is refused.
            if (any_strides && !last && array_.shape(d) > 1 && array_.strides(d) < 0)
                throw py::value_error(std::string(name) + " has a negative stride on axis " + std::to_string(d) +
                                      (Mutable ? std::string(" (write into an array without reversed axes)")
                                               : " (pass numpy.ascontiguousarray(" + std::string(name) + "))"));
            expect *= array_.shape(d);
        }
    }

    [[nodiscard]] element* data() const {
        if constexpr (Mutable) return static_cast<T*>(const_cast<py::array&>(array_).mutable_data());
        else return static_cast<const T*>(array_.data());
    }
    [[nodiscard]] std::size_t size() const { return static_cast<std::size_t>(array_.size()); }
    [[nodiscard]] std::size_t shape(py::ssize_t d) const { return static_cast<std::size_t>(array_.shape(d)); }
    /// Stride of axis d in elements.
    [[nodiscard]] std::size_t stride(py::ssize_t d) const {
        return static_cast<std::size_t>(array_.strides(d)) / sizeof(T);
    }
    [[nodiscard]] std::span<element> span() const { return {data(), size()}; }
    [[nodiscard]] const py::array& array() const noexcept { return array_; }

private:
    static py::array convert(py::handle obj, const char* name) {
        const py::module_ np = py::module_::import("numpy");
        py::array a = np.attr("asarray")(obj);
        const char kind = a.dtype().kind();
        if constexpr (std::is_integral_v<T>) {
            // numpy holds ints beyond 64 bits as objects: name their range, not the object dtype.
            if (kind == 'O' && a.size() > 0) {
                bool ints = true;
                for (py::handle x : a.attr("flat")) ints = ints && PyLong_Check(x.ptr());
                if (ints)
                    throw py::value_error(std::string(name) + " holds values outside the range of " + dtype_name<T>());
            }
        }
        const bool fits_kind = std::is_floating_point_v<T> ? (kind == 'f' || kind == 'i' || kind == 'u')
                                                           : (kind == 'i' || kind == 'u');
        if (!fits_kind && a.size() > 0)
            throw py::type_error(std::string(name) + " must hold " + (std::is_floating_point_v<T> ? "numbers" : "integers") +
                                 " (" + dtype_name<T>() + "), got " + py::str(a.dtype()).cast<std::string>());
        if constexpr (std::is_integral_v<T>) {
            if (a.size() > 0 && !a.dtype().equal(py::dtype::of<T>())) {
                const auto lo = a.attr("min")().cast<long double>(), hi = a.attr("max")().cast<long double>();
                if (lo < static_cast<long double>(std::numeric_limits<T>::min()) ||
                    hi > static_cast<long double>(std::numeric_limits<T>::max()))
                    throw py::value_error(std::string(name) + " holds values outside the range of " + dtype_name<T>());
            }
        }
        return np.attr("ascontiguousarray")(a, py::dtype::of<T>());
    }

    py::array array_;
};

/// A numpy array that takes over `v`'s buffer (no copy): the vector moves into a capsule
/// the array owns.
template <class T>
[[nodiscard]] py::array_t<T> adopt(std::vector<T>&& v) {
    auto* owner = new std::vector<T>(std::move(v));
    py::capsule free_when_done(owner, [](void* p) { delete static_cast<std::vector<T>*>(p); });
    return py::array_t<T>({static_cast<py::ssize_t>(owner->size())}, {static_cast<py::ssize_t>(sizeof(T))},
                          owner->data(), free_when_done);
}

/// A new numpy array holding a copy of `s`: for results that live in a buffer the C++
/// object reuses on its next call (drafts, automaton text), which a view would let change
/// under the caller.
template <class T>
[[nodiscard]] py::array_t<std::remove_const_t<T>> copy_out(std::span<T> s) {
    py::array_t<std::remove_const_t<T>> a(static_cast<py::ssize_t>(s.size()));
    if (!s.empty()) std::copy(s.begin(), s.end(), a.mutable_data());
    return a;
}

/// Marks an object as in use by a call that runs with the GIL released: a second thread
/// entering the same object meanwhile gets frugal.RuntimeFailureError ("used from two threads
/// at once") instead of a data race inside the C++ object. Every method of such an object
/// holds it, the ones that keep the GIL too: the GIL does not order them against a call that
/// released it. Cheap (one atomic exchange each way).
class busy_flag {
public:
    class guard {
    public:
        guard(busy_flag& f, const char* who) : guard(f, std::nothrow) {
            if (!owns_)
                FRUGAL_FAIL(frugal::runtime_error, who,
                            ": used from two threads at once, or re-entered from a callback it runs (frugal objects "
                            "are not thread-safe: give each thread its own or hold a lock around every call)");
        }
        /// Takes the flag if it is free; owns() says whether it did.
        guard(busy_flag& f, std::nothrow_t) noexcept
            : flag_(f), owns_(!f.busy_.exchange(true, std::memory_order_acquire)) {}
        ~guard() {
            if (owns_) flag_.busy_.store(false, std::memory_order_release);
        }
        guard(const guard&) = delete;
        guard& operator=(const guard&) = delete;
        [[nodiscard]] bool owns() const noexcept { return owns_; }

    private:
        busy_flag& flag_;
        bool owns_;
    };

private:
    std::atomic<bool> busy_{false};
};

/// Runs `fn` with the object marked busy and the GIL held: the short reads and writes of an
/// object whose other calls release the GIL.
template <class Fn>
decltype(auto) with_busy(busy_flag& flag, const char* who, Fn&& fn) {
    busy_flag::guard g(flag, who);
    return std::forward<Fn>(fn)();
}

/// Runs `fn` with the object marked busy and the GIL released.
template <class Fn>
decltype(auto) without_gil(busy_flag& flag, const char* who, Fn&& fn) {
    busy_flag::guard g(flag, who);
    py::gil_scoped_release release;
    return std::forward<Fn>(fn)();
}

/// How Python's calls enter an object whose request locks Python objects hold (a prefix
/// tree): each call takes the object's busy flag and first releases the locks whose Python
/// objects were freed meanwhile; a lock freed while another thread is inside is queued for
/// the next call (a deallocation can neither raise nor wait for it). `Locks` are the kinds
/// of lock (each with a `release()`). Declare it after the object it guards, so that the
/// locks still queued are released before the object goes.
template <class... Locks>
class lock_keeping_access {
public:
    /// Runs `fn` with the object busy (with_busy), after releasing the locks freed meanwhile.
    template <class Fn>
    decltype(auto) use(const char* who, Fn&& fn) {
        const busy_flag::guard g(busy_, who);
        release_freed();
        return std::forward<Fn>(fn)();
    }
    /// `use` with the GIL released (without_gil).
    template <class Fn>
    decltype(auto) use_without_gil(const char* who, Fn&& fn) {
        const busy_flag::guard g(busy_, who);
        const py::gil_scoped_release release;
        release_freed();
        return std::forward<Fn>(fn)();
    }
    /// Releases a lock whose Python object is freed: now, or by the next call when another
    /// thread is inside the object.
    template <class Lock>
    void release_when_free(Lock lock) noexcept {
        const busy_flag::guard g(busy_, std::nothrow);
        if (g.owns()) {
            lock.release();
            return;
        }
        const std::lock_guard hold(freed_mutex_);
        freed_.emplace_back(std::move(lock));
    }

private:
    void release_freed() {
        std::vector<std::variant<Locks...>> locks;
        {
            const std::lock_guard hold(freed_mutex_);
            locks.swap(freed_);
        }
        for (auto& l : locks) std::visit([](auto& lock) { lock.release(); }, l);
    }
    busy_flag busy_;
    std::mutex freed_mutex_;
    std::vector<std::variant<Locks...>> freed_;
};

/// A request lock on a tree as Python holds it: every use of it reads or writes the tree, so
/// each goes through the tree's `access` (a lock_keeping_access), and its deallocation hands
/// it to `release_when_free`. The Python object keeps its tree alive (keep_alive).
template <class Tree>
struct python_lock {
    using lock_type = typename Tree::match;
    explicit python_lock(Tree& t) : tree(&t) {}
    python_lock(const python_lock&) = delete;
    python_lock& operator=(const python_lock&) = delete;
    ~python_lock() {
        if (lock.length() > 0) tree->access.release_when_free(std::move(lock));  // else: nothing pinned
    }
    lock_type lock;
    Tree* tree;
};

/// Binds what every Python request lock (a python_lock) shares: len, the handles of its chunks
/// as an int64 array (the property `handles`), release(), and the context manager that releases
/// it on exit; each reads or writes its tree through the tree's `access`. Returns the class for
/// the lock's own members.
/// @code
/// bind_lock<py_prefix_match>(m, "PrefixTreeMatch", "A request's lock ...", "handles", "Handles of the locked chunks.");
/// @endcode
template <class Lock>
py::class_<Lock> bind_lock(py::handle scope, const char* name, const char* doc, const char* handles,
                           const char* handles_doc) {
    const std::string n = name;
    auto who = [n](const char* member) { return n + "." + member; };
    py::class_<Lock> cls(scope, name, doc);
    cls.def("__len__", [w = who("__len__")](Lock& l) { return l.tree->access.use(w.c_str(), [&] { return l.lock.length(); }); })
        .def_property_readonly(handles,
                               [w = who(handles)](Lock& l) {
                                   auto h = l.tree->access.use(w.c_str(), [&] {
                                       std::vector<std::int64_t> out(l.lock.length());
                                       for (std::size_t i = 0; i < out.size(); ++i) out[i] = l.lock.handle(i);
                                       return out;
                                   });
                                   return adopt(std::move(h));
                               },
                               handles_doc)
        .def("release", [w = who("release")](Lock& l) { l.tree->access.use(w.c_str(), [&] { l.lock.release(); }); },
             "Drops the lock; its chunks become evictable again.")
        .def("__enter__", [](Lock& l) -> Lock& { return l; }, py::return_value_policy::reference_internal)
        .def("__exit__", [w = who("__exit__")](Lock& l, py::args) { l.tree->access.use(w.c_str(), [&] { l.lock.release(); }); });
    return cls;
}

/// A method of a bound `Self` that calls `f` on its C++ object `self.*Object` holding its busy
/// flag (and the GIL), `finish` turning the result into what Python gets: the short calls of an
/// object whose other calls release the GIL.
/// @code
/// .def("sse", busy_method<&py_kmeans::km>(&kmeans1d::sse, "KMeans1D.sse"), py::arg("k"))
/// @endcode
template <class>
struct member_of;
template <class C, class M>
struct member_of<M C::*> {
    using owner = C;
};
template <auto Object, class R, class T, class... A, class Finish = std::identity>
auto busy_method(R (T::*f)(A...) const, const char* who, Finish finish = {}) {
    using Self = typename member_of<decltype(Object)>::owner;
    return [f, who, finish](Self& self, A... args) {
        const busy_flag::guard g(self.busy, who);
        return finish(((self.*Object).*f)(args...));
    };
}

/// Eviction notifications collected while a C++ call runs and delivered to a Python
/// callable after it returns, so that Python code never runs inside a C++ container
/// mid-update (a callback that uses the same cache, or raises, then cannot corrupt it).
/// Every pending call is made; the first exception a callback raised is re-raised after.
/// Without a callable the events (and the Python objects they hold) are just released,
/// also after the call.
template <class Event>
class deferred_callback {
public:
    [[nodiscard]] bool active() const noexcept { return !callback_.is_none(); }
    [[nodiscard]] const py::object& callable() const noexcept { return callback_; }
    void set(py::object cb) {
        if (!cb.is_none() && !PyCallable_Check(cb.ptr())) throw py::type_error("the eviction callback must be callable or None");
        callback_ = std::move(cb);
    }
    void push(Event e) { pending_.push_back(std::move(e)); }
    /// Visits the callback for the cyclic garbage collector.
    int traverse(visitproc visit, void* arg) const { return callback_ ? visit(callback_.ptr(), arg) : 0; }

    /// Calls the callback with each pending event (`call(callback, event)`); needs the GIL.
    template <class Call>
    void deliver(Call&& call) {
        if (pending_.empty()) return;
        std::vector<Event> events;
        events.swap(pending_);
        if (!active()) return;
        py::object cb = callback_;  // a callback may replace itself
        std::exception_ptr first;
        for (Event& e : events) {
            try {
                call(cb, e);
            } catch (...) {
                if (!first) first = std::current_exception();
            }
        }
        events.clear();
        if (first) std::rethrow_exception(first);
    }

private:
    py::object callback_ = py::none();
    std::vector<Event> pending_;
};

/// Raises the exception in flight as pybind11 would (frugal's translator first), for code
/// called by Python outside pybind11's dispatcher; returns nullptr for the caller to return.
inline PyObject* raise_current_exception() noexcept {
    try {
        if (!py::detail::apply_exception_translators(py::detail::get_local_internals().registered_exception_translators) &&
            !py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators))
            PyErr_SetString(PyExc_SystemError, "frugal: an exception escaped every translator");
    } catch (...) {
        PyErr_SetString(PyExc_SystemError, "frugal: an exception translator threw");
    }
    return nullptr;
}

/// The C++ object of a pybind11 instance of T, or nullptr before its __init__ ran.
template <class T>
T* object_of(PyObject* self) {
    auto* inst = reinterpret_cast<py::detail::instance*>(self);
    return inst->simple_layout ? static_cast<T*>(inst->simple_value_holder[0]) : &py::cast<T&>(self);
}

/// A method called through CPython's vectorcall protocol (METH_FASTCALL) instead of
/// pybind11's generic dispatcher, which costs about 0.4 us a call, more than a cache hit:
/// for the few methods whose cost is the call itself. `Fn(self, args, nargs, kwnames)`
/// gets the C++ object of a pybind11 instance of T; exceptions are translated as pybind11
/// translates them. Add it with `add_fast_method`.
template <class T, py::object (*Fn)(T&, PyObject* const*, Py_ssize_t, PyObject*)>
PyObject* fast_method(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) noexcept {
    try {
        // The method descriptor has checked that self is a T instance.
        T* obj = object_of<T>(self);
        if (obj == nullptr) throw py::type_error("the object was not initialized (its __init__ did not run)");
        return Fn(*obj, args, nargs, kwnames).release().ptr();
    } catch (...) {
        return raise_current_exception();
    }
}

/// Makes a bound class that holds Python objects (cache values, callbacks) take part in
/// Python's cyclic garbage collection, so a callback or value that refers back to its cache
/// does not keep both alive forever. T has `int traverse(visitproc, void*) const` (visits
/// every Python object it holds) and `void clear_references()` (drops them).
template <class T>
py::custom_type_setup collected_by_gc() {
    return py::custom_type_setup([](PyHeapTypeObject* heap_type) {
        PyTypeObject* type = &heap_type->ht_type;
        type->tp_flags |= Py_TPFLAGS_HAVE_GC;
        type->tp_traverse = [](PyObject* self, visitproc visit, void* arg) {
            Py_VISIT(Py_TYPE(self));  // a heap type's instances keep their type alive
            const T* obj = object_of<T>(self);
            return obj == nullptr ? 0 : obj->traverse(visit, arg);
        };
        type->tp_clear = [](PyObject* self) {
            if (T* obj = object_of<T>(self)) obj->clear_references();
            return 0;
        };
    });
}

/// The method table entry of `fast_method<T, Fn>` named `name`; `doc` starts with the
/// signature line CPython shows, self written $self ("get($self, key, default=None, /)\n--\n\n...").
template <class T, py::object (*Fn)(T&, PyObject* const*, Py_ssize_t, PyObject*)>
PyMethodDef fast_method_def(const char* name, const char* doc) {
    return {name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fast_method<T, Fn>)),
            METH_FASTCALL | METH_KEYWORDS, doc};
}

/// Installs `def` (static storage: CPython keeps its address) as a method of `cls`.
template <class Class>
void add_fast_method(Class& cls, PyMethodDef& def) {
    auto* descr = PyDescr_NewMethod(reinterpret_cast<PyTypeObject*>(cls.ptr()), &def);
    if (descr == nullptr) throw py::error_already_set();
    cls.attr(def.ml_name) = py::reinterpret_steal<py::object>(descr);
}

/// Checks a fast method's positional and keyword argument counts.
inline void check_arity(const char* name, Py_ssize_t nargs, PyObject* kwnames, Py_ssize_t least, Py_ssize_t most,
                        bool keywords = false) {
    if (nargs < least || nargs > most)
        throw py::type_error(std::string(name) + "() takes " + std::to_string(least) +
                             (least == most ? "" : " to " + std::to_string(most)) + " positional arguments (" +
                             std::to_string(nargs) + " given)");
    if (!keywords && kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0)
        throw py::type_error(std::string(name) + "() takes no keyword arguments");
}

/// Issues a DeprecationWarning with `message` (naming the replacement) at the caller's line;
/// raises it when warnings are errors (python -W error).
/// @code
/// warn_deprecated("dtype=\"float16\" is deprecated: pass numpy.float16");
/// @endcode
inline void warn_deprecated(const std::string& message) {
    if (PyErr_WarnEx(PyExc_DeprecationWarning, message.c_str(), 1) != 0) throw py::error_already_set();
}

/// One named field of a result class: its Python name, what reads it (a data member pointer,
/// or a callable taking the object) and a docstring.
template <class Get>
struct result_field {
    const char* name;
    Get get;
    const char* doc = "";
};
template <class Get>
result_field(const char*, Get, const char* = "") -> result_field<Get>;

/// How a result class answers code written for the tuple or dict it replaced, for one
/// release and with a DeprecationWarning: not at all, as the tuple of its fields in order
/// (len, iteration, [i], == tuple), or as the dict of its fields ([name]).
enum class old_form : std::uint8_t { none, tuple, dict };

/// Binds T as a small immutable result class `name`: one read-only property per field, and a
/// __repr__ that names them (`InsertResult(existing=2, cached=5)`). `old` keeps code written
/// for the tuple or dict it replaces working for one release. Returns the class for more.
/// @code
/// bind_result<insert_result>(m, "InsertResult", "What insert did.", old_form::tuple,
///                            result_field{"existing", &insert_result::existing},
///                            result_field{"cached", &insert_result::cached});
/// @endcode
template <class T, class... Get>
py::class_<T> bind_result(py::handle scope, const char* name, const char* doc, old_form old,
                          result_field<Get>... fields) {
    py::class_<T> cls(scope, name, doc);
    auto add = [&cls](const auto& f) {
        if constexpr (std::is_member_object_pointer_v<std::remove_cvref_t<decltype(f.get)>>)
            cls.def_readonly(f.name, f.get, f.doc);
        else
            cls.def_property_readonly(f.name, f.get, f.doc);
    };
    (add(fields), ...);
    const std::vector<std::string> names{fields.name...};
    const std::string type = name;
    // The fields in order, as the tuple this result replaced.
    auto values = [names](py::handle self) {
        py::tuple t(names.size());
        for (std::size_t i = 0; i < names.size(); ++i) t[i] = self.attr(names[i].c_str());
        return t;
    };
    cls.def("__repr__", [names, type](py::handle self) {
        std::string r = type + "(";
        for (std::size_t i = 0; i < names.size(); ++i)
            r += (i > 0 ? ", " : "") + names[i] + "=" + py::repr(self.attr(names[i].c_str())).cast<std::string>();
        return r + ")";
    });
    const std::string fields_text = [&] {
        std::string f;
        for (const auto& n : names) f += (f.empty() ? "" : ", ") + n;
        return f;
    }();
    if (old == old_form::tuple) {
        const std::string warning = type + " is no longer a tuple: read its fields by name (" + fields_text +
                                    "); unpacking, indexing and comparing it with a tuple stop working in the next release";
        cls.def("__len__", [n = names.size()](py::handle) { return n; })
            .def("__iter__", [values, warning](py::handle self) {
                warn_deprecated(warning);
                return py::iter(values(self));
            })
            .def("__getitem__", [values, warning](py::handle self, py::handle i) -> py::object {
                warn_deprecated(warning);
                return values(self)[i];  // the item, taken while the tuple lives
            })
            .def("__eq__", [values, warning](py::handle self, py::handle other) -> py::object {
                if (py::isinstance<py::tuple>(other)) {
                    warn_deprecated(warning);
                    return py::bool_(values(self).equal(other));
                }
                if (py::type::handle_of(other).is(py::type::handle_of(self))) return py::bool_(values(self).equal(values(other)));
                return py::reinterpret_borrow<py::object>(Py_NotImplemented);
            });
    } else if (old == old_form::dict) {
        const std::string warning = type + " is no longer a dict: read its fields as attributes (" + fields_text +
                                    "); result[\"name\"] stops working in the next release";
        cls.def("__getitem__", [names, warning](py::handle self, const std::string& key) {
            warn_deprecated(warning);
            if (std::find(names.begin(), names.end(), key) == names.end()) throw py::key_error(key);
            return self.attr(key.c_str());
        });
    }
    return cls;
}

/// The dtypes numpy lacks, where frugal takes a dtype: bfloat16 and the two FP8 formats of
/// 8-bit K/V caches. Each is one object of its own class (frugal.bfloat16, frugal.float8_e4m3,
/// frugal.float8_e5m2; module.cpp), which numpy reads as the unsigned integer dtype of its bits
/// (uint16, uint8): their arrays hold the bits.
enum class bits_dtype : std::uint8_t { bfloat16, float8_e4m3, float8_e5m2 };
/// The class of the object of `D`.
template <bits_dtype D>
struct bits_dtype_marker {};
/// The object of `d`: frugal.bfloat16, frugal.float8_e4m3 or frugal.float8_e5m2.
py::object bits_dtype_object(bits_dtype d);
/// The name of a dtype given as numpy takes one (numpy.float16, numpy.dtype("float16"), an
/// array's dtype: numpy.dtype(dtype).name), or "bfloat16", "float8_e4m3", "float8_e5m2" for
/// frugal's objects of the dtypes numpy lacks; TypeError for anything numpy.dtype cannot read.
/// @code
/// if (dtype_name_of(dtype) == "bfloat16") ...
/// @endcode
std::string dtype_name_of(py::handle dtype);

/// The submodule `frugal.<name>`: its classes report that module, and `import frugal.<name>`
/// finds it.
py::module_ submodule(py::module_& parent, const char* name, const char* doc);

void bind_draft(py::module_ m);
void bind_cache(py::module_ m);
void bind_prune(py::module_ m);
void bind_attention(py::module_ m);
void bind_schedule(py::module_ m);
void bind_sim(py::module_ m);
void bind_rag(py::module_ m);
void bind_overhead(py::module_ m);

}  // namespace frugal::python
