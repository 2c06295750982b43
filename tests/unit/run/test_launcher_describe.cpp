// SPDX-License-Identifier: MIT
// The launcher machine's actions as text (src/run/launcher/launcher_describe.cpp).
#include "launcher_table.hpp"
#include "log_capture.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;
using namespace tfslurm::test;
using namespace std::chrono_literals;

TEST_CASE("launcher: actions are described in one line", "[launcher]") {
    CHECK(describe(launcher_action::Send{protocol::Interrupt{15}}, k_t0) ==
          R"(send {"signal":15,"type":"interrupt","v":7})");
    CHECK(describe(launcher_action::ArmTimer{LauncherTimer::grace, k_t0 + 10s}, k_t0) ==
          "arm grace 10000");
    CHECK(describe(launcher_action::CancelTimer{LauncherTimer::close}, k_t0) == "cancel close");
    CHECK(describe(launcher_action::SignalTrainer{9}, k_t0) == "signal 9");
}
