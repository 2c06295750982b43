// SPDX-License-Identifier: MIT
// The one place tfslurm reads the node's interfaces (read_interfaces()); everything else here
// is pure and table-tested (tests/unit/resolve/test_interfaces.cpp).
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/interfaces.hpp>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <utility>

namespace tfslurm {
namespace {

struct RawAddress {
    IpFamily family = IpFamily::v4;
    std::array<std::uint8_t, 16> bytes{};
};

std::optional<RawAddress> parse_address(std::string_view text) {
    const std::string copy{text};
    RawAddress raw;
    if (::inet_pton(AF_INET, copy.c_str(), raw.bytes.data()) == 1) {
        raw.family = IpFamily::v4;
        return raw;
    }
    if (::inet_pton(AF_INET6, copy.c_str(), raw.bytes.data()) == 1) {
        raw.family = IpFamily::v6;
        return raw;
    }
    return std::nullopt;
}

bool is_link_local(const InterfaceAddress& entry) {
    const auto raw = parse_address(entry.address);
    return raw && raw->family == IpFamily::v6 && raw->bytes[0] == 0xfe &&
           (raw->bytes[1] & 0xc0U) == 0x80;
}

/// The address of `interface` (every interface when empty) that the selection may use: IPv4
/// first, then global IPv6, inside `network` when there is one.
std::optional<SelectedAddress> usable_on(const std::vector<InterfaceAddress>& available,
                                         std::string_view interface,
                                         const std::optional<IpNetwork>& network) {
    for (const auto family : {IpFamily::v4, IpFamily::v6}) {
        for (const auto& entry : available) {
            if ((interface.empty() || entry.interface == interface) && entry.family == family &&
                !is_link_local(entry) && (!network || network->contains(entry.address))) {
                return SelectedAddress{entry.interface, entry.address};
            }
        }
    }
    return std::nullopt;
}

/// `lo 127.0.0.1 ::1, eth0 192.168.1.5`: every interface once, in the order listed.
std::string describe_interfaces(const std::vector<InterfaceAddress>& available) {
    std::vector<std::string> order;
    std::vector<std::string> text;
    for (const auto& entry : available) {
        const auto found = std::find(order.begin(), order.end(), entry.interface);
        if (found == order.end()) {
            order.push_back(entry.interface);
            text.push_back(entry.interface + " " + entry.address);
        } else {
            text[static_cast<std::size_t>(found - order.begin())] += " " + entry.address;
        }
    }
    return text.empty() ? std::string{"none with an address"} : detail::join(text, ", ");
}

} // namespace

bool IpNetwork::contains(std::string_view address) const {
    const auto raw = parse_address(address);
    if (!raw || raw->family != family) {
        return false;
    }
    const auto full = prefix / 8;
    if (!std::equal(bytes.begin(), bytes.begin() + full, raw->bytes.begin())) {
        return false;
    }
    if (const auto rest = prefix % 8; rest != 0) {
        const auto mask = static_cast<std::uint8_t>(0xffU << (8 - rest));
        return (bytes[full] & mask) == (raw->bytes[full] & mask);
    }
    return true;
}

IpNetwork parse_network(std::string_view text, std::string_view subject) {
    const auto fail = [&] {
        return errors::invalid_argument(
            subject, "expected an IPv4 or IPv6 network such as 10.1.0.0/16 or fd00::/64", text);
    };
    const auto slash = text.find('/');
    if (slash == std::string_view::npos) {
        throw fail();
    }
    const auto raw = parse_address(text.substr(0, slash));
    const auto prefix = detail::parse_decimal(text.substr(slash + 1));
    if (!raw || !prefix || *prefix > (raw->family == IpFamily::v4 ? 32U : 128U)) {
        throw fail();
    }
    IpNetwork network;
    network.family = raw->family;
    network.prefix = static_cast<std::uint32_t>(*prefix);
    network.text = std::string{text};
    // Clear the host bits, so that 10.1.2.3/16 compares as 10.1.0.0/16.
    for (std::size_t i = 0; i < network.bytes.size(); ++i) {
        const auto bit = i * 8;
        if (bit + 8 <= network.prefix) {
            network.bytes[i] = raw->bytes[i];
        } else if (bit < network.prefix) {
            network.bytes[i] =
                static_cast<std::uint8_t>(raw->bytes[i] & (0xffU << (8 - (network.prefix - bit))));
        }
    }
    return network;
}

SelectedAddress select_address(const std::vector<InterfaceAddress>& available,
                               const AddressSelection& selection,
                               std::string_view node) {
    if (selection.interfaces.empty()) {
        if (auto found = usable_on(available, {}, selection.network)) {
            return *found;
        }
    }
    for (const auto& interface : selection.interfaces) {
        if (auto found = usable_on(available, interface, selection.network)) {
            return *found;
        }
    }
    const auto asked = detail::join(selection.interfaces, " or ");
    std::string where;
    if (selection.network) {
        where = "in " + selection.network->text + (asked.empty() ? "" : " on " + asked);
    } else {
        where = "on " + asked;
    }
    const bool by_interface = !selection.interfaces.empty();
    throw errors::invalid_setting(by_interface ? "iface" : "network",
                                  fmt::format("node {} has no address {} (its interfaces: {})",
                                              node,
                                              where,
                                              describe_interfaces(available)),
                                  by_interface ? detail::join(selection.interfaces, ",")
                                               : selection.network->text);
}

std::vector<InterfaceAddress> read_interfaces() {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) {
        throw std::system_error(errno, std::generic_category(), "getifaddrs");
    }
    std::vector<InterfaceAddress> found;
    for (const auto* entry = list; entry != nullptr; entry = entry->ifa_next) {
        if (entry->ifa_addr == nullptr || (entry->ifa_flags & IFF_UP) == 0) {
            continue;
        }
        std::array<char, INET6_ADDRSTRLEN> text{};
        const auto family = entry->ifa_addr->sa_family;
        // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): getifaddrs' sockaddr
        if (family == AF_INET) {
            const auto* in = reinterpret_cast<const sockaddr_in*>(entry->ifa_addr);
            ::inet_ntop(AF_INET, &in->sin_addr, text.data(), text.size());
            found.push_back({entry->ifa_name, text.data(), IpFamily::v4});
        } else if (family == AF_INET6) {
            const auto* in6 = reinterpret_cast<const sockaddr_in6*>(entry->ifa_addr);
            ::inet_ntop(AF_INET6, &in6->sin6_addr, text.data(), text.size());
            found.push_back({entry->ifa_name, text.data(), IpFamily::v6});
        }
        // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
    }
    ::freeifaddrs(list);
    return found;
}

bool is_ip_address(std::string_view text) {
    return text.size() < INET6_ADDRSTRLEN && parse_address(text).has_value();
}

std::string host_port(std::string_view address, std::uint16_t port) {
    if (address.find(':') != std::string_view::npos) {
        return fmt::format("[{}]:{}", address, port);
    }
    return fmt::format("{}:{}", address, port);
}

} // namespace tfslurm
