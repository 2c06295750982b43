// SPDX-License-Identifier: MIT
// `tfslurm top [JOB[.STEP]]`: a running step of `tfslurm run`, live. Finding the step (Slurm's
// clients: job_control.hpp), its coordinator (the endpoint rank 0 published:
// watch_endpoint.hpp), the connection (watch_client.hpp) and the view (top_view.hpp) are the
// library's; this face owns the terminal: raw keys, the alternate screen, the redraw.
#include "commands.hpp"
#include "io.hpp"

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/os/job_control.hpp>
#include <tfslurm/os/watch_endpoint.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/resolve/slurm_config.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/run_settings.hpp>
#include <tfslurm/run/top_view.hpp>
#include <tfslurm/shell/watch_client.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

namespace tfslurm::cli {

namespace {

/// Seconds since the epoch of a local civil time given as if it were UTC (scontrol prints the
/// controller's local time): mktime() knows the zone.
std::int64_t local_to_utc(std::int64_t local_as_utc) {
    const auto seconds = static_cast<std::time_t>(local_as_utc);
    std::tm civil{};
    ::gmtime_r(&seconds, &civil);
    civil.tm_isdst = -1;
    return static_cast<std::int64_t>(std::mktime(&civil));
}

std::int64_t now_seconds() {
    return static_cast<std::int64_t>(std::time(nullptr));
}

/// The job to watch: the argument, else the job this runs in, else the user's one running job.
WatchRequest watch_request(const std::string& argument, const Environment& env) {
    if (!argument.empty()) {
        return parse_watch_request(argument);
    }
    if (const auto job = env.get("SLURM_JOB_ID")) {
        try {
            return WatchRequest{parse_watch_request(*job).job, std::nullopt};
        } catch (const Error&) {
            throw errors::invalid_argument("SLURM_JOB_ID", "expected a job id", *job);
        }
    }
    const std::vector<std::string> jobs = running_jobs();
    if (jobs.size() == 1) {
        return parse_watch_request(jobs.front());
    }
    throw errors::make(Errc::invalid_argument,
                       "top",
                       jobs.empty() ? std::string("you have no running job to watch")
                                    : fmt::format("you have {} running jobs: {}; name one",
                                                  jobs.size(),
                                                  fmt::join(jobs, ", ")),
                       "tfslurm top JOB[.STEP]");
}

/// Where the step's coordinator listens: `--control`, else the endpoint its rank 0 published.
WatchTarget watch_target(const Environment& env,
                         const TopJob& job,
                         std::uint64_t step,
                         const std::string& control) {
    WatchTarget target;
    target.step = protocol::StepId{job.job, step};
    if (!control.empty()) {
        const std::size_t colon = control.rfind(':');
        std::uint16_t port = 0;
        if (colon != std::string::npos) {
            const std::string digits = control.substr(colon + 1);
            if (!digits.empty() && digits.size() <= 5 &&
                digits.find_first_not_of("0123456789") == std::string::npos &&
                std::stoul(digits) >= 1 && std::stoul(digits) <= 65535) {
                port = static_cast<std::uint16_t>(std::stoul(digits));
            }
        }
        std::string host = colon == std::string::npos ? std::string() : control.substr(0, colon);
        if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
            host = host.substr(1, host.size() - 2);
        }
        if (port == 0 || host.empty()) {
            throw errors::invalid_argument(
                "--control", "expected HOST:PORT (a port from 1 to 65535)", control);
        }
        target.host = host;
        target.address = host;
        target.port = port;
        return target;
    }
    const auto endpoint = read_watch_endpoint(env, job.job, step);
    if (!endpoint) {
        const auto path = watch_endpoint_path(env, job.job, step);
        throw errors::make(
            Errc::io,
            "top",
            fmt::format("step {}.{} published no endpoint{}: it is not a step of tfslurm run, or "
                        "its rank 0 could not write there, or it is only starting",
                        job.job,
                        step,
                        path ? fmt::format(" in {}", quote(*path))
                             : std::string(" (HOME is not set)")),
            "name its coordinator with --control HOST:PORT");
    }
    target.host = endpoint->host;
    // A node name (what launchers dial when no address was chosen): where Slurm reaches it,
    // since a login node may not resolve node names.
    target.address =
        is_ip_address(endpoint->address) ? endpoint->address : node_address(endpoint->address);
    target.port = endpoint->port;
    return target;
}

protocol::Authenticator watcher_auth(const Environment& env) {
    protocol::AuthSettings auth;
    if (const auto secret = env.get("TFSLURM_SECRET")) {
        auth.secret_hex = std::string(*secret);
    }
    auto socket = find_munge_socket(env);
    auth.munge_socket = std::move(socket.path);
    auth.munge_socket_origin = std::move(socket.origin);
    try {
        return protocol::Authenticator::create(auth);
    } catch (const Error& e) {
        // Said for top, which has no --auth: the launchers' setting is not what to change here.
        std::string why =
            e.rendered([](std::string_view key, std::string_view value) {
                 return value.empty() ? std::string(key) : fmt::format("{}={}", key, value);
             }).what();
        const std::string_view prefix = "auth: ";
        if (why.compare(0, prefix.size(), prefix) == 0) {
            why.erase(0, prefix.size());
        }
        throw errors::make(Errc::auth,
                           "top",
                           fmt::format("cannot prove who you are: {}", why),
                           "start munged, or set TFSLURM_SECRET to the step's secret");
    }
}

// --- The terminal ------------------------------------------------------------------------------

volatile std::sig_atomic_t g_top_stop = 0;
volatile std::sig_atomic_t g_top_resized = 0;

extern "C" void top_on_stop(int /*signo*/) {
    g_top_stop = 1;
}
extern "C" void top_on_resize(int /*signo*/) {
    g_top_resized = 1;
}

/// Raw keys and the alternate screen while it lives; the terminal as it was afterwards.
class TopTerminal {
  public:
    TopTerminal() {
        if (::tcgetattr(STDIN_FILENO, &m_saved) == 0) {
            termios raw = m_saved;
            raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
            raw.c_cc[VMIN] = 0;
            raw.c_cc[VTIME] = 0;
            m_restore = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
        }
        struct sigaction action {};
        action.sa_handler = top_on_stop;
        ::sigaction(SIGINT, &action, &m_old_int);
        ::sigaction(SIGTERM, &action, &m_old_term);
        action.sa_handler = top_on_resize;
        ::sigaction(SIGWINCH, &action, &m_old_winch);
        write_stdout("\x1b[?1049h\x1b[?25l");
    }
    ~TopTerminal() {
        try {
            write_stdout("\x1b[?25h\x1b[?1049l");
        } catch (const Error&) {
            // the terminal went away: nothing to restore on it
        }
        if (m_restore) {
            ::tcsetattr(STDIN_FILENO, TCSANOW, &m_saved);
        }
        ::sigaction(SIGINT, &m_old_int, nullptr);
        ::sigaction(SIGTERM, &m_old_term, nullptr);
        ::sigaction(SIGWINCH, &m_old_winch, nullptr);
    }
    TopTerminal(const TopTerminal&) = delete;
    TopTerminal& operator=(const TopTerminal&) = delete;

    static void size(TopScreen& screen) {
        winsize size{};
        if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_row > 0) {
            screen.width = size.ws_col;
            screen.height = size.ws_row;
        }
    }

  private:
    termios m_saved{};
    bool m_restore = false;
    struct sigaction m_old_int {};
    struct sigaction m_old_term {};
    struct sigaction m_old_winch {};
};

void draw(const Snapshot& snapshot, const TopJob& job, TopScreen& screen) {
    std::string frame = "\x1b[H";
    for (const std::string& line : render_top_screen(snapshot, job, now_seconds(), screen)) {
        frame += line;
        frame += "\x1b[K\r\n";
    }
    if (frame.size() >= 2) {
        frame.resize(frame.size() - 2); // no newline after the last line: the screen would scroll
    }
    frame += "\x1b[J";
    write_stdout(frame);
}

/// Apply the keys in `keys` to `screen`; false when `q` came.
bool apply_keys(std::string_view keys, const Snapshot& snapshot, TopScreen& screen) {
    const std::size_t page = top_page_rows(snapshot, screen.height);
    const auto up = [&screen](std::size_t n) {
        screen.first = screen.first > n ? screen.first - n : 0;
    };
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const std::string_view rest = keys.substr(i);
        if (rest.substr(0, 3) == "\x1b[A") {
            up(1);
            i += 2;
        } else if (rest.substr(0, 3) == "\x1b[B") {
            ++screen.first;
            i += 2;
        } else if (rest.substr(0, 4) == "\x1b[5~") {
            up(page);
            i += 3;
        } else if (rest.substr(0, 4) == "\x1b[6~") {
            screen.first += page;
            i += 3;
        } else {
            switch (keys[i]) {
            case 'q':
                return false;
            case 's':
                screen.sort = next(screen.sort);
                screen.first = 0;
                break;
            case 'f':
                screen.filter = next(screen.filter);
                screen.first = 0;
                break;
            case 'j':
                ++screen.first;
                break;
            case 'k':
                up(1);
                break;
            case ' ':
                screen.first += page;
                break;
            case 'b':
                up(page);
                break;
            case 'g':
                screen.first = 0;
                break;
            case 'G':
                screen.first = snapshot.ranks.size(); // clamped by the renderer
                break;
            default:
                break;
            }
        }
    }
    return true;
}

/// The live view until `q`, a signal, or the step's end. Returns the exit status.
int live(WatchClient& client, Snapshot snapshot, const TopJob& job, const Environment& env) {
    TopScreen screen;
    const auto no_color = env.get("NO_COLOR");
    const auto term = env.get("TERM");
    screen.color = (!no_color || no_color->empty()) && (!term || *term != "dumb");
    const TopTerminal terminal;
    TopTerminal::size(screen);
    draw(snapshot, job, screen);
    constexpr Millis k_silence{10000};
    auto last = Clock::now();
    std::string ended;
    while (g_top_stop == 0) {
        std::array<pollfd, 2> fds{pollfd{client.fd(), POLLIN, 0}, pollfd{STDIN_FILENO, POLLIN, 0}};
        const int ready = client.buffered() ? 1 : ::poll(fds.data(), fds.size(), 500);
        if (g_top_resized != 0) {
            g_top_resized = 0;
            TopTerminal::size(screen);
            draw(snapshot, job, screen);
        }
        if (ready < 0) {
            continue; // a signal
        }
        if ((fds[1].revents & POLLIN) != 0) {
            std::array<char, 64> keys{};
            const ssize_t n = ::read(STDIN_FILENO, keys.data(), keys.size());
            if (n > 0 && !apply_keys(std::string_view(keys.data(), static_cast<std::size_t>(n)),
                                     snapshot,
                                     screen)) {
                return 0;
            }
            draw(snapshot, job, screen);
        }
        if (client.buffered() || (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
            auto fresh = client.next(Millis{5000});
            if (!fresh) {
                ended = fmt::format("step {}.{} ended", snapshot.job, snapshot.step);
                break;
            }
            snapshot = std::move(*fresh);
            last = Clock::now();
            draw(snapshot, job, screen);
        } else if (Clock::now() - last > k_silence) {
            throw errors::make(Errc::io,
                               "top",
                               fmt::format("no snapshot from step {}.{}'s coordinator for {}",
                                           snapshot.job,
                                           snapshot.step,
                                           format_seconds(k_silence)));
        }
    }
    if (!ended.empty()) {
        // After the terminal is restored (TopTerminal's end): said on the normal screen.
        return -1;
    }
    return 0;
}

} // namespace

void setup_top(CLI::App& app, int& exit_status) {
    auto* sub = app.add_subcommand(
        "top",
        "Watch a running step of 'tfslurm run', live: its state, time left, requeues and "
        "restarts, the ranks in each state by role, and every rank with its host, state, CPU use "
        "and memory (its trainer's whole process tree), progress age, restarts and output rate, "
        "refreshed each second. Keys: q quits, s sorts, f filters, j/k/arrows/PgUp/PgDn scroll. "
        "JOB defaults to SLURM_JOB_ID, else to your one running job; STEP to the job's newest. "
        "Read-only: it proves who it is like a launcher (the same user) and can change nothing.");
    auto target = std::make_shared<std::string>();
    auto once = std::make_shared<bool>(false);
    auto json = std::make_shared<bool>(false);
    auto control = std::make_shared<std::string>();
    auto timeout = std::make_shared<std::string>("10");
    sub->add_option("JOB[.STEP]", *target, "The job (and step) to watch, e.g. 12345 or 12345.0");
    auto* once_flag = sub->add_flag(
        "--once", *once, "Print one snapshot as plain text and exit (for scripts and mail)");
    sub->add_flag(
           "--json", *json, "Print one snapshot as a JSON document and exit (tfslurm(1), TOP)")
        ->excludes(once_flag);
    sub->add_option("--control",
                    *control,
                    "Where the step's coordinator listens, HOST:PORT, when its rank 0 could not "
                    "publish it in ~/.tfslurm/steps (rank 0's debug log names its port)");
    sub->add_option("--timeout",
                    *timeout,
                    "Seconds to wait for the coordinator to answer and for each snapshot "
                    "(default 10)");
    sub->callback([target, once, json, control, timeout, &exit_status] {
        const Environment env = Environment::from_process();
        const Millis wait = parse_seconds(*timeout, "--timeout");
        if (wait <= Millis{0}) {
            throw errors::invalid_argument(
                "--timeout", "expected a positive number of seconds", *timeout);
        }
        if (!*once && !*json && (!stdin_is_terminal() || ::isatty(STDOUT_FILENO) == 0)) {
            throw errors::make(Errc::invalid_argument,
                               "top",
                               "the live view needs a terminal (standard input and output)",
                               "use --once or --json for one snapshot");
        }
        const WatchRequest request = watch_request(*target, env);
        const TopJob job =
            job_from_record(parse_scontrol_record(read_job_line(request.job)), local_to_utc);
        // Another user's step: said at once. With --control the coordinator is asked anyway:
        // it refuses a watcher of another user itself (its MUNGE credential names its uid).
        if (control->empty() && job.uid && *job.uid != ::getuid()) {
            throw errors::invalid_argument(
                "top",
                fmt::format("job {} is not yours: it belongs to {} (uid {}); a step is watched by "
                            "its own user only",
                            job.job,
                            job.user,
                            *job.uid),
                std::to_string(job.job));
        }
        if (job.state != "RUNNING") {
            throw errors::make(Errc::io,
                               "top",
                               fmt::format("job {} is not running (state {})", job.job, job.state));
        }
        const std::uint64_t step = choose_step(request, running_steps(job.job));
        const WatchTarget where = watch_target(env, job, step, *control);
        WatchClient client(where, watcher_auth(env), wait);
        auto snapshot = client.next(wait);
        if (!snapshot) {
            throw errors::make(
                Errc::io,
                "top",
                fmt::format("step {}.{} ended before its first snapshot", job.job, step));
        }
        if (*json) {
            write_stdout(render_top_json(*snapshot, job, now_seconds()));
        } else if (*once) {
            write_stdout(render_top_text(*snapshot, job, now_seconds()));
        } else if (live(client, std::move(*snapshot), job, env) < 0) {
            write_stdout(fmt::format("tfslurm top: step {}.{} ended\n", job.job, step));
        }
        exit_status = 0;
    });
}

} // namespace tfslurm::cli
