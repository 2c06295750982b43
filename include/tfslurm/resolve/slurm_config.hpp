// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// What tfslurm reads from Slurm's own configuration (slurm.conf), so that a site's settings
/// apply without the user repeating them: where munged listens (`AuthInfo=socket=...`) and
/// whom slurmstepd's signals reach (`ProctrackType`), and whether Slurm lays a block
/// distribution out in a network topology's order (`TopologyPlugin`, `topology.yaml`).
/// Parsing is pure; finding the file goes through a FileReader.

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/hostfile.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// The value of parameter `key` in slurm.conf text, as Slurm reads it: `Key=Value` words
/// separated by blanks, keys in any case, `#` starts a comment, a value may be in double quotes,
/// the last occurrence wins. Include files are not followed.
/// Input: "AuthType=auth/munge\nauthinfo=socket=/run/m.sock # site\n", "AuthInfo".
/// Output: "socket=/run/m.sock".
[[nodiscard]] std::optional<std::string> slurm_conf_value(std::string_view text,
                                                          std::string_view key);

/// The `socket=` option of an AuthInfo value (comma-separated options, keys in any case).
/// Input: "ttl=60,socket=/run/munge/alt.socket". Output: "/run/munge/alt.socket".
[[nodiscard]] std::optional<std::string> auth_info_socket(std::string_view auth_info);

/// Where munged listens, and where that path came from (for messages).
struct MungeSocket {
    std::string path;   ///< empty: libmunge's compiled-in default
    std::string origin; ///< `TFSLURM_MUNGE_SOCKET`, `AuthInfo in <file>` or `libmunge's default`
};

/// The slurm.conf files tfslurm looks at, in order: the file `SLURM_CONF` names, then
/// `/etc/slurm/slurm.conf`, then `/run/slurm/conf/slurm.conf` (the configless cache of slurmd).
[[nodiscard]] std::vector<std::string> slurm_conf_candidates(const Environment& env);

/// Where munged listens: `TFSLURM_MUNGE_SOCKET` when set and not empty (an override), else the
/// `socket=` of `AuthInfo` in the first candidate slurm.conf that can be read, else libmunge's
/// default. Files that cannot be read are skipped.
/// Input: env {SLURM_CONF=/c}, /c = "AuthInfo=socket=/s". Output: {"/s", "AuthInfo in /c"}.
[[nodiscard]] MungeSocket find_munge_socket(const Environment& env,
                                            const FileReader& read = read_text_file);

/// Whether slurmstepd's signals to a step (`scancel`, `scancel -s`, a time limit) reach every
/// process of it, those in process groups of their own included: true unless `ProctrackType`
/// in the first slurm.conf that can be read is `proctrack/pgid` (which signals the task's
/// process group only). No file or no key: Slurm's default, `proctrack/cgroup`: true.
/// Input: /etc/slurm/slurm.conf = "ProctrackType=proctrack/linuxproc". Output: true.
[[nodiscard]] bool step_signals_reach_every_process(const Environment& env,
                                                    const FileReader& read = read_text_file);

/// The network topology that a partition's jobs are placed by: the `Topology=` of the
/// partition's line in slurm.conf (or of `PartitionName=DEFAULT`), else the topology of
/// `topology.yaml` marked `cluster_default: true`, else `TopologyPlugin`. Returns a description
/// such as `topology "tree" (tree) of partition topo in /etc/slurm/topology.yaml` or
/// `TopologyPlugin=topology/block in /etc/slurm/slurm.conf`; nullopt for a flat topology (the
/// default: nodes in name order), or when `SelectTypeParameters` has `CR_NO_DIST_TOPO_BLOCK`.
/// `yaml` is the text of topology.yaml beside slurm.conf (nullopt: there is none; Slurm then
/// reads `TopologyPlugin`). Pure: the names of files are only for the description.
/// Input: conf "PartitionName=topo Nodes=ALL Topology=t1", yaml "- topology: t1\n  tree:\n...",
/// partition "topo". Output: `topology "t1" (tree) of partition topo in <yaml file>`.
[[nodiscard]] std::optional<std::string> partition_topology(std::string_view conf,
                                                            std::string_view conf_file,
                                                            const std::optional<std::string>& yaml,
                                                            std::string_view yaml_file,
                                                            std::string_view partition);

/// Whether Slurm may have laid this task's step out in a network topology's order rather than
/// in the nodelist's: from Slurm 25.11 on (a task of such a release has `SLURM_JOB_SLUID`; Slurm
/// 26.05 verified) a block distribution follows the order of the topology of the job's
/// partition (`SLURM_JOB_PARTITION`, partition_topology() of the first slurm.conf that can be
/// read and the `topology.yaml` beside it), and no task's environment says which order that
/// was. nullopt when the release is older, the topology flat or no slurm.conf can be read.
/// Input: env {SLURM_JOB_SLUID=..., SLURM_CONF=/c/slurm.conf}, /c/slurm.conf =
/// "TopologyPlugin=topology/tree". Output: `TopologyPlugin=topology/tree in /c/slurm.conf`.
[[nodiscard]] std::optional<std::string> topology_ordering(const Environment& env,
                                                           const FileReader& read = read_text_file);

} // namespace tfslurm
