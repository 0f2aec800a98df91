/* SPDX-License-Identifier: BSD-3-Clause */
// uri.cpp — nvmelab._native.uri_parse: the driver's one target-URI grammar (nvme/uri.h) as a dict, so that
// Python tells schemes apart and edits URIs with the C parser's rules (nvmelab/driver/uri.py); and
// nvmelab._native.uri_schemes: the one table of schemes (nvme/scheme.h) that the C dispatchers read.
#include "nvme/uri.h"

#include <memory>
#include <string>

#include "bindings.h"
#include "nvme/emu/emu_keys.h"
#include "nvme/scheme.h"

namespace py = pybind11;

namespace nvmelab {
/* The row flags by the names Python reads (nvme/scheme.h). */
static const struct {
    unsigned flag;
    const char *name;
} scheme_flags[] = {
    {NVME_SCHEME_DRIVER, "driver"},         {NVME_SCHEME_KIO, "kio"},
    {NVME_SCHEME_CUDA_RUN, "cuda_run"},     {NVME_SCHEME_IMAGE, "image"},
    {NVME_SCHEME_NBD_EXPORT, "nbd"},        {NVME_SCHEME_EMULATED, "emulated"},
    {NVME_SCHEME_NEEDS_CUDA, "needs_cuda"}, {NVME_SCHEME_NEEDS_NBD, "needs_nbd"},
};

static void bind_uri_schemes(py::module_ &m)
{
    m.def(
        "uri_schemes",
        [] {
            py::list rows;
            for (unsigned i = 0; i < nvme_scheme_count(); i++) {
                const struct nvme_scheme *r = nvme_scheme_at(i);
                py::list flags;
                for (const auto &f : scheme_flags)
                    if (r->flags & f.flag)
                        flags.append(py::str(f.name));
                py::dict d;
                d["name"] = py::str(r->name);
                d["kind"] = (int)r->kind;
                d["flags"] = py::tuple(flags);
                d["what"] = py::str(r->what);
                d["example"] = py::str(r->example);
                rows.append(d);
            }
            return py::tuple(rows);
        },
        "The target-URI schemes of the driver's one table (nvme/scheme.h), in table order: a tuple of dicts "
        "name (lower case, no \"://\"), kind (the row's index), flags (the serving layers and traits: driver, "
        "kio, cuda_run, image, nbd, emulated, needs_cuda, needs_nbd), what (one line) and example (a URI shape).");
}

void bind_uri(py::module_ &m)
{
    bind_uri_schemes(m);
    m.def(
        "emu_keys",
        []() {
            py::list rows;
            const struct nvme_emu_key *k;
            for (unsigned i = 0; (k = nvme_emu_key_at(i)); i++) {
                py::list who;
                if (k->who & NVME_EMU_CPU)
                    who.append("emu");
                if (k->who & NVME_EMU_GPU)
                    who.append("gpu-emu");
                py::dict d;
                d["name"] = k->name;
                d["old"] = k->old ? py::object(py::str(k->old)) : py::object(py::none());
                d["emulators"] = py::tuple(who);
                d["values"] = k->values;
                d["default_emu"] = k->def_cpu;
                d["default_gpu_emu"] = k->def_gpu;
                d["doc"] = k->doc;
                rows.append(d);
            }
            return rows;
        },
        "The emulators' key table (nvme/emu/emu_keys.h), one dict per row: name, old (its old spelling or None),\n"
        "emulators ('emu', 'gpu-emu'), values, default_emu, default_gpu_emu, doc.");
    m.def(
        "emu_uri_warnings",
        [](const py::object &uri_arg) {
            const std::string uri = nvmelab::uri_text(uri_arg);
            char warn[NVME_EMU_WARN_LEN] = "";
            nvme_emu_uri_warnings(uri.c_str(), warn, sizeof(warn));
            return std::string(warn);
        },
        py::arg("uri"),
        "The old key or value spellings an emu:// or gpu-emu:// URI uses, as the emulator words its warnings\n"
        "(nvme/emu/emu_keys.h; '; '-joined), '' when none or for any other URI. Opens nothing.");
    m.def(
        "uri_parse",
        [](const py::object &uri_arg) {
            const std::string uri = nvmelab::uri_text(uri_arg);
            /* the parser's messages quote the URI (up to NVME_URI_MAX_LEN characters) */
            std::string err(NVME_URI_MAX_LEN + 512u, '\0');
            struct nvme_uri *u = nullptr;
            int rc = nvme_uri_parse(uri.c_str(), &u, err.data(), err.size());
            if (rc == -ENOMEM)
                throw std::bad_alloc();
            if (rc != 0 || !u) {
                err.resize(err.find('\0'));
                throw py::value_error(err.empty() ? "URI '" + uri + "': not a valid URI" : err);
            }
            std::unique_ptr<struct nvme_uri, void (*)(struct nvme_uri *)> owned(u, nvme_uri_free);
            py::list items, params;
            for (unsigned i = 0; i < u->nitems; i++)
                items.append(py::str(u->items[i]));
            for (unsigned i = 0; i < u->nparams; i++)
                params.append(py::make_tuple(py::str(u->params[i].key), py::str(u->params[i].value)));
            py::dict d;
            d["scheme"] = py::str(u->scheme);
            d["authority"] = items;
            d["path"] = py::str(u->path);
            d["params"] = params;
            return d;
        },
        py::arg("uri"),
        "Parse a target URI with the driver's one grammar (src/README.md, \"Target URIs\"): a dict of "
        "scheme (lower case), authority (its comma-separated items), path (decoded, \"\" when absent) and "
        "params (ordered (key, value) pairs, values decoded; a bare key has the value \"1\"). A URI the "
        "grammar refuses raises ValueError with the parser's message; a non-str raises TypeError.");
}

} // namespace nvmelab
