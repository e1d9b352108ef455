// stepprof._core: the Python binding of the recorder, a thin pybind11 layer over the C
// ABI (include/stepprof/stepprof.h). The pure-Python package `stepprof` (python/stepprof)
// adds the Recorder class, the decorator and the torch integration.
//
// The region context manager is the hot path (entered and left millions of times), so
// its type is defined with CPython's own type API inside this module: `with region:`
// then costs two direct C calls (tp_methods with METH_NOARGS / METH_FASTCALL) instead
// of two pybind11 dispatches (bench/python_overhead.py measures the difference).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "stepprof/diagnostics.hpp"
#include "stepprof/stepprof.h"
#include "stepprof/stepprof.hpp"

namespace py = pybind11;

namespace {

// ---- the Region type (CPython API) --------------------------------------------------

struct RegionObject {
  PyObject_HEAD
  stepprof_region_id id;
  PyObject* name;  // str, for repr
};

PyObject* region_enter(PyObject* self, PyObject* /*unused*/) {
  stepprof_region_enter(reinterpret_cast<RegionObject*>(self)->id);
  Py_INCREF(self);
  return self;
}

PyObject* region_exit(PyObject* self, PyObject* const* /*args*/, Py_ssize_t /*nargs*/) {
  // Unmatched exits are counted by the recorder (mismatched_exit); never raise here.
  stepprof_region_exit(reinterpret_cast<RegionObject*>(self)->id);
  Py_RETURN_FALSE;  // do not swallow the exception of the with-block
}

PyObject* region_repr(PyObject* self) {
  auto* r = reinterpret_cast<RegionObject*>(self);
  return PyUnicode_FromFormat("<stepprof region %R (id %u)>", r->name, static_cast<unsigned>(r->id));
}

void region_dealloc(PyObject* self) {
  auto* r = reinterpret_cast<RegionObject*>(self);
  Py_XDECREF(r->name);
  PyTypeObject* tp = Py_TYPE(self);
  tp->tp_free(self);
  Py_DECREF(tp);
}

PyMethodDef region_methods[] = {
    {"__enter__", region_enter, METH_NOARGS, "Enter the region on this thread."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(region_exit)), METH_FASTCALL,
     "Leave the region; never suppresses an exception."},
    {nullptr, nullptr, 0, nullptr},
};

PyType_Slot region_slots[] = {
    {Py_tp_methods, region_methods},
    {Py_tp_repr, reinterpret_cast<void*>(region_repr)},
    {Py_tp_dealloc, reinterpret_cast<void*>(region_dealloc)},
    {Py_tp_doc, const_cast<char*>("A named region: `with region:` times the block (see Recorder.region).")},
    {0, nullptr},
};

// Made only by Recorder.region(name): `stepprof.Region()` made an object with id 0 that
// added its calls to whichever region was registered first.
PyType_Spec region_spec = {"stepprof._core.Region", sizeof(RegionObject), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION, region_slots};

PyTypeObject* region_type = nullptr;

// ---- helpers --------------------------------------------------------------------------

// Raises for errors (status < 0): ValueError for a bad argument (e.g. an unknown role
// at open), with the recorder's message; RuntimeError otherwise, with the status name first. Warnings (> 0) are returned for the caller to report.
int check(int status) {
  if (status == STEPPROF_ERR_ARGUMENT)  // (the exception's type says what the C status name would)
    throw std::invalid_argument(stepprof_last_error());
  if (status < 0)
    throw std::runtime_error(std::string(stepprof_status_name(status)) + ": " + stepprof_last_error());
  return status;
}

// The status of a call that adds per-update data: not stored (out of memory, or past
// max_update_data_bytes) is counted by the recorder and not raised into the training
// loop; a bad argument raises ValueError, which the Python layer turns into a warning.
int stored_or_counted(int status) { return status == STEPPROF_ERR_NO_MEMORY ? status : check(status); }

// `s` as a Python str: a message or info naming a path that is not UTF-8 would make
// pybind11's conversion raise UnicodeDecodeError (at close(), in the training job).
py::str text(std::string_view s, const char* errors) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), errors);
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

stepprof_recorder* handle(std::uintptr_t h) {
  if (h == 0) throw std::invalid_argument("the recorder is closed");
  return reinterpret_cast<stepprof_recorder*>(h);
}

// The open recorder and a weak reference to the Python Recorder that owns it. An owner
// freed with its recorder open (an interrupt inside __del__ or the close it calls, which
// Python ignores there) left the recorder open with no one to close it, and every later
// Recorder() of the process was refused as already_open: the next open closes it. (A
// reference kept for the process's life: no Python object is destroyed at exit here.)
std::uintptr_t g_open = 0;
PyObject* g_owner = nullptr;  // a weakref, or nullptr

void forget_open() {
  g_open = 0;
  Py_CLEAR(g_owner);
}

// Closes the open recorder when its owner is gone; true when it did.
bool close_orphan() {
  if (g_open == 0 || g_owner == nullptr) return false;
  PyObject* owner = PyWeakref_GetObject(g_owner);  // (borrowed; Py_None once dead)
  if (owner != Py_None) return false;
  const int status = stepprof_close(reinterpret_cast<stepprof_recorder*>(g_open));
  forget_open();
  const std::string said = status == STEPPROF_WARN_ERRORS ? std::string(": ") + stepprof_last_error() : "";
  PySys_WriteStderr("stepprof: a Recorder was freed with its recorder still open (an interrupt in its close?); "
                    "closed now%.900s\n", said.c_str());
  return true;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "stepprof's recorder, C ABI binding (use the `stepprof` package instead)";

  region_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&region_spec));
  if (!region_type) throw py::error_already_set();
  m.attr("Region") = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(region_type));

  m.def(
      "open",
      [](py::object owner, const std::string& path, std::int64_t rank, std::int64_t world_size,
         const std::string& config_json, const std::string& options_json) {
        stepprof_recorder* rec = nullptr;
        int status = stepprof_open(path.c_str(), rank, world_size, config_json.c_str(), options_json.c_str(), &rec);
        if (status == STEPPROF_ERR_STATE && close_orphan())
          status = stepprof_open(path.c_str(), rank, world_size, config_json.c_str(), options_json.c_str(), &rec);
        // Another recorder is open in this process: not raised (the Python layer makes a
        // recorder that records nothing and counts it); handle 0.
        if (status == STEPPROF_ERR_STATE)
          return py::make_tuple(std::uintptr_t{0}, status, text(stepprof_last_error(), "replace"));
        check(status);
        const auto h = reinterpret_cast<std::uintptr_t>(rec);
        // Handed to its owner before returning: a KeyboardInterrupt raised as this call
        // returns (a signal during the ~10 ms clock calibration) drops the returned tuple,
        // and the recorder would stay open with no owner, every later Recorder of the
        // process refused as already_open. The owner closes it instead.
        try {
          owner.attr("_handle") = h;
        } catch (...) {
          stepprof_close(rec);
          throw;
        }
        forget_open();
        g_open = h;
        g_owner = PyWeakref_NewRef(owner.ptr(), nullptr);  // (nullptr: not weakly referable; never closed here)
        if (g_owner == nullptr) PyErr_Clear();
        return py::make_tuple(h, status, text(stepprof_last_error(), "replace"));
      },
      py::arg("owner"), py::arg("path"), py::arg("rank"), py::arg("world_size"), py::arg("config_json"),
      py::arg("options_json"),
      "Opens the recorder and sets owner._handle to it; returns (handle, status, message); status -2 "
      "(STEPPROF_ERR_STATE, handle 0, owner untouched): another recorder is open in this process. Raises "
      "ValueError on an argument error.");
  m.def(
      "end_update",
      [](std::uintptr_t h, std::int64_t step) { return stepprof_end_update(handle(h), step); }, py::arg("handle"),
      py::arg("step"), "Writes the update record; returns the status (1: not written, counted).");
  m.def("begin_update", [](std::uintptr_t h) { return check(stepprof_begin_update(handle(h))); });
  m.def("flush", [](std::uintptr_t h) { return stepprof_flush(handle(h)); });
  m.def(
      "close",
      [](py::object owner, std::uintptr_t h) {
        const int status = stepprof_close(handle(h));
        if (h == g_open) forget_open();
        // At once (no allocation before: a garbage collection it set off could run a signal
        // handler's Python code): the owner no longer holds a handle to close.
        try {
          owner.attr("_closing") = std::uintptr_t{0};
          owner.attr("_finishing") = false;
        } catch (py::error_already_set&) {  // (an owner without these attributes)
        }
        const std::string message = text(stepprof_last_error(), "replace");
        // The session's final counts, those close() counted included (the C ABI's handle
        // is gone: the C++ call gives them until the next open).
        py::dict counts;
        std::vector<std::pair<std::string, std::int64_t>> final_counts;
        if (stepprof::error_counts(final_counts) == stepprof::Status::kOk)
          for (const auto& [kind, n] : final_counts) counts[py::str(kind)] = n;
        // Handed to the owner before returning, as open() does: a KeyboardInterrupt raised
        // as this call returns (close() may wait a second for a pipe's reader) drops the
        // returned tuple; the owner then still knows the handle is closed, its errors, and
        // the warning it has yet to give.
        try {
          owner.attr("_errors_at_close") = counts;
          owner.attr("_close_message") = status == STEPPROF_WARN_ERRORS ? message : std::string();
        } catch (py::error_already_set&) {  // (an owner without these attributes: only the returned tuple says)
        }
        return py::make_tuple(status, message, counts);
      },
      py::arg("owner"), py::arg("handle"),
      "Closes the recorder and sets owner._closing to 0, owner._finishing to False, owner._errors_at_close to its "
      "counts and "
      "owner._close_message to the warning (empty when none); returns (status, message, {kind: count}); status 2: "
      "errors were counted.");
  m.def(
      "error_count",
      [](std::uintptr_t h, py::object kind) {
        const std::string k = kind.is_none() ? std::string() : kind.cast<std::string>();
        const std::int64_t n = stepprof_error_count(handle(h), kind.is_none() ? nullptr : k.c_str());
        if (n < 0) check(static_cast<int>(n));
        return n;
      },
      py::arg("handle"), py::arg("kind") = py::none());
  m.def("info_json", [](std::uintptr_t h) {
    std::size_t needed = 0;
    stepprof_info_json(handle(h), nullptr, 0, &needed);
    std::string buf(needed + 1, '\0');
    check(stepprof_info_json(handle(h), buf.data(), buf.size(), &needed));
    buf.resize(needed);
    return text(buf, "replace");  // (valid UTF-8: the recorder writes bad bytes of a path as U+FFFD)
  });

  m.def(
      "region",
      [](const std::string& name) {
        stepprof_region_id id = 0;
        // A name that records nothing (past 1024 names; empty or over 1024 bytes as written)
        // is counted by the recorder and reported, never raised into the training loop.
        const bool recorded = stepprof_region_register(name.c_str(), &id) == STEPPROF_OK;
        auto* obj = PyObject_New(RegionObject, region_type);
        if (!obj) throw py::error_already_set();
        obj->id = id;
        obj->name = PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size()));
        return py::make_tuple(py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(obj)), recorded);
      },
      py::arg("name"),
      "Registers region `name` and returns (its context manager, recorded); recorded is False for a name the "
      "recorder refused (past 1,024 names, empty, over 1,024 bytes): its region records nothing (counted).");
  m.def(
      "counter",
      [](const std::string& name) {
        stepprof_counter_id id = 0;
        const bool recorded = stepprof_counter_register(name.c_str(), &id) == STEPPROF_OK;  // (as for regions)
        return py::make_tuple(id, recorded);
      },
      py::arg("name"), "Registers counter `name`; returns (its id, recorded), as region() does.");
  m.def("counter_add", [](stepprof_counter_id id, std::int64_t n) { return check(stepprof_counter_add(id, n)); });
  m.def("frame_histogram_add", [](std::int64_t frames, std::int64_t samples) {
    return stored_or_counted(stepprof_frame_histogram_add(frames, samples));
  });
  m.def("input_shape", [](const std::vector<std::int64_t>& dims) {
    return stored_or_counted(stepprof_input_shape(dims.data(), dims.size()));
  });
  m.def("sample_indices", [](const std::vector<std::int64_t>& indices) {
    return stored_or_counted(stepprof_sample_indices(indices.data(), indices.size()));
  });
  m.def("set_padding_fraction", [](double f) { return check(stepprof_set_padding_fraction(f)); });
  m.def(
      "microbatch",
      [](const std::vector<std::int64_t>& frames, const std::vector<std::int64_t>& tokens, const std::string& path,
         std::int64_t padded_length) {
        if (!frames.empty() && !tokens.empty() && frames.size() != tokens.size()) {
          // (The C ABI takes one length for both: a call with samples and neither array
          // is its bad micro-batch, counted as bad_argument as the C++ recorder counts
          // this one.)
          stepprof_microbatch(nullptr, nullptr, 1, nullptr, -1);
          throw std::invalid_argument("frames and tokens must have one entry per sample");
        }
        const std::size_t n = frames.empty() ? tokens.size() : frames.size();
        const int s = stepprof_microbatch(frames.empty() ? nullptr : frames.data(),
                                          tokens.empty() ? nullptr : tokens.data(), n,
                                          path.empty() ? nullptr : path.c_str(), padded_length);
        return stored_or_counted(s);
      },
      py::arg("frames"), py::arg("tokens"), py::arg("path"), py::arg("padded_length"),
      "Records one micro-batch of the per-micro-batch detail (see Recorder.microbatch).");
  m.def(
      "set_device_stream",
      [](std::uintptr_t stream) { return check(stepprof_set_device_stream(reinterpret_cast<void*>(stream))); },
      "Times this thread's regions on CUstream `stream` (an integer address, e.g. "
      "torch.cuda.current_stream().cuda_stream; 0: the legacy default stream).");
  m.def(
      "printable",
      [](const py::bytes& b) {
        const std::string_view raw = b;
        return text(stepprof::printable(raw), "replace");
      },
      "`b` (bytes, e.g. a log path) as the recorder's messages show text: control characters and bytes that are no "
      "UTF-8 as \\xNN per byte (stepprof::printable).");
  m.def("clock_name", [] { return std::string(stepprof_clock_name()); });
  m.def("last_error", [] { return text(stepprof_last_error(), "replace"); });
}
