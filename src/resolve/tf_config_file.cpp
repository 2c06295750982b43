// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/tf_config_file.hpp>

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

namespace tfslurm {
namespace {

constexpr std::string_view k_key = "tf_config_file";
constexpr std::array<std::string_view, 4> k_placeholders{"{tmpdir}", "{job}", "{step}", "{rank}"};

// Loaded by Python's site module at startup, before any user code: TensorFlow reads TF_CONFIG
// from os.environ long after. os._exit rather than SystemExit: site turns a SystemExit raised
// in sitecustomize into "Fatal Python error" and a traceback, and swallows other exceptions
// with a one-line note, so that the trainer would run without TF_CONFIG.
constexpr std::string_view k_shim = R"PY(# SPDX-License-Identifier: MIT
# Written by tfslurm next to a TF_CONFIG file (tfslurm --tf-config-file): TF_CONFIG is too large
# for the environment, so TFSLURM_TF_CONFIG_FILE names a file holding it. This directory is first
# on PYTHONPATH: load the file into os.environ["TF_CONFIG"] before TensorFlow reads it, then run
# the next sitecustomize on sys.path, if there is one.
import os as _os
import sys as _sys


def _tfslurm_load_tf_config():
    path = _os.environ.get("TFSLURM_TF_CONFIG_FILE", "")
    if not path:
        return
    try:
        with open(path, encoding="utf-8") as source:
            _os.environ["TF_CONFIG"] = source.read()
    except OSError as error:
        _sys.stderr.write(
            "tfslurm: TFSLURM_TF_CONFIG_FILE: cannot read TF_CONFIG from %r: %s "
            "(the file is written by tfslurm on the task's node and removed when "
            "'tfslurm run' ends)\n" % (path, error.strerror or error))
        _sys.stderr.flush()
        _os._exit(1)


def _tfslurm_chain():
    import importlib.machinery
    import importlib.util

    here = _os.path.dirname(_os.path.abspath(__file__))
    rest = [p for p in _sys.path if _os.path.abspath(p or _os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


_tfslurm_load_tf_config()
_tfslurm_chain()
)PY";

[[noreturn]] void throw_io(std::string_view what, const std::string& path, int error) {
    throw errors::make(Errc::io, path, fmt::format("{}: {}", what, std::strerror(error)));
}

std::string
expand(std::string_view value, const Plan& plan, std::uint32_t rank, const Environment& env) {
    const std::string_view pattern = value == "auto" ? k_default_tf_config_file : value;
    const auto tmpdir_env = env.get("TMPDIR");
    const std::string tmpdir = tmpdir_env && !tmpdir_env->empty() && tmpdir_env->front() == '/'
                                   ? std::string{*tmpdir_env}
                                   : std::string{"/tmp"};
    const auto text = [](const std::optional<std::uint64_t>& id) {
        return id ? std::to_string(*id) : std::string{"none"};
    };
    const std::array<std::string, 4> values{
        tmpdir, text(plan.job_id), text(plan.step_id), std::to_string(rank)};
    std::string out;
    for (std::size_t pos = 0; pos < pattern.size();) {
        bool replaced = false;
        for (std::size_t i = 0; i < k_placeholders.size() && !replaced; ++i) {
            if (pattern.compare(pos, k_placeholders[i].size(), k_placeholders[i]) == 0) {
                out += values[i];
                pos += k_placeholders[i].size();
                replaced = true;
            }
        }
        if (!replaced) {
            out.push_back(pattern[pos++]);
        }
    }
    return out;
}

/// A file descriptor closed on scope exit.
class Fd {
  public:
    explicit Fd(int fd) noexcept : m_fd(fd) {}
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    Fd(Fd&&) = delete;
    Fd& operator=(Fd&&) = delete;
    ~Fd() {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    [[nodiscard]] int get() const noexcept { return m_fd; }
    /// Close now, reporting close()'s error (a write error may only show here).
    [[nodiscard]] int close() noexcept {
        const int result = ::close(m_fd);
        m_fd = -1;
        return result;
    }

  private:
    int m_fd;
};

/// Write `content` to `path` atomically: a reader sees the old file or the whole new one.
void write_atomically(const std::string& path, std::string_view content) {
    const std::string temp = fmt::format("{}.tmp.{}", path, ::getpid());
    ::unlink(temp.c_str()); // a leftover of a killed writer with the same pid
    {
        Fd fd{::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)};
        if (fd.get() < 0) {
            throw_io("cannot create", temp, errno);
        }
        for (std::size_t done = 0; done < content.size();) {
            const ssize_t n = ::write(fd.get(), content.data() + done, content.size() - done);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                const int error = n < 0 ? errno : EIO;
                ::unlink(temp.c_str());
                throw_io("cannot write", temp, error);
            }
            done += static_cast<std::size_t>(n);
        }
        if (::fsync(fd.get()) != 0 || fd.close() != 0) {
            const int error = errno;
            ::unlink(temp.c_str());
            throw_io("cannot write", temp, error);
        }
    }
    // rename() replaces a symbolic link planted at `path` itself, never its target.
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        const int error = errno;
        ::unlink(temp.c_str());
        throw_io("cannot rename a temporary file onto", path, error);
    }
    // No fsync of the directory: readers on this node see the rename at once, and after a
    // crash of the node the task that needed the file is gone too. On a busy disk each fsync
    // costs tens of milliseconds of `tfslurm env`.
}

/// Create the shim directory, or accept an existing one only if nobody else could have put
/// code in it: in a shared /tmp another user may create the name first.
void make_private_directory(const std::string& dir) {
    if (::mkdir(dir.c_str(), 0700) == 0) {
        return;
    }
    if (errno != EEXIST) {
        throw_io("cannot create directory", dir, errno);
    }
    struct stat info {};
    if (::lstat(dir.c_str(), &info) != 0) {
        throw_io("cannot inspect", dir, errno);
    }
    if (!S_ISDIR(info.st_mode) || info.st_uid != ::geteuid() ||
        (info.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        throw errors::make(Errc::io,
                           dir,
                           "exists but is not a private directory of this user",
                           "remove it, or choose another path with " + setting_ref(k_key));
    }
}

/// Python caches the compiled shim in `<dir>/__pycache__/sitecustomize.<tag>.pyc`, the tag
/// naming the interpreter: remove whatever it left there.
void remove_python_cache(const std::string& dir, bool& ok) {
    const std::string cache = dir + "/__pycache__";
    DIR* listing = ::opendir(cache.c_str());
    if (listing == nullptr) {
        return;
    }
    while (const dirent* entry = ::readdir(listing)) {
        const std::string_view name = entry->d_name;
        if (name.rfind("sitecustomize.", 0) == 0 &&
            ::unlink((cache + "/" + std::string{name}).c_str()) != 0 && errno != ENOENT) {
            ok = false;
        }
    }
    ::closedir(listing);
    if (::rmdir(cache.c_str()) != 0 && errno != ENOENT) {
        ok = false;
    }
}

} // namespace

void validate_tf_config_template(std::string_view value) {
    if (value == "auto") {
        return;
    }
    if (value.empty()) {
        throw errors::invalid_setting(k_key, "expected auto or a path", value);
    }
    for (std::size_t i = 0; i < value.size(); ++i) {
        const auto byte = static_cast<unsigned char>(value[i]);
        if (byte < 0x20 || byte >= 0x7f || value[i] == ':') {
            // ':' would split the shim's directory in two on PYTHONPATH.
            throw errors::invalid_setting(
                k_key,
                fmt::format("expected printable ASCII without ':': byte 0x{:02x} at offset {}",
                            static_cast<unsigned>(byte),
                            i),
                value);
        }
    }
    for (std::size_t pos = 0; (pos = value.find_first_of("{}", pos)) != std::string_view::npos;) {
        bool known = false;
        for (const auto placeholder : k_placeholders) {
            if (value.compare(pos, placeholder.size(), placeholder) == 0) {
                known = true;
                pos += placeholder.size();
                break;
            }
        }
        if (!known) {
            throw errors::invalid_setting(
                k_key,
                fmt::format("unknown placeholder at offset {} (known: {{tmpdir}}, {{job}}, "
                            "{{step}}, {{rank}})",
                            pos),
                value);
        }
    }
    if (value.front() != '/' && value.rfind("{tmpdir}", 0) != 0) {
        throw errors::invalid_setting(k_key, "expected an absolute path (or {tmpdir}/...)", value);
    }
    if (value.back() == '/') {
        throw errors::invalid_setting(k_key, "expected a file name, not a directory", value);
    }
}

TfConfigFile tf_config_file_for(std::string_view value,
                                const Plan& plan,
                                std::uint32_t rank,
                                const Environment& env) {
    validate_tf_config_template(value);
    const auto& self = plan.ranks.at(rank);
    if (value != "auto" && value.find("{rank}") == std::string_view::npos) {
        // Only the node of this rank matters: the file is local to it.
        std::uint32_t on_node = 0;
        for (const auto& other : plan.ranks) {
            on_node += other.node == self.node ? 1U : 0U;
        }
        if (on_node > 1) {
            throw errors::invalid_setting(
                k_key,
                fmt::format(
                    "{} tasks of the step on {} would write the same file", on_node, self.host),
                value,
                "put {rank} in the path, e.g. " + setting_ref(k_key, "auto"));
        }
    }
    TfConfigFile file;
    file.path = expand(value, plan, rank, env);
    file.shim_dir = file.path + ".site";
    return file;
}

FileTaskEnvironment file_task_environment(const Plan& plan,
                                          std::uint32_t rank,
                                          const OutputSelection& selection,
                                          std::string_view value,
                                          const Environment& env) {
    FileTaskEnvironment out;
    if (!selection.tf_config) {
        out.vars = task_environment(plan, rank, selection);
        return out;
    }
    out.file = tf_config_file_for(value, plan, rank, env);
    auto vars = task_environment(plan, rank, selection, TfConfigPlace::file);
    const auto python_path = env.get("PYTHONPATH");
    out.vars.reserve(vars.size() + 2);
    out.vars.emplace_back(k_tf_config_file_variable, out.file.path);
    out.vars.emplace_back("PYTHONPATH",
                          python_path && !python_path->empty()
                              ? fmt::format("{}:{}", out.file.shim_dir, *python_path)
                              : out.file.shim_dir);
    std::move(vars.begin(), vars.end(), std::back_inserter(out.vars));
    out.tf_config = tf_config_json(plan, rank);
    return out;
}

std::string_view sitecustomize_shim() noexcept {
    return k_shim;
}

void write_tf_config_file(const TfConfigFile& file, std::string_view tf_config) {
    make_private_directory(file.shim_dir);
    write_atomically(file.shim_dir + "/sitecustomize.py", k_shim);
    write_atomically(file.path, tf_config);
    logger().debug("TF_CONFIG ({} bytes) written to {}, its loader to {}/sitecustomize.py",
                   tf_config.size(),
                   file.path,
                   file.shim_dir);
}

bool remove_tf_config_file(const TfConfigFile& file) noexcept {
    if (file.path.empty()) {
        return true;
    }
    bool ok = true;
    const auto remove = [&ok](const std::string& path, bool directory) {
        const int result = directory ? ::rmdir(path.c_str()) : ::unlink(path.c_str());
        if (result != 0 && errno != ENOENT) {
            ok = false;
        }
    };
    remove(file.path, false);
    remove(file.shim_dir + "/sitecustomize.py", false);
    remove_python_cache(file.shim_dir, ok);
    remove(file.shim_dir, true);
    return ok;
}

} // namespace tfslurm
