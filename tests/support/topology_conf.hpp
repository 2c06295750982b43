// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The configuration of a Slurm 26.05 partition with a network topology, as the test cluster
/// writes it: partition "topo" with a tree whose order is not the nodes' name order (n3 under
/// one switch, n[1-2] under the other). The steps of tests/data/slurm-env/*topo*26.05.txt ran
/// there.

#include "temp_dir.hpp"

#include <map>
#include <string>

namespace tfslurm::test {

/// The partitions of slurm.conf: "debug", and "topo" with the tree.
inline const std::string k_topology_slurm_conf =
    "PartitionName=debug Nodes=ALL Default=YES\n"
    "PartitionName=topo Nodes=ALL MaxTime=INFINITE State=UP Topology=tree\n";

/// topology.yaml: flat by default, and the tree "tree" (n3 | n[1-2]).
inline const std::string k_topology_yaml =
    "- topology: flat\n  cluster_default: true\n  flat: true\n"
    "- topology: tree\n  tree:\n    switches:\n"
    "      - switch: top\n        children: s1,s2\n"
    "      - switch: s1\n        nodes: n3\n"
    "      - switch: s2\n        nodes: n[1-2]\n";

/// Write slurm.conf and topology.yaml into `dir`; returns the path of slurm.conf (for
/// SLURM_CONF).
inline std::string write_topology_conf(const TempDir& dir) {
    const std::string conf = dir.write("slurm.conf", k_topology_slurm_conf);
    static_cast<void>(dir.write("topology.yaml", k_topology_yaml));
    return conf;
}

/// Both files where the test cluster keeps them (/run/tfslurm-tc/etc), path to text: for a
/// FileReader of the unit tests.
inline std::map<std::string, std::string> topology_conf_files() {
    return {{"/run/tfslurm-tc/etc/slurm.conf", k_topology_slurm_conf},
            {"/run/tfslurm-tc/etc/topology.yaml", k_topology_yaml}};
}

} // namespace tfslurm::test
