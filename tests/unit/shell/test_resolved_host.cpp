// SPDX-License-Identifier: MIT
// The coordinator's host name, resolved once per launcher (src/shell/detail/resolved_host.hpp):
// a leader's every candidate port and every retry reuse the first answer.
#include "shell/detail/resolved_host.hpp"

#include <boost/asio/ip/address.hpp>
#include <catch2/catch.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

using boost::asio::ip::address;
using boost::asio::ip::make_address;
using tfslurm::detail::ResolvedHost;

namespace {

/// A resolver of the names in `known` that records every name it is asked.
struct CountingResolver {
    std::map<std::string, std::string> known;
    std::vector<std::string> asked;

    ResolvedHost::Resolve function() {
        return [this](const std::string& name, std::string& error) -> std::optional<address> {
            asked.push_back(name);
            const auto found = known.find(name);
            if (found == known.end()) {
                error = "Host not found (authoritative)";
                return std::nullopt;
            }
            return make_address(found->second);
        };
    }
};

} // namespace

TEST_CASE("resolved_host: a name is resolved once, whatever the attempts", "[resolved_host]") {
    CountingResolver resolver{{{"n1", "10.77.0.11"}}, {}};
    ResolvedHost host(resolver.function());
    std::string error;
    // A leader's round over 8 candidate ports, twice (rank 0 was not listening yet).
    for (int attempt = 0; attempt < 16; ++attempt) {
        const auto found = host.address("n1", error);
        REQUIRE(found);
        CHECK(found->to_string() == "10.77.0.11");
    }
    CHECK(resolver.asked == std::vector<std::string>{"n1"});
    CHECK(error.empty());
}

TEST_CASE("resolved_host: another name is resolved, and kept instead", "[resolved_host]") {
    CountingResolver resolver{{{"n1", "10.77.0.11"}, {"n2", "10.77.0.12"}}, {}};
    ResolvedHost host(resolver.function());
    std::string error;
    CHECK(host.address("n1", error)->to_string() == "10.77.0.11");
    CHECK(host.address("n2", error)->to_string() == "10.77.0.12");
    CHECK(host.address("n2", error)->to_string() == "10.77.0.12");
    CHECK(host.address("n1", error)->to_string() == "10.77.0.11");
    CHECK(resolver.asked == std::vector<std::string>{"n1", "n2", "n1"});
}

TEST_CASE("resolved_host: a failure is not kept: the next attempt asks again", "[resolved_host]") {
    CountingResolver resolver{{}, {}};
    ResolvedHost host(resolver.function());
    std::string error;
    CHECK_FALSE(host.address("n9", error));
    CHECK(error == "Host not found (authoritative)");
    // The name appears (a DNS that answered late): found on the next attempt, then kept.
    resolver.known["n9"] = "10.77.0.19";
    error.clear();
    CHECK(host.address("n9", error)->to_string() == "10.77.0.19");
    CHECK(host.address("n9", error)->to_string() == "10.77.0.19");
    CHECK(resolver.asked == std::vector<std::string>{"n9", "n9"});
    CHECK(error.empty());
}
