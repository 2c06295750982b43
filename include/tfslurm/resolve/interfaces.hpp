// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The node's network interfaces: the one place tfslurm reads them (read_interfaces(), with
/// getifaddrs), and the pure choice of the address peers use to reach this node when the user
/// asked for an interface (`iface`) or a network (`network`) instead of the node name.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// IPv4 or IPv6.
enum class IpFamily { v4, v6 };

/// One address of one interface, as getifaddrs lists it (an interface with two addresses is
/// two entries).
struct InterfaceAddress {
    std::string interface; ///< `ib0`
    std::string address;   ///< `10.1.0.1`, `fd00::1` (no brackets, no scope)
    IpFamily family = IpFamily::v4;

    friend bool operator==(const InterfaceAddress& a, const InterfaceAddress& b) {
        return a.interface == b.interface && a.address == b.address && a.family == b.family;
    }
};

/// A network in CIDR notation.
struct IpNetwork {
    IpFamily family = IpFamily::v4;
    std::array<std::uint8_t, 16> bytes{}; ///< the address, 4 or 16 bytes used
    std::uint32_t prefix = 0;             ///< 0..32 or 0..128
    std::string text;                     ///< as given, for messages

    /// Whether `address` (text, either family) lies in this network.
    /// Input: 10.1.0.0/16, `10.1.2.3`. Output: true. Input: 10.1.0.0/16, `fd00::1`. Output: false.
    [[nodiscard]] bool contains(std::string_view address) const;
};

/// Parse `10.1.0.0/16` or `fd00::/8` (host bits may be set: `10.1.2.3/16` is 10.1.0.0/16).
/// Input: `10.1.0.0/16`. Output: {v4, 10.1.0.0, 16}.
/// \throws Error (Errc::invalid_argument) naming `subject`, e.g.
///         `network: expected an IPv4 or IPv6 network such as 10.1.0.0/16: "10.1/x"`.
[[nodiscard]] IpNetwork parse_network(std::string_view text, std::string_view subject);

/// What the user asked for; both empty: the node name (the default), no interface read.
struct AddressSelection {
    std::vector<std::string> interfaces; ///< tried in order: the first one present wins
    std::optional<IpNetwork> network;    ///< only addresses in it count

    [[nodiscard]] bool active() const noexcept { return !interfaces.empty() || network; }
};

/// The address this node offers its peers, and the interface that carries it.
struct SelectedAddress {
    std::string interface;
    std::string address;

    friend bool operator==(const SelectedAddress& a, const SelectedAddress& b) {
        return a.interface == b.interface && a.address == b.address;
    }
};

/// Choose this node's address among `available` (read_interfaces() on node `node`). With
/// interfaces, the first listed interface that has a usable address wins; with a network
/// (alone, or on top of interfaces), only addresses inside it are usable. On an interface an
/// IPv4 address is preferred, then a global IPv6 one (link-local fe80::/10 addresses need a
/// scope that TF and torch cannot carry: never chosen).
/// Input: {lo 127.0.0.1, eth0 192.168.1.5, ib0 10.1.0.5}, interfaces {ib1, ib0}, node n1.
/// Output: {ib0, 10.1.0.5}.
/// \throws Error (Errc::invalid_argument) about setting `iface` (or `network` without
///         interfaces) when nothing matches, naming the node, what was asked and every
///         interface of the node with its addresses, e.g. `iface: node n1 has no address on
///         ib0 (its interfaces: lo 127.0.0.1 ::1, eth0 192.168.1.5): "ib0"`.
[[nodiscard]] SelectedAddress select_address(const std::vector<InterfaceAddress>& available,
                                             const AddressSelection& selection,
                                             std::string_view node);

/// Every IPv4 and IPv6 address of this node's interfaces that are up, in getifaddrs order.
/// Touches the OS. \throws std::system_error when getifaddrs fails.
[[nodiscard]] std::vector<InterfaceAddress> read_interfaces();

/// Whether `text` is an IPv4 or IPv6 literal (inet_pton's syntax, no brackets, no scope).
/// Input: `fd00::1`. Output: true. Input: `n1`. Output: false.
[[nodiscard]] bool is_ip_address(std::string_view text);

/// `address:port`, with an IPv6 address in brackets as TF and torch want it.
/// Input: `fd00::1`, 2222. Output: `[fd00::1]:2222`. Input: `n1`, 2222. Output: `n1:2222`.
[[nodiscard]] std::string host_port(std::string_view address, std::uint16_t port);

} // namespace tfslurm
