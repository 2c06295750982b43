// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/slurm_config.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <tuple>

using namespace tfslurm;

namespace {

/// A FileReader of the files in `files` (path to text) as they are when it reads, so that a
/// test can add files after making it: any other path cannot be opened.
FileReader live_reader_of(const std::map<std::string, std::string>& files) {
    return [&files](const std::string& path, std::string_view subject) {
        const auto found = files.find(path);
        if (found == files.end()) {
            throw errors::make(Errc::io, subject, "cannot open " + quote(path));
        }
        return found->second;
    };
}

} // namespace

TEST_CASE("slurm_config: parameters are read as Slurm reads slurm.conf", "[slurm_config]") {
    using Row = std::tuple<std::string, std::string, std::optional<std::string>>;
    const auto [text, key, expected] =
        GENERATE(table<std::string, std::string, std::optional<std::string>>({
            Row{"AuthInfo=socket=/run/m.sock\n", "AuthInfo", "socket=/run/m.sock"},
            Row{"authinfo=socket=/a\n", "AuthInfo", "socket=/a"},
            Row{"AUTHINFO=socket=/a\n", "authinfo", "socket=/a"},
            Row{"AuthType=auth/munge AuthInfo=ttl=60,socket=/b\n", "AuthInfo", "ttl=60,socket=/b"},
            Row{"AuthInfo=socket=/a\nAuthInfo=socket=/b\n", "AuthInfo", "socket=/b"},
            Row{"# AuthInfo=socket=/a\n", "AuthInfo", std::nullopt},
            Row{"AuthInfo=socket=/a # a comment\n", "AuthInfo", "socket=/a"},
            Row{"AuthInfo=\"socket=/with space\"\n", "AuthInfo", "socket=/with space"},
            Row{"AuthInfo=socket=/has\\#hash\n", "AuthInfo", "socket=/has#hash"},
            Row{"  \tAuthInfo=socket=/a\r\n", "AuthInfo", "socket=/a"},
            Row{"AuthInfoX=socket=/a\n", "AuthInfo", std::nullopt},
            Row{"", "AuthInfo", std::nullopt},
            Row{"AuthInfo=socket=/last", "AuthInfo", "socket=/last"},
            // Quotes and backslashes come out of words: such lines are parsed even when they
            // do not hold the key as it is spelled.
            Row{"\"Auth\"Info=socket=/q\n", "AuthInfo", "socket=/q"},
            Row{"AuthInfo=socket=/a\nNodeName=n1 Weight=1\nPartitionName=p Nodes=ALL\n",
                "AuthInfo",
                "socket=/a"},
            Row{"NodeName=n1 Feature=authinfo\n", "AuthInfo", std::nullopt},
            Row{"Auth", "AuthInfo", std::nullopt},
        }));
    CAPTURE(text, key);
    CHECK(slurm_conf_value(text, key) == expected);
}

TEST_CASE("slurm_config: the socket option of AuthInfo", "[slurm_config]") {
    CHECK(auth_info_socket("socket=/run/munge/alt.socket") == "/run/munge/alt.socket");
    CHECK(auth_info_socket("ttl=60,socket=/s,foo=bar") == "/s");
    CHECK(auth_info_socket("Socket=/s") == "/s");
    CHECK(auth_info_socket("ttl=60") == std::nullopt);
    CHECK(auth_info_socket("socket=") == std::nullopt);
    CHECK(auth_info_socket("") == std::nullopt);
}

TEST_CASE("slurm_config: where munged listens, and where that came from", "[slurm_config]") {
    std::map<std::string, std::string> files;
    const FileReader read = live_reader_of(files);
    SECTION("the variable overrides slurm.conf") {
        files["/etc/slurm/slurm.conf"] = "AuthInfo=socket=/conf\n";
        const auto socket = find_munge_socket(Environment{{"TFSLURM_MUNGE_SOCKET", "/env"}}, read);
        CHECK(socket.path == "/env");
        CHECK(socket.origin == "TFSLURM_MUNGE_SOCKET");
    }
    SECTION("SLURM_CONF names the file") {
        files["/site/slurm.conf"] = "AuthInfo=socket=/site.sock\n";
        files["/etc/slurm/slurm.conf"] = "AuthInfo=socket=/etc.sock\n";
        const auto socket =
            find_munge_socket(Environment{{"SLURM_CONF", "/site/slurm.conf"}}, read);
        CHECK(socket.path == "/site.sock");
        CHECK(socket.origin == "AuthInfo in /site/slurm.conf");
    }
    SECTION("then /etc/slurm/slurm.conf, then the configless cache") {
        files["/run/slurm/conf/slurm.conf"] = "AuthInfo=socket=/cache.sock\n";
        auto socket = find_munge_socket(Environment{{"SLURM_CONF", "/missing"}}, read);
        CHECK(socket.path == "/cache.sock");
        CHECK(socket.origin == "AuthInfo in /run/slurm/conf/slurm.conf");
        files["/etc/slurm/slurm.conf"] = "AuthInfo=socket=/etc.sock\n";
        socket = find_munge_socket(Environment{}, read);
        CHECK(socket.path == "/etc.sock");
    }
    SECTION("the first readable slurm.conf decides, even without AuthInfo") {
        files["/etc/slurm/slurm.conf"] = "ClusterName=c\n";
        files["/run/slurm/conf/slurm.conf"] = "AuthInfo=socket=/cache.sock\n";
        const auto socket = find_munge_socket(Environment{}, read);
        CHECK(socket.path.empty());
        CHECK(socket.origin == "libmunge's default");
    }
    SECTION("an empty variable is not an override") {
        const auto socket = find_munge_socket(Environment{{"TFSLURM_MUNGE_SOCKET", ""}}, read);
        CHECK(socket.path.empty());
        CHECK(socket.origin == "libmunge's default");
    }
}

TEST_CASE("slurm_config: whether slurmstepd's signals reach every process of a step",
          "[slurm_config]") {
    std::map<std::string, std::string> files;
    const FileReader read = live_reader_of(files);
    CHECK(step_signals_reach_every_process(Environment{}, read)); // Slurm's default: cgroup
    files["/etc/slurm/slurm.conf"] = "ProctrackType=proctrack/linuxproc\n";
    CHECK(step_signals_reach_every_process(Environment{}, read));
    files["/etc/slurm/slurm.conf"] = "ProctrackType=proctrack/cgroup\n";
    CHECK(step_signals_reach_every_process(Environment{}, read));
    files["/etc/slurm/slurm.conf"] = "proctracktype=proctrack/pgid # the task's group only\n";
    CHECK_FALSE(step_signals_reach_every_process(Environment{}, read));
    // The first readable file decides.
    files["/site/slurm.conf"] = "ClusterName=c\n";
    CHECK(step_signals_reach_every_process(Environment{{"SLURM_CONF", "/site/slurm.conf"}}, read));
}

TEST_CASE("slurm_config: the topology a partition's block steps follow", "[slurm_config]") {
    const std::string yaml = "# the test cluster's, Slurm 26.05\n"
                             "- topology: flat\n"
                             "  cluster_default: true\n"
                             "  flat: true\n"
                             "- topology: tree\n"
                             "  tree:\n"
                             "    switches:\n"
                             "      - switch: top\n"
                             "        children: s1,s2\n"
                             "      - switch: s1\n"
                             "        nodes: n3\n"
                             "      - switch: s2\n"
                             "        nodes: n[1-2]\n";
    const std::string conf = "PartitionName=debug Nodes=ALL Default=YES\n"
                             "PartitionName=topo Nodes=ALL State=UP Topology=tree # own tree\n";
    // topology.yaml: the partition's own topology, else the cluster's default.
    CHECK(partition_topology(conf, "/e/slurm.conf", yaml, "/e/topology.yaml", "topo") ==
          "topology \"tree\" (tree) of partition topo in /e/topology.yaml");
    CHECK(partition_topology(conf, "/e/slurm.conf", yaml, "/e/topology.yaml", "debug") ==
          std::nullopt);
    CHECK(partition_topology(conf, "/e/slurm.conf", yaml, "/e/topology.yaml", "") == std::nullopt);
    const std::string block_default = "- topology: b\n  cluster_default: true\n  block:\n"
                                      "    block_sizes: [2]\n    blocks:\n"
                                      "      - block: b1\n        nodes: n[1-2]\n";
    CHECK(partition_topology(conf, "/e/slurm.conf", block_default, "/e/topology.yaml", "debug") ==
          "topology \"b\" (block), the cluster's default, in /e/topology.yaml");
    // A DEFAULT line gives the partitions without a Topology= of their own its topology.
    CHECK(partition_topology("PartitionName=DEFAULT Topology=tree\nPartitionName=p Nodes=ALL\n",
                             "/e/slurm.conf",
                             yaml,
                             "/e/topology.yaml",
                             "p") == "topology \"tree\" (tree) of partition p in /e/topology.yaml");
    // Without topology.yaml: TopologyPlugin; flat (or the older names of flat) keeps name order.
    CHECK(partition_topology(
              "TopologyPlugin=topology/tree\n", "/e/slurm.conf", std::nullopt, "", "debug") ==
          "TopologyPlugin=topology/tree in /e/slurm.conf");
    for (const auto* flat : {"topology/flat", "topology/default", "topology/none"}) {
        CHECK(partition_topology(std::string{"TopologyPlugin="} + flat,
                                 "/e/slurm.conf",
                                 std::nullopt,
                                 "",
                                 "debug") == std::nullopt);
    }
    CHECK(partition_topology("ClusterName=c\n", "/e/slurm.conf", std::nullopt, "", "x") ==
          std::nullopt);
    // The site turned topology-ordered steps off.
    CHECK(partition_topology("TopologyPlugin=topology/tree\n"
                             "SelectTypeParameters=CR_Core,cr_no_dist_topo_block\n",
                             "/e/slurm.conf",
                             std::nullopt,
                             "",
                             "debug") == std::nullopt);
}

TEST_CASE("slurm_config: topology order only from Slurm 25.11 on (SLURM_JOB_SLUID)",
          "[slurm_config]") {
    std::map<std::string, std::string> files;
    const FileReader read = live_reader_of(files);
    files["/c/slurm.conf"] = "TopologyPlugin=topology/block\n";
    Environment env{{"SLURM_CONF", "/c/slurm.conf"}, {"SLURM_JOB_PARTITION", "debug"}};
    CHECK(topology_ordering(env, read) == std::nullopt); // 22.05, 24.11: name order
    env.set("SLURM_JOB_SLUID", "s8QNM8C0MHPR00");
    CHECK(topology_ordering(env, read) == "TopologyPlugin=topology/block in /c/slurm.conf");
    // topology.yaml beside slurm.conf wins over TopologyPlugin.
    files["/c/topology.yaml"] = "- topology: f\n  cluster_default: true\n  flat: true\n";
    CHECK(topology_ordering(env, read) == std::nullopt);
    // No slurm.conf to read: nothing known, nothing refused.
    files.clear();
    CHECK(topology_ordering(env, read) == std::nullopt);
}
