// SPDX-License-Identifier: MIT
// Where `tfslurm top` finds a step's coordinator (tfslurm/os/watch_endpoint.hpp): the file's
// line, and the file written, read and removed safely in a temporary HOME.
#include "temp_dir.hpp"

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/os/watch_endpoint.hpp>

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

using namespace tfslurm;

namespace {

/// The header's example.
WatchEndpoint wend_example() {
    WatchEndpoint e;
    e.job = 12;
    e.step = 0;
    e.host = "n1";
    e.address = "10.0.0.1";
    e.port = 21865;
    e.pid = 4242;
    return e;
}

void wend_check_same(const WatchEndpoint& a, const WatchEndpoint& b) {
    CHECK(a.job == b.job);
    CHECK(a.step == b.step);
    CHECK(a.host == b.host);
    CHECK(a.address == b.address);
    CHECK(a.port == b.port);
    CHECK(a.pid == b.pid);
}

/// The permission bits of whatever is at `path` (not following a link).
mode_t wend_mode(const std::string& path) {
    struct stat info {};
    REQUIRE(::lstat(path.c_str(), &info) == 0);
    return info.st_mode & 07777;
}

/// The Error that `action` throws: its code and message.
std::pair<Errc, std::string> wend_error(const std::function<void()>& action) {
    try {
        action();
    } catch (const Error& e) {
        return {e.code(), e.what()};
    }
    FAIL("no error");
    return {};
}

/// What parse_watch_endpoint() says of `text` in the file at `path`.
std::string wend_refusal(const std::string& path, const std::string& text) {
    return "top: " + quote(path) +
           " is not a published endpoint (expected \"tfslurm-watch 1 job=J step=S host=H "
           "address=A port=P pid=N\"): " +
           quote(text);
}

/// Sets the umask for its lifetime: the modes the code asks for, not the umask's.
class WendUmask {
  public:
    explicit WendUmask(mode_t mask) : m_old(::umask(mask)) {}
    ~WendUmask() { ::umask(m_old); }
    WendUmask(const WendUmask&) = delete;
    WendUmask& operator=(const WendUmask&) = delete;
    WendUmask(WendUmask&&) = delete;
    WendUmask& operator=(WendUmask&&) = delete;

  private:
    mode_t m_old;
};

/// The names in directory `path`.
std::vector<std::string> wend_names(const std::string& path) {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(path)) {
        out.push_back(entry.path().filename().string());
    }
    return out;
}

} // namespace

TEST_CASE("watch endpoint: the file of a step is in HOME", "[watch_endpoint]") {
    CHECK(watch_endpoint_path(Environment{{"HOME", "/home/u"}}, 12, 3) ==
          std::optional<std::string>{"/home/u/.tfslurm/steps/12.3"});
    CHECK_FALSE(watch_endpoint_path(Environment{{"HOME", ""}}, 12, 3));
    CHECK_FALSE(watch_endpoint_path(Environment{{"USER", "u"}}, 12, 3));
}

TEST_CASE("watch endpoint: the file's line", "[watch_endpoint]") {
    CHECK(format_watch_endpoint(wend_example()) ==
          "tfslurm-watch 1 job=12 step=0 host=n1 address=10.0.0.1 port=21865 pid=4242\n");
    wend_check_same(parse_watch_endpoint(format_watch_endpoint(wend_example()), "f"),
                    wend_example());
    WatchEndpoint largest;
    largest.job = 18446744073709551615ULL;
    largest.step = 18446744073709551615ULL;
    largest.host = "node-1.cluster";
    largest.address = "fe80::1%eth0";
    largest.port = 65535;
    largest.pid = 2147483647;
    wend_check_same(parse_watch_endpoint(format_watch_endpoint(largest), "f"), largest);
    // Without the newline, and in any order.
    wend_check_same(
        parse_watch_endpoint(
            "tfslurm-watch 1 pid=4242 port=21865 address=10.0.0.1 host=n1 step=0 job=12", "f"),
        wend_example());
}

TEST_CASE("watch endpoint: a line that is not right is refused", "[watch_endpoint]") {
    const std::string text =
        GENERATE(as<std::string>{},
                 "",
                 "\n",
                 "hello\n",
                 "tfslurm-watch 2 job=12 step=0 host=n1 address=a port=1 pid=1",
                 "tfslurm-watch 10 job=12 step=0 host=n1 address=a port=1 pid=1",
                 "TFSLURM-WATCH 1 job=12 step=0 host=n1 address=a port=1 pid=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a pid=1",
                 "tfslurm-watch 1 step=0 host=n1 address=a port=1 pid=1",
                 "tfslurm-watch 1 job=12 host=n1 address=a port=1 pid=1",
                 "tfslurm-watch 1 job=12 step=0 address=a port=1 pid=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 port=1 pid=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=1 pid=1 x=1",
                 "tfslurm-watch 1 job=12 job=13 step=0 host=n1 address=a port=1 "
                 "pid=1",
                 "tfslurm-watch 1 job=12 step=0 host= address=a port=1 pid=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address= port=1 pid=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=0 pid=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=65536 pid=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=1 "
                 "pid=2147483648",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=1 pid=-1",
                 "tfslurm-watch 1 job=x step=0 host=n1 address=a port=1 pid=1",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=1 pid=1 =x",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=1 pid=1 x",
                 "tfslurm-watch 1 job=12 step=0 host=n1 address=a port=1 pid=1\n\n",
                 "tfslurm-watch 1 job=12 step=0\nhost=n1 address=a port=1 pid=1");
    INFO(text);
    const auto [code, message] =
        wend_error([&] { (void)parse_watch_endpoint(text, "/h/.tfslurm/steps/12.0"); });
    CHECK(code == Errc::invalid_argument);
    CHECK(message == wend_refusal("/h/.tfslurm/steps/12.0", text));
}

TEST_CASE("watch endpoint: a refusal quotes the beginning of a long text", "[watch_endpoint]") {
    const std::string text = "tfslurm-watch 1 " + std::string(300, 'x');
    const auto [code, message] = wend_error([&] { (void)parse_watch_endpoint(text, "p"); });
    CHECK(code == Errc::invalid_argument);
    CHECK(message == wend_refusal("p", text.substr(0, 200)));
}

TEST_CASE("watch endpoint: published, read and removed in HOME", "[watch_endpoint]") {
    test::TempDir home("wend");
    const Environment env{{"HOME", home.path}};
    const std::string steps = home.path + "/.tfslurm/steps";
    const std::string file = steps + "/12.0";
    CHECK_FALSE(read_watch_endpoint(env, 12, 0)); // no directory yet
    {
        const WendUmask no_mask(0);
        CHECK(publish_watch_endpoint(env, wend_example()) == file);
    }
    CHECK(wend_mode(home.path + "/.tfslurm") == 0700);
    CHECK(wend_mode(steps) == 0700);
    CHECK(wend_mode(file) == 0600);
    CHECK(test::file_text(file) ==
          "tfslurm-watch 1 job=12 step=0 host=n1 address=10.0.0.1 port=21865 pid=4242\n");
    CHECK(wend_names(steps) == std::vector<std::string>{"12.0"}); // no temporary file left
    const auto read = read_watch_endpoint(env, 12, 0);
    REQUIRE(read);
    wend_check_same(*read, wend_example());
    CHECK_FALSE(read_watch_endpoint(env, 12, 1)); // another step: no file

    // Published again (a later start of the step's coordinator): replaced.
    WatchEndpoint moved = wend_example();
    moved.port = 30000;
    moved.pid = 99;
    CHECK(publish_watch_endpoint(env, moved) == file);
    const auto reread = read_watch_endpoint(env, 12, 0);
    REQUIRE(reread);
    wend_check_same(*reread, moved);
    CHECK(wend_names(steps) == std::vector<std::string>{"12.0"});

    remove_watch_endpoint(file);
    CHECK_FALSE(test::path_exists(file));
    CHECK_FALSE(read_watch_endpoint(env, 12, 0));
    remove_watch_endpoint(file); // a missing file is fine
    CHECK(wend_names(steps).empty());
}

TEST_CASE("watch endpoint: without HOME there is no file", "[watch_endpoint]") {
    const Environment env{{"PATH", "/usr/bin"}};
    CHECK_FALSE(read_watch_endpoint(env, 12, 0));
    const auto [code, message] =
        wend_error([&] { (void)publish_watch_endpoint(env, wend_example()); });
    CHECK(code == Errc::io);
    CHECK(message == "top: HOME is not set: no place to publish the endpoint");
    CHECK_FALSE(read_watch_endpoint(Environment{{"HOME", ""}}, 12, 0));
}

TEST_CASE("watch endpoint: a directory that is a link is refused", "[watch_endpoint]") {
    test::TempDir home("wend");
    const Environment env{{"HOME", home.path}};
    const std::string elsewhere = home.path + "/elsewhere";
    REQUIRE(::mkdir(elsewhere.c_str(), 0700) == 0);
    SECTION(".tfslurm") {
        const std::string link = home.path + "/.tfslurm";
        REQUIRE(::symlink(elsewhere.c_str(), link.c_str()) == 0);
        const auto [code, message] =
            wend_error([&] { (void)publish_watch_endpoint(env, wend_example()); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(link) + ": is not a directory (a link?)");
    }
    SECTION("steps") {
        const std::string own = home.path + "/.tfslurm";
        REQUIRE(::mkdir(own.c_str(), 0700) == 0);
        const std::string link = own + "/steps";
        REQUIRE(::symlink(elsewhere.c_str(), link.c_str()) == 0);
        const auto [code, message] =
            wend_error([&] { (void)publish_watch_endpoint(env, wend_example()); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(link) + ": is not a directory (a link?)");
    }
    CHECK(wend_names(elsewhere).empty()); // nothing was written through the link
}

TEST_CASE("watch endpoint: a .tfslurm that is a file or writable by others is refused",
          "[watch_endpoint]") {
    test::TempDir home("wend");
    const Environment env{{"HOME", home.path}};
    const std::string own = home.path + "/.tfslurm";
    SECTION("a file") {
        (void)home.write(".tfslurm", "x", 0600);
        const auto [code, message] =
            wend_error([&] { (void)publish_watch_endpoint(env, wend_example()); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(own) + ": is not a directory (a link?)");
    }
    SECTION("writable by others") {
        REQUIRE(::mkdir(own.c_str(), 0700) == 0);
        REQUIRE(::chmod(own.c_str(), 0777) == 0);
        const auto [code, message] =
            wend_error([&] { (void)publish_watch_endpoint(env, wend_example()); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(own) + ": is writable by others");
    }
    SECTION("steps writable by its group") {
        REQUIRE(::mkdir(own.c_str(), 0700) == 0);
        const std::string steps = own + "/steps";
        REQUIRE(::mkdir(steps.c_str(), 0700) == 0);
        REQUIRE(::chmod(steps.c_str(), 0770) == 0);
        const auto [code, message] =
            wend_error([&] { (void)publish_watch_endpoint(env, wend_example()); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(steps) + ": is writable by others");
    }
}

TEST_CASE("watch endpoint: a link planted where the file goes is replaced, not followed",
          "[watch_endpoint]") {
    test::TempDir home("wend");
    const Environment env{{"HOME", home.path}};
    const std::string victim = home.write("victim", "precious\n", 0600);
    const std::string steps = home.path + "/.tfslurm/steps";
    REQUIRE(std::filesystem::create_directories(steps));
    REQUIRE(::chmod((home.path + "/.tfslurm").c_str(), 0700) == 0);
    REQUIRE(::chmod(steps.c_str(), 0700) == 0);
    const std::string file = steps + "/12.0";
    SECTION("at the file's name") {
        REQUIRE(::symlink(victim.c_str(), file.c_str()) == 0);
        CHECK(publish_watch_endpoint(env, wend_example()) == file);
        CHECK(test::file_text(victim) == "precious\n");
        struct stat info {};
        REQUIRE(::lstat(file.c_str(), &info) == 0);
        CHECK(S_ISREG(info.st_mode));
    }
    SECTION("at the temporary name") {
        const std::string temporary = file + "." + std::to_string(::getpid()) + ".tmp";
        REQUIRE(::symlink(victim.c_str(), temporary.c_str()) == 0);
        const auto [code, message] =
            wend_error([&] { (void)publish_watch_endpoint(env, wend_example()); });
        CHECK(code == Errc::io);
        CHECK(message ==
              "top: " + quote(temporary) + ": cannot create it: " + std::strerror(EEXIST));
        CHECK(test::file_text(victim) == "precious\n");
        CHECK_FALSE(test::path_exists(file));
    }
}

TEST_CASE("watch endpoint: a file that is not right is refused when read", "[watch_endpoint]") {
    test::TempDir home("wend");
    const Environment env{{"HOME", home.path}};
    const std::string steps = home.path + "/.tfslurm/steps";
    REQUIRE(std::filesystem::create_directories(steps));
    const std::string file = steps + "/12.0";
    SECTION("wrong content") {
        (void)home.write(".tfslurm/steps/12.0", "hello\n", 0600);
        const auto [code, message] = wend_error([&] { (void)read_watch_endpoint(env, 12, 0); });
        CHECK(code == Errc::invalid_argument);
        CHECK(message == wend_refusal(file, "hello\n"));
    }
    SECTION("a link") {
        const std::string real = home.write("real", format_watch_endpoint(wend_example()), 0600);
        REQUIRE(::symlink(real.c_str(), file.c_str()) == 0);
        const auto [code, message] = wend_error([&] { (void)read_watch_endpoint(env, 12, 0); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(file) + ": cannot read it: " + std::strerror(ELOOP));
    }
    SECTION("a directory") {
        REQUIRE(::mkdir(file.c_str(), 0700) == 0);
        const auto [code, message] = wend_error([&] { (void)read_watch_endpoint(env, 12, 0); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(file) + ": is not a regular file of this user");
    }
    SECTION("a FIFO (read without blocking)") {
        REQUIRE(::mkfifo(file.c_str(), 0600) == 0);
        const auto [code, message] = wend_error([&] { (void)read_watch_endpoint(env, 12, 0); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(file) + ": is not a regular file of this user");
    }
    SECTION("too large") {
        (void)home.write(".tfslurm/steps/12.0", std::string(5000, 'x'), 0600);
        const auto [code, message] = wend_error([&] { (void)read_watch_endpoint(env, 12, 0); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(file) + ": is larger than 4096 bytes");
    }
}

TEST_CASE("watch endpoint: what another user owns is refused", "[watch_endpoint]") {
    if (::geteuid() != 0) {
        WARN("not root: cannot give a file to another user");
        return;
    }
    constexpr uid_t k_wend_other = 12345;
    test::TempDir home("wend");
    const Environment env{{"HOME", home.path}};
    const std::string own = home.path + "/.tfslurm";
    SECTION("the directory") {
        REQUIRE(::mkdir(own.c_str(), 0700) == 0);
        REQUIRE(::chown(own.c_str(), k_wend_other, static_cast<gid_t>(-1)) == 0);
        const auto [code, message] =
            wend_error([&] { (void)publish_watch_endpoint(env, wend_example()); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(own) + ": is owned by uid 12345, not by this user (uid " +
                             std::to_string(::getuid()) + ")");
    }
    SECTION("the file") {
        const std::string file = publish_watch_endpoint(env, wend_example());
        REQUIRE(::chown(file.c_str(), k_wend_other, static_cast<gid_t>(-1)) == 0);
        const auto [code, message] = wend_error([&] { (void)read_watch_endpoint(env, 12, 0); });
        CHECK(code == Errc::io);
        CHECK(message == "top: " + quote(file) + ": is not a regular file of this user");
    }
}
