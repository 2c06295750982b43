// SPDX-License-Identifier: MIT
// The coordinator's defences against unauthenticated peers (connection_limits.hpp; the server is
// coordinator_server.cpp): HandshakePool bounds the connections still in their handshake, per peer
// and in total; LogBudget rate-limits the warnings they cause and owes a summary of the rest.
#include <tfslurm/run/connection_limits.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

HandshakePool::HandshakePool(std::size_t per_peer, std::size_t total)
    : m_per_peer(std::max<std::size_t>(per_peer, 1)), m_total(std::max<std::size_t>(total, 1)) {}

std::uint64_t HandshakePool::evict_from(const std::string& peer) {
    auto& queue = m_by_peer.at(peer);
    const std::uint64_t oldest = queue.front();
    queue.pop_front();
    if (queue.empty()) {
        m_by_peer.erase(peer);
    }
    m_peer_of.erase(oldest);
    --m_size;
    return oldest;
}

std::string HandshakePool::peer_key(const std::string& address) {
    const auto starts = [&address](std::string_view prefix) {
        return address.compare(0, prefix.size(), prefix) == 0;
    };
    if (address == "::1" || starts("127.") || starts("::ffff:127.")) {
        return "loopback";
    }
    return address;
}

std::vector<std::uint64_t> HandshakePool::admit(std::uint64_t id, const std::string& address) {
    const std::string peer = peer_key(address);
    std::vector<std::uint64_t> evicted;
    if (const auto found = m_by_peer.find(peer);
        found != m_by_peer.end() && found->second.size() >= m_per_peer) {
        evicted.push_back(evict_from(peer));
    } else if (m_size >= m_total) {
        const auto largest =
            std::max_element(m_by_peer.begin(), m_by_peer.end(), [](const auto& a, const auto& b) {
                return a.second.size() < b.second.size();
            });
        evicted.push_back(evict_from(largest->first));
    }
    m_by_peer[peer].push_back(id);
    m_peer_of.emplace(id, peer);
    ++m_size;
    return evicted;
}

void HandshakePool::remove(std::uint64_t id) {
    const auto found = m_peer_of.find(id);
    if (found == m_peer_of.end()) {
        return;
    }
    auto& queue = m_by_peer.at(found->second);
    queue.erase(std::find(queue.begin(), queue.end(), id));
    if (queue.empty()) {
        m_by_peer.erase(found->second);
    }
    m_peer_of.erase(found);
    --m_size;
}

LogBudget::LogBudget(std::size_t per_window, Millis window)
    : m_per_window(per_window), m_window(window) {}

bool LogBudget::allow(Clock::time_point now) {
    if (!m_started || now - m_start >= m_window) {
        if (m_suppressed > 0) {
            // A summary is still owed: keep counting in the window it belongs to.
            ++m_suppressed;
            return false;
        }
        m_started = true;
        m_start = now;
        m_logged = 0;
    }
    if (m_logged < m_per_window) {
        ++m_logged;
        return true;
    }
    ++m_suppressed;
    return false;
}

std::optional<std::size_t> LogBudget::take_summary(Clock::time_point now) {
    if (m_suppressed == 0 || now - m_start < m_window) {
        return std::nullopt;
    }
    const std::size_t suppressed = m_suppressed;
    m_suppressed = 0;
    m_started = false;
    return suppressed;
}

} // namespace tfslurm
