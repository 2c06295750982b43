// SPDX-License-Identifier: MIT
// Which peers each launcher's reachability probe tries (include/tfslurm/run/launcher.hpp): pure, so
// that the sampling beyond k_probe_all_up_to ranks is unit-tested.
#include <tfslurm/run/launcher.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace tfslurm {

std::string endpoint(const ProbeTarget& target) {
    return target.address.find(':') != std::string::npos
               ? fmt::format("[{}]:{}", target.address, target.port)
               : fmt::format("{}:{}", target.address, target.port);
}

std::vector<ProbeTarget> probe_targets(std::uint32_t self,
                                       const std::vector<Member>& ranks,
                                       const std::vector<std::uint16_t>& ports,
                                       const protocol::Cluster& cluster) {
    const std::size_t size = ranks.size();
    std::vector<bool> chosen(size, false);
    if (size <= k_probe_all_up_to) {
        std::fill(chosen.begin(), chosen.end(), true);
    } else {
        for (std::size_t rank = 0; rank < size; ++rank) {
            chosen[rank] = ranks[rank].role == Role::ps || ranks[rank].role == Role::chief;
        }
        const std::size_t stride = size / (k_probe_sample + 1);
        for (std::size_t i = 1; i <= k_probe_sample; ++i) {
            chosen[(self + i * stride) % size] = true;
        }
    }
    std::vector<ProbeTarget> targets;
    for (std::uint32_t rank = 0; rank < size; ++rank) {
        if (!chosen[rank] || rank == self) {
            continue;
        }
        const Member& member = ranks[rank];
        const auto address = cluster.addresses.find(member.host);
        const std::uint16_t moved = rank < cluster.ports.size() ? cluster.ports[rank] : 0;
        const std::uint16_t planned = rank < ports.size() ? ports[rank] : 0;
        targets.push_back({rank,
                           address != cluster.addresses.end() ? address->second : member.host,
                           moved != 0 ? moved : planned});
    }
    return targets;
}

} // namespace tfslurm
