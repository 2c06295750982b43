// SPDX-License-Identifier: MIT
#include "detail/text.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>
#include <tfslurm/plan_settings.hpp>

#include <fmt/format.h>

namespace tfslurm {
namespace {

bool parse_bool(std::string_view value, std::string_view subject) {
    if (value.empty() || value == "1" || value == "yes" || value == "true" || value == "on") {
        return true;
    }
    if (value == "0" || value == "no" || value == "false" || value == "off") {
        return false;
    }
    throw errors::invalid_argument(subject, "expected yes/no, true/false, on/off or 1/0", value);
}

template <typename T>
T parse_number(std::string_view value, std::string_view subject, T low, T high) {
    const auto parsed = detail::parse_decimal(value);
    if (!parsed || *parsed < low || *parsed > high) {
        throw errors::invalid_argument(
            subject, fmt::format("expected an integer from {} to {}", low, high), value);
    }
    return static_cast<T>(*parsed);
}

void validate_pattern(std::string_view pattern, std::string_view subject) {
    std::size_t pos = 0;
    while ((pos = pattern.find_first_of("{}", pos)) != std::string_view::npos) {
        if (pattern.compare(pos, 6, "{host}") != 0) {
            throw errors::invalid_argument(
                subject,
                fmt::format("unknown placeholder at offset {} (only {{host}} is known)", pos),
                pattern);
        }
        pos += 6;
    }
}

} // namespace

void apply_plan_setting(PlanOptions& options,
                        std::string_view key,
                        std::string_view value,
                        std::string_view subject) {
    if (key == "ps") {
        options.counts.ps = parse_number<std::uint32_t>(value, subject, 0, k_max_expanded_hosts);
    } else if (key == "chief") {
        options.counts.chief = parse_bool(value, subject);
    } else if (key == "evaluator") {
        options.counts.evaluator = parse_bool(value, subject);
    } else if (key == "roles") {
        options.role_list = value.empty() ? std::vector<Role>{} : parse_role_list(value, subject);
    } else if (key == "ps_placement") {
        if (value == "first") {
            options.ps_placement = PsPlacement::first;
        } else if (value == "spread") {
            options.ps_placement = PsPlacement::spread;
        } else {
            throw errors::invalid_argument(subject, "expected first or spread", value);
        }
    } else if (key == "layout") {
        if (value == "native") {
            options.layout = Layout::native;
        } else if (value == "tf-compat" || value == "tf_compat") {
            options.layout = Layout::tf_compat;
        } else {
            throw errors::invalid_argument(subject, "expected native or tf-compat", value);
        }
    } else if (key == "port_base") {
        options.port_base = parse_number<std::uint16_t>(value, subject, 1, 65535);
    } else if (key == "address") {
        if (value == "name") {
            options.address = AddressMode::name;
        } else if (value == "ip") {
            options.address = AddressMode::ip;
        } else {
            throw errors::invalid_argument(subject, "expected name or ip", value);
        }
    } else if (key == "host_pattern") {
        validate_pattern(value, subject);
        options.host_pattern = std::string{value};
    } else if (key == "gpus_per_task") {
        options.gpus_per_task = parse_number<std::uint32_t>(value, subject, 0, 1U << 16);
    } else if (key == "gpus_per_node") {
        options.tf_gpus_per_node = parse_number<std::uint32_t>(value, subject, 0, 1U << 16);
    } else if (key == "rpc_layer") {
        if (value.find_first_of("\"\\") != std::string_view::npos) {
            throw errors::invalid_argument(subject, "expected a protocol name such as grpc", value);
        }
        options.rpc_layer = std::string{value};
    } else {
        throw errors::invalid_argument(
            subject,
            "unknown setting (known: ps, chief, evaluator, roles, ps_placement, layout, "
            "port_base, address, host_pattern, gpus_per_task, gpus_per_node, rpc_layer)",
            key);
    }
}

} // namespace tfslurm
