// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The launcher <-> coordinator wire protocol (described for humans in docs/protocol.md); the
/// proofs carried in a hello are made and checked by auth.hpp.
///
/// A frame is a 4-byte big-endian payload length followed by the payload: one compact JSON
/// object with `"v":7` and a `"type"`. Frames larger than k_max_frame are refused before any
/// allocation. Every malformed input throws Error (Errc::protocol); the coordinator answers it by
/// closing that one connection.
///
/// Example: `encode_frame(Heartbeat{})` is `\0\0\0\x1a{"type":"heartbeat","v":7}`.

#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/startup.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tfslurm::protocol {

/// The protocol's version. 7 (later addition, sent only with the `on_failure_check` setting,
/// which every launcher of a step shares): `checked`, the failed rank's node checks after the
/// abort. 7 (later addition): `exit` may carry the launcher's start-up
/// phases (`startup`) and the step its trainer last reported (`progress_step`). 7: every frame
/// after the handshake is sealed (channel.hpp): a MAC over its sequence number and payload with a
/// key of its direction, derived from the secret or from key material each end puts in its MUNGE
/// credential (readable by the same uid only). 6: both proofs bind the endpoint the launcher
/// dialled (`tcp:<port>`, `unix:<relay>`, auth.hpp), so that a proof passed on to another endpoint
/// fails; node leaders' relays listen on an abstract Unix socket whose peers are checked with
/// SO_PEERCRED; with the tree, a rank routed through its leader may not register directly. 5:
/// `progress` (stragglers), the `preflight` of `probed` and the abort cause `preflight`. 4 (later
/// additions, sent only with the `probe` or `preflight` setting, which every launcher of a step
/// shares): `probed` and `go`, abort cause `unreachable`; `probed` may carry a failed `preflight`
/// check, abort cause `preflight`. 4: the coordinator may answer a failed trainer's `exit` with
/// `restart` (the launcher starts it again) instead of aborting the step; node leaders carry their
/// node's launchers in `relay` envelopes (the tree); in exact mode the hello may carry the port the
/// launcher bound (`port`), and `cluster` the ports that differ from the plan's (`ports`, by rank).
/// 3: the hello may carry the launcher's chosen address, and the coordinator sends `cluster` (every
/// node's chosen address) once every rank registered; a launcher sends `stall` (abort cause
/// `stalled`); an abort may list its missing `ranks`. 2: the hello carries the step id, both proofs
/// bind it, a reject carries a code.
inline constexpr int k_version = 7;
inline constexpr std::size_t k_header_size = 4;
/// Largest payload accepted (and sent). Real messages are below 1 KiB; a MUNGE credential of
/// our payload is about 200 bytes.
inline constexpr std::size_t k_max_frame = std::size_t{64} * 1024;
/// Largest payload a launcher accepts from its coordinator (or its node's relay) once that peer
/// proved itself (welcome checked): a `cluster` of a step on 10,000 nodes exceeds k_max_frame.
/// Unauthenticated input stays bounded by k_max_frame.
inline constexpr std::size_t k_max_trusted_frame = std::size_t{64} * 1024 * 1024;
/// Frames one gather write takes at most (coordinator and launchers alike): what queued up
/// while the last write was in flight leaves in one system call, far below IOV_MAX buffers.
inline constexpr std::size_t k_frames_per_write = 64;
/// Largest payload the coordinator accepts from an authenticated node connection: one relayed
/// launcher message (at most k_max_frame) in its envelope.
inline constexpr std::size_t k_max_relay_frame = k_max_frame + 1024;
/// Bytes of randomness in a challenge.
inline constexpr std::size_t k_nonce_size = 32;

/// How a launcher proves it belongs to the job.
enum class AuthMethod {
    automatic, ///< munge when a credential can be encoded, else secret when one is set
    munge,     ///< a MUNGE credential (same uid, same job, same rank, not replayed)
    secret     ///< HMAC-SHA256 of the challenge with the per-job TFSLURM_SECRET
};

[[nodiscard]] std::string_view to_string(AuthMethod method) noexcept;

/// Parse `auto`, `munge` or `secret`. \throws Error (Errc::invalid_argument) naming `subject`.
[[nodiscard]] AuthMethod parse_auth_method(std::string_view text, std::string_view subject);

/// The step a launcher or a coordinator belongs to: two steps of one job may share a node and a
/// control port, so every proof names both.
struct StepId {
    std::uint64_t job = 0;
    std::uint64_t step = 0;
};

/// As Slurm prints it. Input: {12345, 1}. Output: `12345.1`.
[[nodiscard]] std::string to_string(StepId id);

/// Coordinator -> launcher, first frame of every connection: a fresh random challenge.
struct Challenge {
    std::string nonce; ///< k_nonce_size random bytes, lower-case hex
};

/// Launcher -> coordinator: who I am, with my proof.
struct Hello {
    std::uint64_t job = 0;
    std::uint64_t step = 0;
    std::uint32_t rank = 0;
    Role role = Role::worker;
    std::string host;
    std::int64_t pid = 0;
    AuthMethod auth = AuthMethod::secret; ///< munge or secret, never automatic
    std::string credential;               ///< the MUNGE credential or the hex HMAC
    std::string nonce; ///< the launcher's challenge to the coordinator: k_nonce_size bytes, hex
    /// The address this launcher's node chose (`iface`/`network`): an IPv4 or IPv6 literal;
    /// empty (and absent on the wire) when peers use node names.
    std::string address;
    /// This launcher is its node's leader: besides registering itself, its connection carries
    /// its node's other launchers (`relay` envelopes). Absent on the wire when false.
    bool relay = false;
    /// Exact mode: the trainer port this launcher bound and holds on its node; 0 (absent on the
    /// wire) when it bound none.
    std::uint16_t port = 0;
    /// A watcher's hello (`tfslurm top`, a later addition to version 7): `rank` is then
    /// k_watcher_rank, which its proofs bind, and the coordinator only sends it snapshots
    /// (snapshot.hpp); nothing it sends can change the step. Absent on the wire when false.
    bool watch = false;
};

/// The rank a watcher's hello carries and its proofs bind: no launcher has it (a step has fewer
/// ranks), so a watcher's proof never passes for a launcher's, nor the other way round.
inline constexpr std::uint32_t k_watcher_rank = 0xffffffffU;

/// Both ways on a node leader's connection (the tree, docs/protocol.md): a message of other
/// launchers of the leader's node, carried unchanged. Upstream (leader -> coordinator): one
/// rank, the message a local launcher sent (its `hello` registers it), or `closed` when its
/// local connection ended. Downstream: the ranks the message is for (a verdict or `cluster` is
/// sent once per node) and the message. The relay knows no message type beyond the handshake.
/// Example: `{"msg":{"type":"heartbeat","v":7},"ranks":[5],"type":"relay","v":7}`.
struct Relay {
    std::vector<std::uint32_t> ranks;
    std::string message; ///< one compact JSON object (a payload); empty with `closed`
    std::string closed;  ///< upstream only: why that launcher's local connection ended
};

/// Coordinator -> launcher: registered, with the coordinator's proof (the hello's method, over
/// the hello's nonce); a launcher believes nothing the coordinator says before checking it.
struct Welcome {
    std::uint32_t ranks = 0; ///< size of the step
    std::string credential;  ///< Authenticator::prove_coordinator()
};

/// Why a hello was refused, for the launcher to act on (the reason is for humans).
enum class RejectCode {
    refused,   ///< a bad proof, a rank out of range or registered twice (unproven: named at the
               ///< deadline)
    wrong_job, ///< another job's coordinator holds this candidate port: try the next one
    wrong_step ///< another step (of this job) holds it: try the next one
};

/// Coordinator -> launcher: refused (then the connection is closed).
/// Example: `{"code":"wrong_step","reason":"wrong step 12345.1 (this is step 12345.0)",...}`.
struct Reject {
    RejectCode code = RejectCode::refused;
    std::string reason;
};

[[nodiscard]] bool operator==(const Reject& a, const Reject& b) noexcept;

/// Coordinator -> every launcher, once every rank registered, when the hellos carried
/// addresses: each node's chosen address, by node name, and the trainer ports the launchers
/// bound where they differ from the plan's. Trainers start only after it.
/// Example: `{"addresses":{"n1":"10.1.0.1","n2":"10.1.0.2"},"ports":[0,23005],"type":"cluster",
/// "v":7}` (rank 1 bound 23005; every other rank the plan's own port).
struct Cluster {
    std::map<std::string, std::string, std::less<>> addresses;
    /// By rank: the port the rank's launcher bound, 0 where it is the plan's port (or none was
    /// bound); trailing zeros are left out, so usually it is empty (and absent on the wire).
    std::vector<std::uint16_t> ports;
};

/// What a rank's trainer uses: the CPU time of its whole process tree (its reaped children's
/// included) and its resident memory, summed over the tree.
struct Usage {
    std::uint64_t cpu_ms = 0;
    std::uint64_t rss_bytes = 0;
    /// The bytes its trainer wrote to stdout and stderr so far, when its launcher reads them
    /// (`label`, `stall_progress=output`); absent otherwise (`out` on the wire).
    std::optional<std::uint64_t> output_bytes;

    friend bool operator==(const Usage& a, const Usage& b) noexcept {
        return a.cpu_ms == b.cpu_ms && a.rss_bytes == b.rss_bytes &&
               a.output_bytes == b.output_bytes;
    }
};

/// One follower's usage, as its node's leader carries it.
struct RankUsage {
    std::uint32_t rank = 0;
    Usage usage;

    friend bool operator==(const RankUsage& a, const RankUsage& b) noexcept {
        return a.rank == b.rank && a.usage == b.usage;
    }
};

/// Most followers' usages one heartbeat carries (a node's ranks).
inline constexpr std::size_t k_max_follower_usages = 1024;

/// One follower's start-up phases, as its node's leader carries them.
struct RankStartup {
    std::uint32_t rank = 0;
    StartupTimes startup;

    friend bool operator==(const RankStartup& a, const RankStartup& b) noexcept {
        return a.rank == b.rank && a.startup == b.startup;
    }
};

/// Both ways, every `--heartbeat`: "I am alive". A launcher's may carry its trainer's `usage`
/// (sampled every few seconds while it runs), and a node leader's its followers' (`followers`,
/// their last ones: a follower's heartbeat stops at its leader, which aggregates the node).
/// A launcher's also carries its start-up phases (`startup`, as an `exit`'s) when one was
/// reached since its last heartbeat, and a leader its followers' that changed since its last
/// one (`startups`, [rank, phases] pairs): `tfslurm top` and the metrics see the start-up while
/// it happens. All later additions to version 7, absent when empty: the coordinator's heartbeat
/// is `{}`. A usage with an output count carries it as `out` (a follower's as a fourth item).
/// Example: `{"followers":[[1,250,31457280]],"startups":[[1,{"registered":1796047358123,"task":
/// 1796047358010,"up":1796047358040}]],"type":"heartbeat","usage":{"cpu_ms":1200,"rss":
/// 52428800},"v":7}`.
struct Heartbeat {
    std::optional<Usage> usage;
    std::vector<RankUsage> followers;
    StartupTimes startup;
    std::vector<RankStartup> startups;
};

/// Launcher -> coordinator: my trainer ended (or could not be started: `error` is set).
/// Example: `{"startup":{"registered":1796047358123,"started":1796047358131,"task":
/// 1796047358010,"up":1796047358040},"status":{"code":0,"kind":"exited"},"type":"exit","v":7}`.
struct Exit {
    Exit() = default;
    /// A trainer's end (`error` empty) or failed start, without start-up phases.
    Exit(ExitStatus ended, std::string why = {}) // NOLINT(google-explicit-constructor)
        : status(ended), error(std::move(why)) {}

    ExitStatus status;
    std::string error; ///< non-empty when the trainer never ran, e.g. a port in use
    /// When this launcher reached each phase of its start (milliseconds since the Unix epoch on
    /// the wire, its node's clock); absent on the wire when none is known.
    StartupTimes startup;
    /// The step the trainer last wrote into its progress file (absent: none written).
    std::optional<std::uint64_t> progress_step;
};

/// Launcher -> coordinator: my trainer made no progress for `silent_ms` (the stall timeout):
/// abort the step. Sent once its stack traces were asked for (the stall signal, then the stall
/// grace period or the trainer's end, whichever came first).
struct Stall {
    std::uint64_t silent_ms = 0;
};

/// Launcher -> coordinator: I received SIGTERM/SIGINT (forwarded to my trainer already).
struct Interrupt {
    int signal = 0;
    /// From slurmstepd, which signals every process of the step: every trainer has it already.
    bool whole_step = false;
};

enum class StopReason {
    done,  ///< the work is finished (`--until` reached)
    signal ///< a launcher received SIGTERM/SIGINT: the step is being cancelled
};

/// Coordinator -> launcher: stop your trainer (SIGTERM, SIGKILL after the grace period).
struct Stop {
    StopReason reason = StopReason::done;
    std::uint32_t rank = 0; ///< with StopReason::signal: who received it
    int signal = 0;         ///< with StopReason::signal: which signal
    /// With StopReason::signal: slurmstepd sent it to every process of the step, so every
    /// trainer has it already (no other SIGTERM is sent).
    bool whole_step = false;
};

/// Coordinator -> launcher: your trainer failed, start it again (same environment, same ports)
/// after a short back-off; the step goes on. `count` is this rank's restart number (1 for the
/// first), `limit` its per-rank budget (`max_restarts`).
/// Example: `{"count":1,"limit":2,"type":"restart","v":7}`.
struct Restart {
    std::uint32_t count = 0;
    std::uint32_t limit = 0;
};

/// One peer a launcher could not reach in the reachability probe (`probe`).
struct ProbeFailure {
    std::uint32_t rank = 0; ///< the peer's rank
    std::string address;    ///< what was tried: `10.78.0.13:23000`, `[fd78::13]:23000`, `n3:23000`
    std::string error;      ///< the last attempt's error, e.g. `Connection timed out`
};

[[nodiscard]] bool operator==(const ProbeFailure& a, const ProbeFailure& b) noexcept;

/// Most failures a `probed` carries (the first ones, by peer rank): one names the pair.
inline constexpr std::size_t k_max_probe_failures = 8;

/// A node's failed health check before start (`preflight`): the check's name and what it saw.
/// Example: {"command", "\"test $(hostname) != n2\" exited with status 1"}.
struct PreflightFailure {
    std::string check;  ///< `interface`, `tmpdir`, `gpus`, `command`
    std::string detail; ///< why it failed
};

[[nodiscard]] bool operator==(const PreflightFailure& a, const PreflightFailure& b) noexcept;

/// Launcher -> coordinator, with `probe` or `preflight` (the one barrier before the trainers
/// start): with `probe`, this launcher listened on its trainer's port and tried every peer it
/// will use (or a sample, probe_targets()); `failures` empty: all reached (always empty without
/// `probe`). With `preflight`, `preflight` is the first check of its node that failed (absent on
/// the wire when every check passed, or when another rank of the node ran them).
/// Example: `{"failures":[{"address":"10.78.0.13:23000","error":"Connection timed out",
/// "rank":2}],"type":"probed","v":7}`; `{"failures":[],"preflight":{"check":"tmpdir",
/// "detail":"..."},"type":"probed","v":7}`.
struct Probed {
    std::vector<ProbeFailure> failures;
    std::optional<PreflightFailure> preflight;
};

/// Coordinator -> every launcher, with `probe` or `preflight`: every rank reported `probed`,
/// every peer was reached and every node passed its checks; close the probe listener and start
/// the trainer. The barrier keeps every listener open until nobody probes it any more, and no
/// trainer starts before every node is known to be healthy. Example: `{"type":"go","v":7}`.
struct Go {};

/// Why the step failed.
enum class FailureCause {
    trainer,      ///< a trainer exited non-zero or died by a signal
    start,        ///< a launcher could not start its trainer
    lost,         ///< a launcher vanished (connection closed or no heartbeat)
    unregistered, ///< launchers did not register within the connect timeout
    stalled,      ///< a trainer made no progress for the stall timeout
    unreachable,  ///< with `probe`: a launcher could not reach a peer's trainer address
    preflight     ///< with `preflight`: a node failed a health check before any trainer started
};

/// The wire's name of a cause (also the events file's `cause`). Input: FailureCause::preflight.
/// Output: `preflight`.
[[nodiscard]] std::string_view to_string(FailureCause cause) noexcept;

/// The first failure of a step: enough to print one line anywhere.
struct Failure {
    std::uint32_t rank = 0;
    Role role = Role::worker;
    std::uint32_t index = 0;
    std::string host;
    FailureCause cause = FailureCause::trainer;
    ExitStatus status; ///< FailureCause::trainer and ::start
    std::string
        detail; ///< ::trainer: why it was not restarted (the restart budget is
                ///< spent), usually empty; ::start: the error; ::lost: `connection closed`, ...;
                ///< ::unregistered: the timeout (`60 s`); ::stalled: the
                ///< silence (`300 s`); ::unreachable: the peer, where and why (`rank 0
                ///< (ps:0) at 10.78.0.11:23000: Connection timed out`); ::preflight: the
                ///< failed check and why (`tmpdir: "/tmp" has 12 MiB free (at least 1024 MiB
                ///< needed)`), `host` the node
    std::uint32_t missing = 0; ///< ::unregistered: how many ranks did not register
    /// ::unregistered with missing > 1: the missing ranks as ranges (`3-5,9`); `host` is then
    /// their hosts as a hostlist (`n[2-3]`).
    std::string ranks;
    /// ::lost by silence (no heartbeat, not a closed connection): how many of the step's nodes
    /// the coordinator still heard from when it declared the rank lost, its own included
    /// (Coordinator::answering_nodes()); 0 otherwise (absent on the wire). Rank 0 requeues
    /// at once only with a strict majority (strict_majority(), requeue_policy.hpp).
    std::uint32_t answering = 0;
    int step_status = 1; ///< the step's exit status (the failing rank's status)
};

/// Coordinator -> launcher: the step failed; stop your trainer and exit non-zero.
struct Abort {
    Failure failure;
};

/// Launcher -> coordinator, only with a stall timeout and while a judged trainer runs, every
/// straggler_report_interval(): my trainer last made progress `idle_ms` ago. The coordinator
/// compares the ranks' reports to name a straggler (Coordinator::progressed()).
struct Progress {
    std::uint64_t idle_ms = 0;
};

/// Launcher -> coordinator, with `on_failure_check`, once: the abort named this launcher's rank
/// (its trainer failed or was stuck), and its node ran its checks (the built-in ones of
/// `preflight` and the `on_failure_check` command) before the launcher left. `failure`: the
/// first check that failed (absent: every check passed), the node is then a bad one.
/// Example: `{"failure":{"check":"command","detail":"\"nvidia-smi\" exited with status 1"},
/// "type":"checked","v":7}`; `{"type":"checked","v":7}`.
struct Checked {
    std::optional<PreflightFailure> failure;
};

using Message = std::variant<Challenge,
                             Hello,
                             Welcome,
                             Reject,
                             Heartbeat,
                             Exit,
                             Interrupt,
                             Stop,
                             Abort,
                             Stall,
                             Cluster,
                             Restart,
                             Relay,
                             Probed,
                             Go,
                             Progress,
                             Checked>;

/// The `"type"` of a message, e.g. `"hello"`.
[[nodiscard]] std::string_view type_name(const Message& message) noexcept;

/// The JSON payload (compact, keys sorted). Input: Interrupt{15}.
/// Output: `{"signal":15,"type":"interrupt","v":1}`.
[[nodiscard]] std::string encode_payload(const Message& message);

/// Parse and validate one payload.
/// \throws Error (Errc::protocol): `protocol: <problem>: "<payload>"`, for bad JSON, nesting
///         deeper than 8, a missing or mistyped field, a wrong version or an unknown type.
[[nodiscard]] Message decode_payload(std::string_view payload);

/// A payload decoded by decode_unwrapped(): a `relay`'s message comes decoded in `inner`.
struct Unwrapped {
    Message message;              ///< a Relay's `message` text is left empty
    std::optional<Message> inner; ///< the relayed message; nullopt with `closed` or no relay
};

/// decode_payload() for the coordinator's side of a node leader's connection: a `relay`'s
/// message is decoded in the same parse instead of being dumped to text and parsed again (two
/// parses per relayed hello and exit were most of the coordinator's CPU at 100,000 tasks).
/// Input: `{"msg":{"type":"heartbeat","v":7},"ranks":[5],"type":"relay","v":7}`. Output:
/// Relay{{5}, "", ""} and Heartbeat{}. \throws Error (Errc::protocol) as decode_payload().
[[nodiscard]] Unwrapped decode_unwrapped(std::string_view payload);

/// The messages of a sealed frame's payload from a launcher, in order: one object
/// (decode_unwrapped()), or a **batch**: a JSON array of 2 or more payload objects, each exactly
/// as it would go alone (docs/protocol.md, "Batches"; Outbox, channel.hpp). Each element keeps
/// the depth and size rules of a payload of its own; its errors quote the element.
/// Input: `[{"type":"heartbeat","v":7},{"msg":{...},"ranks":[5],"type":"relay","v":7}]`.
/// Output: {Heartbeat{}, nullopt}, {Relay{{5}, "", ""}, ...}. \throws Error (Errc::protocol)
/// as decode_payload(), and `protocol: a batch of 1 message (expected 2 or more): "[...]"`.
[[nodiscard]] std::vector<Unwrapped> decode_batch(std::string_view payload);

/// Refuse JSON nested deeper than `max_depth` (brackets counted outside strings, no recursion),
/// before a parser sees it. \throws Error (Errc::protocol) `protocol: nested too deeply: ...`.
void check_nesting(std::string_view payload, int max_depth);

/// Check that `payload` is one JSON object of this version with a `"type"`, whatever the type
/// (what a relay passes on unchanged). \throws Error (Errc::protocol) as decode_payload().
/// Input: `{"type":"future","v":7}`: fine. Input: `[1]`: `protocol: not a JSON object: "[1]"`.
void check_relayable(std::string_view payload);

/// Header + payload. \throws Error (Errc::protocol) when the payload exceeds `limit`
/// (k_max_trusted_frame only from a coordinator or a relay to a launcher).
[[nodiscard]] std::string encode_frame(const Message& message, std::size_t limit = k_max_frame);

/// Header + an already encoded payload (a relayed message). Same limit rule as above.
/// Input: `{"type":"heartbeat","v":7}`. Output: `\0\0\0\x1a{"type":"heartbeat","v":7}`.
[[nodiscard]] std::string frame_payload(std::string_view payload, std::size_t limit = k_max_frame);

/// A frame around a payload that is sent as it is, not copied: what goes before and after it.
/// One encoded broadcast (`cluster`, a verdict) is shared by the frames of every connection.
struct FrameParts {
    std::string head; ///< the header, then for a `relay` its text before `msg`'s value
    std::string tail; ///< for a `relay` its text after `msg`'s value; else empty
};

/// The parts of `frame_payload(payload)` (no `ranks`) or, with `ranks`, of
/// `frame_payload(encode_payload(Relay{ranks, payload, {}}))`: head + payload + tail is
/// byte for byte that frame. `trailer`: bytes the sender puts after the tail (a sealed frame's
/// tag, channel.hpp), counted in the header, not against `limit`. \throws Error
/// (Errc::protocol) when it exceeds `limit`.
/// Input: 26 bytes, {5}. Output: `\0\0\0\x4b{"msg":`, `,"ranks":[5],"type":"relay","v":7}`.
[[nodiscard]] FrameParts frame_parts(std::size_t payload_size,
                                     const std::vector<std::uint32_t>& ranks,
                                     std::size_t limit = k_max_frame,
                                     std::size_t trailer = 0);

/// Splits a byte stream into payloads. The length is checked before anything is buffered for
/// the payload, so a hostile `\xff\xff\xff\xff` header costs nothing.
class FrameDecoder {
  public:
    /// `limit`: the largest payload accepted (k_max_frame until the peer is authenticated).
    explicit FrameDecoder(std::size_t limit = k_max_frame) noexcept : m_limit(limit) {}
    /// Accept payloads up to `limit` from now on (once the peer proved itself).
    void set_limit(std::size_t limit) noexcept { m_limit = limit; }
    /// Append bytes received. \throws Error (Errc::protocol) on an oversize length.
    void feed(std::string_view bytes);
    /// The next complete payload, if one is buffered.
    [[nodiscard]] std::optional<std::string> next();
    /// True when a frame is partly received (EOF now would truncate it).
    [[nodiscard]] bool partial() const noexcept { return !m_buffer.empty(); }

  private:
    void check_header() const;
    std::size_t m_limit;
    std::string m_buffer;
};

/// One line describing a failure, the text after `aborting: `.
/// Input: rank 3, worker:2, n2, trainer exited 3. Output: `rank 3 (worker:2) on n2 exited with
/// status 3`. Others: `... was killed by signal 9 (Killed)`, `... launcher lost (no heartbeat
/// for 10 s)`, `... could not start its trainer: <error>`, `... did not register within 60 s`,
/// `... is stuck: no progress for 300 s`, `... cannot reach rank 0 (ps:0) at
/// 10.78.0.11:23000: Connection timed out`, `preflight failed on n2 (rank 1, worker:0): command:
/// "test ..." exited with status 1` (the node first), `... exited with status 3 (<detail>)` when
/// the restart budget is spent; several missing ranks: `ranks 3-5,9 on n[2-3] did not register
/// within 60 s`.
[[nodiscard]] std::string describe(const Failure& failure);

} // namespace tfslurm::protocol
