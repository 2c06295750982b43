// SPDX-License-Identifier: MIT
// Unit tests of --layout tf-compat (include/tfslurm/resolve/tf_compat.hpp): TensorFlow's
// SlurmClusterResolver reproduced.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/tf_config.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using tfslurm::Environment;
using tfslurm::Errc;
using tfslurm::Role;
using tfslurm::test::gpus_of;
using tfslurm::test::require_error;
using tfslurm::test::tf_case;
using tfslurm::test::with;

TEST_CASE("tf_compat: reproduces TensorFlow's SlurmClusterResolver (V4, V14)", "[tf_compat]") {
    const std::string hosts = "t02n13,t02n41,t02n43";
    SECTION("TFR1") {
        const auto built = tf_case(
            hosts, {1, 1, 1}, 0, with({{"layout", "tf-compat"}}), std::vector<std::string>{"0"});
        CHECK(
            tfslurm::tf_config_json(built.plan, 0) ==
            R"({"cluster":{"worker":["t02n13:8888","t02n41:8888","t02n43:8888"]},"task":{"type":"worker","index":0}})");
        CHECK(gpus_of(built.plan.ranks[0]) == "0");
    }
    SECTION("TFR2/TFR4") {
        const auto built = tf_case(hosts,
                                   {1, 1, 1},
                                   0,
                                   with({{"layout", "tf-compat"},
                                         {"ps", "1"},
                                         {"gpus_per_node", "1"},
                                         {"gpus_per_task", "1"}}));
        CHECK(
            tfslurm::tf_config_json(built.plan, 0) ==
            R"({"cluster":{"ps":["t02n13:8888"],"worker":["t02n41:8888","t02n43:8888"]},"task":{"type":"ps","index":0}})");
    }
    SECTION("TFR5") {
        const auto built = tf_case(hosts,
                                   {2, 2, 1},
                                   1,
                                   with({{"layout", "tf-compat"},
                                         {"ps", "1"},
                                         {"gpus_per_node", "2"},
                                         {"gpus_per_task", "1"}}),
                                   std::vector<std::string>{});
        CHECK(
            tfslurm::tf_config_json(built.plan, 1) ==
            R"({"cluster":{"ps":["t02n13:8888"],"worker":["t02n13:8889","t02n41:8888","t02n41:8889","t02n43:8888"]},"task":{"type":"worker","index":0}})");
        CHECK(gpus_of(built.plan.ranks[1]) == "1");
    }
    SECTION("TFR6") {
        const auto built = tf_case(hosts,
                                   {2, 2, 1},
                                   1,
                                   with({{"layout", "tf-compat"},
                                         {"ps", "1"},
                                         {"gpus_per_node", "4"},
                                         {"gpus_per_task", "2"}}));
        CHECK(gpus_of(built.plan.ranks[1]) == "2,3");
    }
    SECTION("TFX1: hosts sorted by name, unlike Slurm") {
        const auto built = tf_case(
            "n[9-10]", {1, 1}, 0, with({{"layout", "tf-compat"}}), std::vector<std::string>{"0"});
        CHECK(
            tfslurm::tf_config_json(built.plan, 0) ==
            R"({"cluster":{"worker":["n10:8888","n9:8888"]},"task":{"type":"worker","index":0}})");
        // tfslurm's own layout puts rank 0 where Slurm runs it.
        const auto native = tf_case("n[9-10]", {1, 1}, 0, with({{"port_base", "8888"}}));
        CHECK(
            tfslurm::tf_config_json(native.plan, 0) ==
            R"({"cluster":{"worker":["n9:8888","n10:8888"]},"task":{"type":"worker","index":0}})");
    }
    SECTION("TFX2: jobs in alphabetical order") {
        const auto built = tf_case("n1",
                                   {4},
                                   3,
                                   with({{"layout", "tf-compat"}, {"chief", "1"}, {"ps", "1"}}),
                                   std::vector<std::string>{"0", "1", "2", "3"});
        CHECK(
            tfslurm::tf_config_json(built.plan, 3) ==
            R"({"cluster":{"chief":["n1:8888"],"ps":["n1:8889"],"worker":["n1:8890","n1:8891"]},"task":{"type":"worker","index":1}})");
        CHECK(gpus_of(built.plan.ranks[3]) == "3");
    }
    SECTION("TFX3/TFX4: zero GPUs per task do not crash") {
        const auto none =
            tf_case("n1", {2}, 0, with({{"layout", "tf-compat"}, {"gpus_per_node", "0"}}));
        CHECK(none.plan.ranks[0].gpus.empty());
        const auto one =
            tf_case("n1", {2}, 1, with({{"layout", "tf-compat"}}), std::vector<std::string>{"0"});
        CHECK(one.plan.ranks[1].gpus.empty());
    }
    SECTION("TFX7 and TFX8: TensorFlow's errors") {
        require_error(
            [] {
                (void)tf_case("n1",
                              {4},
                              0,
                              with({{"layout", "tf-compat"}, {"gpus_per_task", "1"}}),
                              std::vector<std::string>{"0", "1"});
            },
            Errc::invalid_argument,
            "layout=tf-compat: Requested more GPUs per node than available.: \"1 GPUs per task x "
            "4 tasks per node, 2 GPUs\"");
        require_error(
            [] {
                (void)tf_case("n1,n1",
                              {1, 1},
                              0,
                              with({{"layout", "tf-compat"}}),
                              std::vector<std::string>{"0"});
            },
            Errc::invalid_argument,
            "layout=tf-compat: Requested 2 tasks but only 1 were assigned.: \"n1,n1\"");
    }
}
