// SPDX-License-Identifier: MIT
// The launcher machine's actions as text (src/launcher_describe.cpp).
#include "launcher_table.hpp"
#include "log_capture.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/exit_status.hpp>
#include <tfslurm/launcher.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/protocol.hpp>
#include <tfslurm/run.hpp>

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
