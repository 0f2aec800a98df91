/* SPDX-License-Identifier: BSD-3-Clause */
// blksum.cpp: nvmelab._native bindings of the blksum C core (src/blksum/blksum.h).
//
// The checksum runs on its own C threads; the calling Python thread waits without the
// GIL in short slices, so Ctrl-C (and a progress callback) are served while it runs:
// on a signal the job is cancelled, joined, and the KeyboardInterrupt propagates.
#include <cerrno>
#include <fcntl.h>
#include <functional>
#include <string>
#include <unistd.h>
#include <vector>

#include "bindings.h"
#include "errors.h"

#ifdef NVMELAB_HAVE_BLKSUM
extern "C" {
#include "blksum/blksum.h"
#include "blksum/image.h"
}
#endif

namespace py = pybind11;

namespace nvmelab {

#ifdef NVMELAB_HAVE_BLKSUM
namespace {

// Room for one error line from the driver.
constexpr size_t NVME_ERRLEN_BLKSUM = 256;
// How long the waiting Python thread sleeps between checks for signals / progress.
constexpr int kPollMs = 100;

blksum_io parse_io(const std::string &io)
{
    if (io == "psync")
        return BLKSUM_IO_PSYNC;
    if (io == "io_uring")
        return BLKSUM_IO_IO_URING;
    throw py::value_error("unknown I/O mode '" + io + "' (psync or io_uring)");
}

// blksum's codes through the one converter (errors.h): its own -BLKSUM_EDIGEST is a bad argument.
[[noreturn]] void blksum_raise(int rc, const std::string &path)
{
    std::string what = std::string(blksum_strerror(rc));
    if (rc == -BLKSUM_EDIGEST)
        rc = -EINVAL;
    bool bad_arg = rc == -EINVAL || rc == -ERANGE || rc == -E2BIG;
    raise_errno(rc, bad_arg && !path.empty() ? path + ": " + what : what, bad_arg ? std::string() : path);
}

py::dict result_dict(const blksum_result &r)
{
    char hex[2 * BLKSUM_MAX_MD_SIZE + 1];
    blksum_hex(&r, hex, sizeof(hex));
    py::dict d;
    d["hexdigest"] = std::string(hex);
    d["size"] = r.size;
    d["bytes_read"] = r.bytes_read;
    d["blocks"] = r.blocks;
    d["zero_blocks"] = r.zero_blocks;
    d["hole_blocks"] = r.hole_blocks;
    d["reads"] = r.reads;
    d["elapsed_s"] = r.elapsed_s;
    d["io"] = std::string(r.io ? r.io : "");
    return d;
}

py::dict run_job(const blksum_source &src, const blksum_opts &o, const std::string &label, py::object progress)
{
    blksum_job *job = nullptr;
    int rc;
    {
        py::gil_scoped_release nogil;
        rc = blksum_start(&src, &o, &job);
    }
    if (rc < 0)
        blksum_raise(rc, label);
    auto abort_job = [&]() {
        blksum_cancel(job);
        py::gil_scoped_release nogil;
        blksum_finish(job, nullptr);
    };
    for (;;) {
        int w;
        {
            py::gil_scoped_release nogil;
            w = blksum_wait(job, kPollMs);
        }
        if (PyErr_CheckSignals() != 0) {
            py::error_already_set err; // take the pending exception (KeyboardInterrupt)
            abort_job();
            throw err;
        }
        if (!progress.is_none()) {
            uint64_t done = 0, total = 0;
            blksum_progress(job, &done, &total);
            try {
                progress(done, total);
            } catch (...) {
                abort_job();
                throw;
            }
        }
        if (w == 0)
            break;
    }
    blksum_result r{};
    {
        py::gil_scoped_release nogil;
        rc = blksum_finish(job, &r);
    }
    if (rc < 0)
        blksum_raise(rc, label);
    return result_dict(r);
}

// The options every entry point takes, checked once (the digest string must outlive the options).
// While a source is opened (connecting to an NBD server and its handshake, a qemu-nbd starting), a signal must
// end the wait whichever thread of the process catches it (numpy's BLAS threads, say, when the opening thread
// has the stop signals blocked between two polls): Python's C-level handler writes to its wakeup descriptor from
// that thread, and blksum's waits poll it (blksum_set_interrupt_fd). signal.set_wakeup_fd works in the main
// thread only: elsewhere nothing changes. The previous wakeup descriptor is restored afterwards.
class OpenInterrupt {
  public:
    OpenInterrupt()
    {
        if (pipe2(fds_, O_NONBLOCK | O_CLOEXEC) != 0) {
            fds_[0] = fds_[1] = -1;
            return;
        }
        try {
            old_ = py::module_::import("signal").attr("set_wakeup_fd")(fds_[1]);
            blksum_set_interrupt_fd(fds_[0]);
        } catch (py::error_already_set &) { // not the main thread
            old_ = py::object();
        }
    }
    ~OpenInterrupt()
    {
        blksum_set_interrupt_fd(-1);
        if (old_) {
            try {
                py::module_::import("signal").attr("set_wakeup_fd")(old_);
            } catch (py::error_already_set &e) {
                e.discard_as_unraisable("restoring signal.set_wakeup_fd after opening a blksum source");
            }
        }
        for (int fd : fds_)
            if (fd >= 0)
                close(fd);
    }
    OpenInterrupt(const OpenInterrupt &) = delete;
    OpenInterrupt &operator=(const OpenInterrupt &) = delete;

  private:
    int fds_[2] = {-1, -1};
    py::object old_;
};

blksum_opts checked_opts(const std::string &digest, int threads, int queue_depth, size_t read_size, blksum_io io)
{
    blksum_opts o;
    blksum_opts_init(&o);
    o.digest = digest.c_str();
    o.threads = threads;
    o.queue_depth = queue_depth;
    o.read_size = read_size;
    o.io = io;
    char msg[NVME_ERRLEN_BLKSUM];
    if (blksum_opts_check(&o, msg, sizeof(msg)) < 0)
        throw py::value_error(msg);
    return o;
}

// Runs the job on an open source and closes it on every path (without the GIL: closing stops a qemu-nbd
// blksum started); annotate adds what the entry point knows of the source while it is still open.
py::dict run_and_close(blksum_source &src, const blksum_opts &o, const std::string &label, py::object progress,
                       const std::function<void(py::dict &)> &annotate)
{
    auto close = [&]() {
        py::gil_scoped_release nogil;
        blksum_source_close(&src);
    };
    try {
        py::dict d = run_job(src, o, label, progress);
        annotate(d);
        close();
        return d;
    } catch (...) {
        close();
        throw;
    }
}

} // namespace

void bind_blksum(py::module_ &m)
{
    m.attr("BLKSUM_BLOCK_SIZE") = BLKSUM_BLOCK_SIZE;
    m.attr("BLKSUM_DEFAULT_QUEUE_DEPTH") = BLKSUM_DEFAULT_QUEUE_DEPTH;
    m.attr("BLKSUM_DEFAULT_READ_SIZE") = BLKSUM_DEFAULT_READ_SIZE;
    m.attr("BLKSUM_MAX_THREADS") = BLKSUM_MAX_THREADS;
    m.attr("BLKSUM_MAX_QUEUE_DEPTH") = BLKSUM_MAX_QUEUE_DEPTH;
    m.attr("BLKSUM_MAX_READ_SIZE") = BLKSUM_MAX_READ_SIZE;

    m.def(
        "blksum_digests",
        [] {
            std::vector<std::string> names;
            blksum_list_digests(
                [](const char *n, void *arg) { static_cast<std::vector<std::string> *>(arg)->push_back(n); }, &names);
            py::list out;
            for (const auto &n : names)
                out.append(n);
            return out;
        },
        "Digest names blksum accepts (OpenSSL's, plus 'null').");
    m.def("blksum_digest_known", [](const std::string &name) { return blksum_digest_known(name.c_str()); });
    m.def("blksum_have_io_uring", &blksum_have_io_uring);

    m.def(
        "blksum_file",
        [](const std::string &path, const std::string &digest, int threads, int queue_depth, size_t read_size,
           const std::string &io, py::object progress) {
            blksum_opts o = checked_opts(digest, threads, queue_depth, read_size, parse_io(io));
            blksum_source src;
            int rc = blksum_source_open(&src, path.c_str());
            if (rc < 0)
                blksum_raise(rc, path);
            return run_and_close(src, o, path, progress, [&](py::dict &d) { d["source"] = std::string(src.kind); });
        },
        py::arg("path"), py::arg("digest") = BLKSUM_DEFAULT_DIGEST, py::arg("threads"),
        py::arg("queue_depth") = BLKSUM_DEFAULT_QUEUE_DEPTH, py::arg("read_size") = BLKSUM_DEFAULT_READ_SIZE,
        py::arg("io") = "psync", py::arg("progress") = py::none(),
        "blkhash digest of a file, block device or pipe ('-' = stdin); returns a dict with the hex digest and "
        "timing. progress(done_bytes, total_bytes) is called about every 100 ms.");

    m.def(
        "blksum_image",
        [](const std::string &name, const std::string &mode, const std::string &digest, int threads, int queue_depth,
           size_t read_size, const std::string &io, py::object progress) {
            enum blksum_mode m;
            if (blksum_mode_parse(mode.c_str(), &m) < 0)
                throw py::value_error("mode must be auto, file, nbd or qcow2, got '" + mode + "'");
            blksum_opts o = checked_opts(digest, threads, queue_depth, read_size, parse_io(io));
            char msg[512];
            int rc;
            blksum_source src;
            msg[0] = '\0';
            {
                OpenInterrupt interruptible;
                py::gil_scoped_release nogil;
                rc = blksum_source_open_image(&src, name.c_str(), m, msg, sizeof(msg));
            }
            if (rc < 0) {
                if (rc == -ENOENT && !msg[0])
                    blksum_raise(rc, name);
                throw py::value_error(std::string(msg[0] ? msg : blksum_strerror(rc)));
            }
            if (msg[0]) /* why the image is read another way than its name suggests (image.h), as the CLI says */
                py::module_::import("logging")
                    .attr("getLogger")("nvmelab.engines.blksum")
                    .attr("info")("%s", std::string(msg));
            if (src.target)
                o.io = BLKSUM_IO_TARGET;
            return run_and_close(src, o, name, progress, [&](py::dict &d) { d["source"] = std::string(src.kind); });
        },
        py::arg("name"), py::arg("mode") = "auto", py::arg("digest") = BLKSUM_DEFAULT_DIGEST, py::arg("threads"),
        py::arg("queue_depth") = BLKSUM_DEFAULT_QUEUE_DEPTH, py::arg("read_size") = BLKSUM_DEFAULT_READ_SIZE,
        py::arg("io") = "psync", py::arg("progress") = py::none(),
        "blkhash digest of an image by mode (src/blksum/image.h): 'auto' reads an NBD URI with libnbd, a qcow2 "
        "file with the direct reader, anything else raw; 'nbd' serves a file with qemu-nbd; 'qcow2'; 'file'.");
    m.def(
        "blksum_have_nbd",
        [] {
            const char *why = nullptr;
            bool ok = blksum_have_nbd(&why);
            return py::make_tuple(ok, std::string(why ? why : ""));
        },
        "(available, reason): whether this build reads NBD (libnbd at configure time).");

    m.def(
        "blksum_uri",
        [](const py::object &uri_arg, const std::string &digest, int threads, int queue_depth, size_t read_size,
           uint32_t nsid, py::object progress) {
            const std::string uri = nvmelab::uri_text(uri_arg);
            blksum_opts o = checked_opts(digest, threads, queue_depth, read_size, BLKSUM_IO_TARGET);
            char msg[NVME_ERRLEN_BLKSUM];
            int rc;
            blksum_source src;
            msg[0] = '\0';
            {
                py::gil_scoped_release nogil;
                rc = blksum_source_open_uri(&src, uri.c_str(), nsid, msg, sizeof(msg));
            }
            if (rc < 0) {
                if (msg[0])
                    throw py::value_error(std::string(msg));
                blksum_raise(rc, uri);
            }
            return run_and_close(src, o, uri, progress, [&](py::dict &d) {
                d["source"] = std::string("nvme");
                d["target_describe"] = std::string(blksum_source_describe(&src));
            });
        },
        py::arg("uri"), py::arg("digest") = BLKSUM_DEFAULT_DIGEST, py::arg("threads"),
        py::arg("queue_depth") = BLKSUM_DEFAULT_QUEUE_DEPTH, py::arg("read_size") = BLKSUM_DEFAULT_READ_SIZE,
        py::arg("nsid") = 0, py::arg("progress") = py::none(),
        "blkhash digest of a namespace of an nvmelab target (emu://, pci://), read through the user-space "
        "driver with up to queue_depth chunks in flight on one I/O qpair.");
}
#else
void bind_blksum(py::module_ &) {}
#endif

} // namespace nvmelab
