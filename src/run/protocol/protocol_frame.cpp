// SPDX-License-Identifier: MIT
// Frames (tfslurm/run/protocol.hpp, docs/protocol.md): a 4-byte big-endian length, then the
// payload; the frame limit is checked when a frame is made and as soon as a header arrives.
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/protocol.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::protocol {

std::string encode_frame(const Message& message, std::size_t limit) {
    const std::string payload = encode_payload(message);
    if (payload.size() > limit) {
        throw errors::make(Errc::protocol,
                           "protocol",
                           fmt::format("{} message of {} bytes exceeds the {}-byte frame limit",
                                       type_name(message),
                                       payload.size(),
                                       limit));
    }
    return frame_payload(payload, limit);
}

std::string frame_payload(std::string_view payload, std::size_t limit) {
    if (payload.size() > limit) {
        throw errors::make(Errc::protocol,
                           "protocol",
                           fmt::format("message of {} bytes exceeds the {}-byte frame limit",
                                       payload.size(),
                                       limit));
    }
    const auto size = static_cast<std::uint32_t>(payload.size());
    std::string frame;
    frame.reserve(k_header_size + payload.size());
    frame.push_back(static_cast<char>((size >> 24U) & 0xffU));
    frame.push_back(static_cast<char>((size >> 16U) & 0xffU));
    frame.push_back(static_cast<char>((size >> 8U) & 0xffU));
    frame.push_back(static_cast<char>(size & 0xffU));
    frame += payload;
    return frame;
}

FrameParts frame_parts(std::size_t payload_size,
                       const std::vector<std::uint32_t>& ranks,
                       std::size_t limit,
                       std::size_t trailer) {
    FrameParts parts;
    if (!ranks.empty()) {
        // What encode_payload(Relay) makes, keys sorted: `msg` first, then `ranks`, `type`, `v`.
        parts.head = R"({"msg":)";
        parts.tail = fmt::format(
            R"(,"ranks":[{}],"type":"relay","v":{}}})", fmt::join(ranks, ","), k_version);
        parts.tail.reserve(parts.tail.size() + trailer); // the tag goes there, no reallocation
    }
    const std::size_t size = parts.head.size() + payload_size + parts.tail.size();
    if (size > limit) {
        throw errors::make(
            Errc::protocol,
            "protocol",
            fmt::format("message of {} bytes exceeds the {}-byte frame limit", size, limit));
    }
    const std::size_t framed = size + trailer;
    std::string header(k_header_size, '\0');
    for (std::size_t i = 0; i < k_header_size; ++i) {
        header[i] = static_cast<char>((framed >> (8U * (k_header_size - 1 - i))) & 0xffU);
    }
    parts.head.insert(0, header);
    return parts;
}

namespace {
std::uint32_t read_length(std::string_view header) noexcept {
    std::uint32_t size = 0;
    for (std::size_t i = 0; i < k_header_size; ++i) {
        size = (size << 8U) | static_cast<std::uint8_t>(header[i]);
    }
    return size;
}
} // namespace

void FrameDecoder::check_header() const {
    if (m_buffer.size() >= k_header_size) {
        const std::uint32_t size = read_length(m_buffer);
        if (size > m_limit) {
            throw errors::make(Errc::protocol,
                               "protocol",
                               fmt::format("frame of {} bytes exceeds the {}-byte limit: {}",
                                           size,
                                           m_limit,
                                           quote(std::string_view(m_buffer).substr(0, 16))));
        }
    }
}

void FrameDecoder::feed(std::string_view bytes) {
    // Check the header as soon as it is complete, before the payload is buffered.
    if (m_buffer.size() < k_header_size && m_buffer.size() + bytes.size() >= k_header_size) {
        const std::size_t missing = k_header_size - m_buffer.size();
        m_buffer.append(bytes.substr(0, missing));
        bytes.remove_prefix(missing);
        check_header();
    }
    m_buffer.append(bytes);
}

std::optional<std::string> FrameDecoder::next() {
    if (m_buffer.size() < k_header_size) {
        return std::nullopt;
    }
    check_header();
    const std::size_t size = read_length(m_buffer);
    if (m_buffer.size() < k_header_size + size) {
        return std::nullopt;
    }
    std::string payload = m_buffer.substr(k_header_size, size);
    m_buffer.erase(0, k_header_size + size);
    // The next frame's header is checked by the next call, not now: the caller may raise the
    // limit first (a launcher after the coordinator's `welcome`, which can arrive in one read
    // with the large `cluster` behind it).
    return payload;
}

} // namespace tfslurm::protocol
