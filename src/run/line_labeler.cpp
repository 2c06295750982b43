// SPDX-License-Identifier: MIT
#include "run/detail/line_labeler.hpp"

namespace tfslurm::detail {

std::string LineLabeler::feed(std::string_view bytes) {
    std::string out;
    while (!bytes.empty()) {
        const auto newline = bytes.find('\n');
        const std::size_t room = k_max_labeled_line - m_line.size();
        if (newline != std::string_view::npos && newline <= room) {
            out += m_prefix;
            out += m_line;
            out.append(bytes.substr(0, newline + 1));
            m_line.clear();
            bytes.remove_prefix(newline + 1);
        } else if (bytes.size() < room) {
            m_line.append(bytes);
            break;
        } else {
            // A line of k_max_labeled_line bytes without its newline yet: out as a piece of its
            // own, so that a trainer writing no newline cannot grow our memory.
            out += m_prefix;
            out += m_line;
            out.append(bytes.substr(0, room));
            out += '\n';
            m_line.clear();
            bytes.remove_prefix(room);
        }
    }
    return out;
}

std::string LineLabeler::finish() {
    if (m_line.empty()) {
        return {};
    }
    std::string out = m_prefix + m_line + '\n';
    m_line.clear();
    return out;
}

} // namespace tfslurm::detail
