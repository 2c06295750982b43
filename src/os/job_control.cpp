// SPDX-License-Identifier: MIT
#include "os/detail/client_run.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/events_file.hpp>
#include <tfslurm/os/job_control.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/run/requeue_policy.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace tfslurm::detail {

namespace {

/// Trailing newlines and spaces dropped.
std::string without_trailing_blanks(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
        text.pop_back();
    }
    return text;
}

/// The most of a client's output that is kept; the rest is read and dropped.
constexpr std::size_t k_client_output_limit = 65536;

/// Read what `fd` (non-blocking) holds now into `out`, up to k_client_output_limit bytes kept,
/// and at most `chunks` reads: a client (or a child of it that kept the pipe) writing faster
/// than we read cannot keep us here.
void read_client_output(int fd, std::string& out, int chunks) {
    std::array<char, 4096> buffer{};
    for (int i = 0; i < chunks; ++i) {
        const ssize_t n = ::read(fd, buffer.data(), buffer.size());
        if (n <= 0) {
            return;
        }
        const auto room = k_client_output_limit - std::min(out.size(), k_client_output_limit);
        out.append(buffer.data(), std::min(static_cast<std::size_t>(n), room));
    }
}

} // namespace

ClientRun run_client(std::vector<std::string> args) {
    ClientRun out;
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& arg : args) {
        argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    std::array<int, 2> pipe{-1, -1};
    if (::pipe2(pipe.data(), O_CLOEXEC) != 0) {
        out.why = fmt::format("cannot start {}: {}", args[0], std::strerror(errno));
        return out;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, pipe[1], STDERR_FILENO);
    pid_t pid = 0;
    const int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe[1]);
    if (rc != 0) {
        ::close(pipe[0]);
        out.why = rc == ENOENT ? fmt::format("{} not found in PATH", args[0])
                               : fmt::format("cannot start {}: {}", args[0], std::strerror(rc));
        return out;
    }
    ::fcntl(pipe[0], F_SETFL, O_NONBLOCK);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    // Per pass: more than a pipe holds (16 pages), so a quiet client's output is read whole.
    constexpr int k_reads_per_pass = 32;
    int status = 0;
    bool ended = false;
    while (!ended) {
        read_client_output(pipe[0], out.output, k_reads_per_pass);
        const pid_t waited = ::waitpid(pid, &status, WNOHANG);
        if (waited < 0 && errno != EINTR) {
            // ECHILD: someone set SIGCHLD to SIG_IGN and the kernel reaped the client; its
            // status is lost, so success cannot be told from failure.
            const int error = errno;
            ::close(pipe[0]);
            out.why = fmt::format("cannot learn how {} ended: {}", args[0], std::strerror(error));
            return out;
        }
        ended = waited > 0;
        if (!ended && std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            ::close(pipe[0]);
            out.why = fmt::format("{} did not answer within 30 s", args[0]);
            return out;
        }
        if (!ended) {
            std::this_thread::sleep_for(std::chrono::milliseconds{1});
        }
    }
    read_client_output(pipe[0], out.output, k_reads_per_pass);
    ::close(pipe[0]);
    out.output = without_trailing_blanks(std::move(out.output));
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        out.why = WIFEXITED(status)
                      ? fmt::format("{} exited with status {}", args[0], WEXITSTATUS(status))
                      : fmt::format("{} was killed by signal {}", args[0], WTERMSIG(status));
        if (!out.output.empty()) {
            out.why += ": " + out.output;
        }
    }
    return out;
}

} // namespace tfslurm::detail

namespace tfslurm {

using detail::ClientRun;
using detail::run_client;

namespace {

/// `scontrol update JobId=<job> <field>=<value>`; empty on success, else why not.
std::string update_job(std::uint64_t job, std::string_view field, const std::string& value) {
    return run_client({"scontrol",
                       "update",
                       fmt::format("JobId={}", job),
                       fmt::format("{}={}", field, value)})
        .why;
}

/// The job's ExcNodeList and comment, through `squeue -h -j <job> -o %x|%k`.
/// \throws Error (Errc::io) when squeue fails or prints something else.
JobRecord read_job_record(std::uint64_t job) {
    const ClientRun run = run_client({"squeue", "-h", "-j", std::to_string(job), "-o", "%x|%k"});
    if (!run.why.empty()) {
        throw Error(Errc::io, fmt::format("cannot read job {}: {}", job, run.why));
    }
    return parse_job_record(run.output);
}

/// Before the requeue: the record of this run (the node it leaves out, how far it got) into
/// the job's comment (Slurm takes a comment while the job runs), so that the next run can say
/// what was left out, even if this launcher is killed before ExcNodeList is set, and judge
/// whether the requeues make progress (requeue_storm()). Returns the job's ExcNodeList and
/// comment as they were (nullopt when they cannot be read: an exclusion is then not attempted).
std::optional<JobRecord> record_run(const RequeueRequest& request, const JobReport& report) {
    JobRecord before;
    try {
        before = read_job_record(request.job);
    } catch (const Error& e) {
        if (request.exclusion) {
            report(Outcome::interrupted,
                   fmt::format("job {}: cannot leave {} out of its next run: {}",
                               request.job,
                               fmt::join(request.exclusion->nodes, ","),
                               e.what()));
        } else {
            logger().debug("job {}: no record of this run: {}", request.job, e.what());
        }
        return std::nullopt;
    }
    if (!request.exclusion && !request.progress) {
        return before; // a preemption: nothing to carry to the next run
    }
    const std::string record =
        run_record_text(RunRecord{request.restart, request.exclusion, request.progress});
    if (const std::string why =
            update_job(request.job, "Comment", comment_with_record(before.comment, record));
        !why.empty()) {
        logger().debug("job {}: the comment keeps no record of this run: {}", request.job, why);
    }
    return before;
}

/// Appended to the step's record, which rank 0's coordinator wrote until now.
void append_requeue_event(const std::string& events,
                          const RequeueRequest& request,
                          const std::string& why) {
    try {
        EventWriter record(events, setting_ref("events"), EventWriter::Mode::append);
        StepEvent event;
        event.kind = EventKind::requeue;
        event.time = WallClock::now();
        event.job = std::to_string(request.job);
        event.why = why;
        if (request.exclusion) {
            event.excluded = request.exclusion->nodes;
        }
        record.write(event);
    } catch (const Error& e) {
        logger().warn("{}", e.what());
    }
}

/// A takeover's turn (RequeueRequest::takeover): wait, then read the job again; nullopt when
/// this launcher may requeue it, else why not (takeover_refusal(), or the job unreadable).
std::optional<std::string> await_turn(const RequeueRequest& request) {
    const Takeover& turn = *request.takeover;
    logger().debug("job {}: requeue turn {}: waiting {} ms before reading the job again",
                   request.job,
                   turn.turn,
                   turn.wait.count());
    std::this_thread::sleep_for(turn.wait);
    const ClientRun run =
        run_client({"scontrol", "-o", "show", "job", std::to_string(request.job)});
    if (!run.why.empty()) {
        return fmt::format("cannot read job {}: {}", request.job, run.why);
    }
    return takeover_refusal(run.output, request.job, request.restart - 1);
}

} // namespace

SlurmLibrary load_libslurm(const Environment& env) {
    std::vector<std::string> names = default_libslurm_names();
    if (const auto path = env.get("TFSLURM_LIBSLURM"); path && !path->empty()) {
        names = {std::string(*path)};
    }
    return SlurmLibrary::load(names);
}

std::optional<std::chrono::system_clock::time_point>
job_end_time(const Plan& plan, const Environment& env, SlurmJob job, const JobReport& report) {
    if (const auto text = env.get("SLURM_JOB_END_TIME"); text && !text->empty()) {
        auto end = job_end_from_variable(*text, std::chrono::system_clock::now());
        if (!end) {
            logger().debug("SLURM_JOB_END_TIME {}: the job has no time limit, no checkpoint",
                           *text);
        }
        return end;
    }
    const auto warn = [&plan, &report](const std::string& why) {
        const std::string text = fmt::format("{}: cannot read the job's end time: {}; no "
                                             "checkpoint signal",
                                             setting_ref("checkpoint_before"),
                                             why);
        if (plan.self_rank.value_or(0) == 0) {
            report(Outcome::interrupted, text);
        } else {
            logger().debug("{}", text);
        }
    };
    if (job == SlurmJob::no || !plan.job_id) {
        warn("not in a Slurm job and SLURM_JOB_END_TIME is not set");
        return std::nullopt;
    }
    try {
        auto end = load_libslurm(env).job_end_time(*plan.job_id);
        if (!end) {
            logger().debug("job {} has no time limit: no checkpoint signal", *plan.job_id);
        }
        return end;
    } catch (const Error& e) {
        warn(e.what());
        return std::nullopt;
    }
}

// In order (~70 lines), because Slurm ends this process soon after the requeue: a takeover's
// turn, the line, the comment (while the job runs), the requeue, ExcNodeList (now that the job
// is pending again), the record.
int requeue_job(const LaunchResult& result,
                const Environment& env,
                const std::string& events,
                const JobReport& report) {
    const RequeueRequest& request = *result.requeue;
    if (request.takeover) {
        if (request.takeover->turn == 0) {
            // Rank 0 leaves the first move to the other side: its line says so now, since the
            // wait is long and srun shows nothing else meanwhile.
            report(result.outcome,
                   fmt::format("{}; waiting {} for a launcher of the other nodes to requeue job "
                               "{} first",
                               request.takeover->fallback,
                               format_seconds(request.takeover->wait),
                               request.job));
        }
        if (const auto why = await_turn(request)) {
            report(result.outcome,
                   fmt::format("{}; not requeueing job {}: {}",
                               request.takeover->fallback,
                               request.job,
                               *why));
            return request.status_if_refused;
        }
    }
    report(result.outcome, result.message);
    // Let srun forward the line above before Slurm ends the step.
    std::this_thread::sleep_for(k_abort_linger);
    const std::optional<JobRecord> before = record_run(request, report);
    // The requeue's SIGTERM reaches every process of the step, this launcher too: it still has
    // ExcNodeList to set (its SIGKILL comes when the batch script ended).
    std::signal(SIGTERM, SIG_IGN);
    try {
        load_libslurm(env).requeue(request.job);
    } catch (const Error& e) {
        report(Outcome::interrupted, fmt::format("job {} not requeued: {}", request.job, e.what()));
        if (before) {
            // No next run: the comment goes back to what it was.
            (void)update_job(request.job, "Comment", before->comment);
        }
        return request.status_if_refused;
    }
    logger().debug("job {} requeued", request.job);
    if (before && request.exclusion) {
        const std::string nodes = fmt::format("{}", fmt::join(request.exclusion->nodes, ","));
        std::string why;
        std::string excluded;
        try {
            excluded = merged_exclusion(before->excluded, request.exclusion->nodes);
            why = update_job(request.job, "ExcNodeList", excluded);
        } catch (const Error& e) {
            why = e.what(); // the job's own ExcNodeList is no hostlist tfslurm reads
        }
        if (!why.empty()) {
            report(Outcome::interrupted,
                   fmt::format("job {} requeued, but {} is not left out of its next run: {}",
                               request.job,
                               nodes,
                               why));
        } else {
            logger().debug("job {}: ExcNodeList={}", request.job, excluded);
        }
    }
    if (!events.empty()) {
        append_requeue_event(events, request, result.message);
    }
    return k_status_requeued;
}

std::string scancel_step(const StepRef& step) {
    std::string id = to_string(step);
    std::string name = "scancel";
    std::array<char*, 3> argv{name.data(), id.data(), nullptr};
    pid_t pid = 0;
    // posix_spawnp: PATH is searched as a shell would, and nothing of ours runs in the child.
    if (const int rc = ::posix_spawnp(&pid, "scancel", nullptr, nullptr, argv.data(), environ);
        rc != 0) {
        return rc == ENOENT ? std::string("scancel not found in PATH")
                            : fmt::format("cannot start scancel: {}", std::strerror(rc));
    }
    int status = 0;
    // Polled every millisecond: the cancel's SIGKILL also comes for this launcher (see
    // await_cancel_kill), and scancel itself is a process of the step.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{30};
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return "scancel did not answer within 30 s";
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
    // Killed by SIGKILL: Slurm is ending the step (scancel is one of its processes), so the
    // cancel is under way.
    if ((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
        (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
        return {};
    }
    return WIFEXITED(status) ? fmt::format("scancel exited with status {}", WEXITSTATUS(status))
                             : fmt::format("scancel was killed by signal {}", WTERMSIG(status));
}

void await_cancel_kill(const StepRef& step) {
    logger().debug("step {} cancelled: waiting up to {} s for Slurm's SIGKILL",
                   to_string(step),
                   k_cancel_kill_wait.count());
    std::fflush(stdout);
    std::fflush(stderr);
    std::signal(SIGTERM, SIG_IGN);
    std::this_thread::sleep_for(k_cancel_kill_wait);
    logger().debug("no SIGKILL from Slurm within {} s of cancelling step {}",
                   k_cancel_kill_wait.count(),
                   to_string(step));
}

void cancel_step(const StepRef& step,
                 Outcome outcome,
                 const std::string& message,
                 const Environment& env,
                 const JobReport& report) {
    const auto line = [&message](const std::string& cancel) {
        return message.empty() ? cancel : message + "; " + cancel;
    };
    std::optional<SlurmLibrary> library;
    try {
        library.emplace(load_libslurm(env));
    } catch (const Error& e) {
        report(outcome,
               line(fmt::format("cancelling step {} with scancel (libslurm cannot be called: {})",
                                to_string(step),
                                e.what())));
        std::this_thread::sleep_for(k_abort_linger);
        if (const std::string why = scancel_step(step); !why.empty()) {
            report(outcome,
                   fmt::format("cannot cancel step {}: {}; end it with scancel {}",
                               to_string(step),
                               why,
                               to_string(step)));
            return;
        }
        await_cancel_kill(step);
        return;
    }
    report(outcome, line(fmt::format("cancelling step {} through Slurm", to_string(step))));
    // Before the cancel: once the step is cancelled srun may stop forwarding task output.
    std::this_thread::sleep_for(k_abort_linger);
    try {
        library->cancel_step(step);
    } catch (const Error& e) {
        logger().warn("{}", e.what());
        return;
    }
    await_cancel_kill(step);
}

std::optional<RunRecord> announce_requeued_run(const RequeuePolicy& policy,
                                               std::uint32_t max_requeues,
                                               const Environment& env,
                                               const JobReport& report) {
    if (policy.restart_count == 0) {
        return std::nullopt;
    }
    try {
        const JobRecord job = read_job_record(policy.job);
        auto run = run_record_in_comment(job.comment);
        const auto record = run ? run->exclusion : std::nullopt;
        if (!record) {
            logger().debug("job {}: no node left out (comment \"{}\")", policy.job, job.comment);
            return run;
        }
        std::vector<std::string> nodes;
        if (const auto list = env.get("SLURM_JOB_NODELIST")) {
            nodes = expand_hostlist(*list, "SLURM_JOB_NODELIST");
        }
        if (const auto text =
                requeued_run_line(*record, policy.restart_count, max_requeues, nodes)) {
            report(Outcome::interrupted, *text);
        }
        return run;
    } catch (const Error& e) {
        logger().debug("job {}: cannot tell which node was left out: {}", policy.job, e.what());
    }
    return std::nullopt;
}

namespace {

/// squeue's lines, one id each.
std::vector<std::string> id_lines(const std::string& output) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at < output.size();) {
        std::size_t end = output.find('\n', at);
        end = end == std::string::npos ? output.size() : end;
        std::string line = output.substr(at, end - at);
        while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) {
            line.pop_back();
        }
        line.erase(0, line.find_first_not_of(' '));
        if (!line.empty()) {
            out.push_back(std::move(line));
        }
        at = end + 1;
    }
    return out;
}

} // namespace

std::string read_job_line(std::uint64_t job) {
    const ClientRun run = run_client({"scontrol", "-o", "show", "job", std::to_string(job)});
    if (!run.why.empty()) {
        if (run.output.find("Invalid job id") != std::string::npos) {
            throw errors::invalid_argument(
                "top", fmt::format("job {} not found: {}", job, run.output), std::to_string(job));
        }
        throw errors::make(Errc::io, "top", fmt::format("cannot read job {}: {}", job, run.why));
    }
    return run.output;
}

std::vector<std::string> running_steps(std::uint64_t job) {
    const ClientRun run = run_client({"squeue", "-h", "-s", "-j", std::to_string(job), "-o", "%i"});
    if (!run.why.empty()) {
        throw errors::make(
            Errc::io, "top", fmt::format("cannot list the steps of job {}: {}", job, run.why));
    }
    return id_lines(run.output);
}

std::string node_address(const std::string& node) {
    const ClientRun run = run_client({"scontrol", "-o", "show", "node", node});
    if (!run.why.empty()) {
        return node;
    }
    constexpr std::string_view k_key = "NodeAddr=";
    std::size_t at = run.output.find(k_key);
    // The key at the start of a word only (`NodeAddr=` never ends another key).
    while (at != std::string::npos && at > 0 && run.output[at - 1] != ' ') {
        at = run.output.find(k_key, at + 1);
    }
    if (at == std::string::npos) {
        return node;
    }
    at += k_key.size();
    const std::size_t end = run.output.find_first_of(" \n", at);
    std::string address =
        run.output.substr(at, end == std::string::npos ? std::string::npos : end - at);
    return address.empty() ? node : address;
}

std::vector<std::string> running_jobs() {
    const ClientRun run = run_client({"squeue", "-h", "--me", "-t", "RUNNING", "-o", "%i"});
    if (!run.why.empty()) {
        throw errors::make(
            Errc::io, "top", fmt::format("cannot list your running jobs: {}", run.why));
    }
    return id_lines(run.output);
}

} // namespace tfslurm
