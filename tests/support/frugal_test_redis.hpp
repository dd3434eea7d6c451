#pragma once
// A real redis-server for the tests and the bench: started on a free loopback port with no
// persistence, waited for until it answers PING, killed (SIGKILL) when done or on demand.

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis.h>

namespace frugal::testing {

/// A free TCP port on 127.0.0.1 (bound, read back and released).
inline int free_loopback_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    socklen_t len = sizeof addr;
    int port = 0;
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
        port = ntohs(addr.sin_port);
    if (fd >= 0) ::close(fd);
    return port;
}

/// redis-server as a child process. `extra` holds more `--name value` arguments (e.g.
/// {"--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"}).
class redis_server {
public:
    explicit redis_server(std::vector<std::string> extra = {}, int port = 0)
        : extra_(std::move(extra)), port_(port != 0 ? port : free_loopback_port()) {
        start();
    }
    ~redis_server() { stop(); }
    redis_server(const redis_server&) = delete;
    redis_server& operator=(const redis_server&) = delete;

    /// Whether the server answers (false: no redis-server binary, or it did not start).
    [[nodiscard]] bool running() const noexcept { return running_; }
    [[nodiscard]] int port() const noexcept { return port_; }

    /// Kills the server at once (SIGKILL), as a crash would.
    void stop() {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            int status = 0;
            ::waitpid(pid_, &status, 0);
        }
        pid_ = -1;
        running_ = false;
    }
    /// Starts it again, empty, on the same port.
    void start() {
        stop();
        const std::string port = std::to_string(port_);
        std::vector<std::string> args{"redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                                      "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning"};
        args.insert(args.end(), extra_.begin(), extra_.end());
        pid_ = ::fork();
        if (pid_ == 0) {
            if (const int null = ::open("/dev/null", O_WRONLY); null >= 0) ::dup2(null, STDOUT_FILENO);  // its log
            std::vector<char*> argv;
            for (auto& a : args) argv.push_back(a.data());
            argv.push_back(nullptr);
            ::execvp("redis-server", argv.data());
            ::_exit(127);
        }
        for (int i = 0; i < 200 && pid_ > 0 && !running_; ++i) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: no binary, or the port was taken
                pid_ = -1;
                return;
            }
            const timeval tv{0, 200000};
            if (redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv)) {
                if (c->err == 0)
                    if (auto* r = static_cast<redisReply*>(redisCommand(c, "PING"))) {
                        running_ = r->type == REDIS_REPLY_STATUS;
                        freeReplyObject(r);
                    }
                redisFree(c);
            }
            if (!running_) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }

private:
    std::vector<std::string> extra_;
    int port_;
    pid_t pid_ = -1;
    bool running_ = false;
};

}  // namespace frugal::testing
