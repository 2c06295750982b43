// SPDX-License-Identifier: MIT
// Files written at a path the user chose (src/os/user_file.cpp): links and other users' files are
// refused before anything is written or truncated; the file another user owns is made by root
// (chown to nobody), as another user on a shared file system would have made it.
#include "os/detail/user_file.hpp"
#include "temp_dir.hpp"

#include <tfslurm/common/error.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <fstream>
#include <string>

using namespace tfslurm;
using detail::open_user_file;
using detail::UserFileMode;

namespace {

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

/// The error open_user_file() throws for `path`, as `<code> <what()> (hint: <hint>)`.
std::string refusal(const std::string& path, UserFileMode mode = UserFileMode::truncate) {
    try {
        const int fd = open_user_file(path, "--output", mode);
        ::close(fd);
    } catch (const Error& e) {
        return fmt::format(
            "{} {} (hint: {})", e.code() == Errc::io ? "io" : "?", e.what(), e.hint());
    }
    return "opened";
}

const std::string k_hint = " (hint: another user may have made it first: remove it, or choose a "
                           "path in a directory only you can write)";

} // namespace

TEST_CASE("user_file: a new file is created, an own file truncated or appended to", "[user_file]") {
    test::TempDir dir("user-file");
    const std::string path = dir.path + "/run.log";
    int fd = open_user_file(path, "--output", UserFileMode::truncate);
    REQUIRE(::write(fd, "one\n", 4) == 4);
    ::close(fd);
    CHECK(test::file_text(path) == "one\n");
    fd = open_user_file(path, "--output", UserFileMode::append);
    REQUIRE(::write(fd, "two\n", 4) == 4);
    ::close(fd);
    CHECK(test::file_text(path) == "one\ntwo\n");
    fd = open_user_file(path, "--output", UserFileMode::truncate);
    ::close(fd);
    CHECK(test::file_text(path).empty());
    CHECK(refusal("/dev/null") == "opened"); // a device is fine whoever owns it
}

TEST_CASE("user_file: a symbolic link is never written through", "[user_file]") {
    test::TempDir dir("user-file");
    const std::string victim = dir.path + "/victim";
    const std::string link = dir.path + "/run.log";
    write_text(victim, "precious\n");
    REQUIRE(::symlink(victim.c_str(), link.c_str()) == 0);
    CHECK(refusal(link) == "io --output: refusing \"" + link +
                               "\": it is a symbolic link (hint: tfslurm never writes through a "
                               "link: name the file itself)");
    CHECK(test::file_text(victim) == "precious\n");
    // A dangling link (the file it names does not exist yet) is refused too: no file is made.
    const std::string dangling = dir.path + "/dangling.log";
    REQUIRE(::symlink((dir.path + "/made").c_str(), dangling.c_str()) == 0);
    CHECK(refusal(dangling, UserFileMode::append).rfind("io --output: refusing", 0) == 0);
    CHECK_FALSE(test::path_exists(dir.path + "/made"));
}

TEST_CASE("user_file: another user's file and a file with two names are refused, intact",
          "[user_file]") {
    test::TempDir dir("user-file");
    const std::string path = dir.path + "/run.log";
    write_text(path, "theirs\n");
    const std::string other = dir.path + "/other-name";
    REQUIRE(::link(path.c_str(), other.c_str()) == 0);
    CHECK(refusal(path) == "io --output: refusing \"" + path +
                               "\": it has 2 hard links (another name of it could be another "
                               "user's)" +
                               k_hint);
    CHECK(test::file_text(path) == "theirs\n");
    REQUIRE(::unlink(other.c_str()) == 0);
    if (::geteuid() != 0) {
        WARN("needs root to make a file of another user (nobody): not run");
        return;
    }
    // Made by nobody first, and world-writable: it would receive this job's output.
    REQUIRE(::chown(path.c_str(), 65534, 65534) == 0);
    REQUIRE(::chmod(path.c_str(), 0666) == 0);
    CHECK(refusal(path) == "io --output: refusing \"" + path +
                               "\": it is owned by uid 65534, not by this user (uid 0)" + k_hint);
    CHECK(refusal(path, UserFileMode::append) ==
          "io --output: refusing \"" + path +
              "\": it is owned by uid 65534, not by this user (uid 0)" + k_hint);
    CHECK(test::file_text(path) == "theirs\n");
}
