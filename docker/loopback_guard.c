/*
 * LD_PRELOAD library for the model server (tensorflow_model_server and our tfs-model-server):
 * its ports are reached from this host only, and only by processes of its own user (the stack
 * runs as one user: nginx's workers, the Python service, the handlers).
 *
 * bind(): TF Serving has no flag for its address: gRPC listens on "0.0.0.0:<--port>"
 * (model_servers/server.cc) and the REST API on "::" (net_http/server/internal/
 * evhttp_server.cc). A bind to the wildcard address binds the loopback instead:
 *
 *   0.0.0.0          -> 127.0.0.1
 *   ::  (dual-stack)  -> ::ffff:127.0.0.1   (IPv4 clients of 127.0.0.1, as nginx is)
 *   ::  (IPV6_V6ONLY) -> ::1
 *
 * accept(), accept4(): a TCP connection whose other end is not a socket of this process's
 * effective user (asked of the kernel: sock_diag, as `ss -e` does; no capability needed) is
 * closed at once, and the call goes on to the next connection (or EAGAIN on a non-blocking
 * listener, which gRPC, libevent and asyncio all take as "nothing yet"). Without this, any
 * local user could load a SavedModel of theirs through gRPC's HandleReloadConfigRequest and
 * run its ops as this user, or unload the served models.
 *
 * Every other address, socket family and call is left alone. serve sets LD_PRELOAD
 * (sagemaker_serving/launcher/model_server_command.py).
 *
 * Build: cc -shared -fPIC -O2 -Wall -Wextra -o loopback_guard.so loopback_guard.c -ldl
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);
typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);

static void *next_symbol(const char *name) {
    void *found = dlsym(RTLD_NEXT, name);
    if (found == NULL) {
        errno = ENOSYS;
    }
    return found;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (real_bind == NULL && (real_bind = (bind_fn)next_symbol("bind")) == NULL) {
        return -1;
    }
    if (addr != NULL && addr->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        struct sockaddr_in in4;
        memcpy(&in4, addr, sizeof in4);
        if (in4.sin_addr.s_addr == htonl(INADDR_ANY)) {
            in4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&in4, sizeof in4);
        }
    } else if (addr != NULL && addr->sa_family == AF_INET6 &&
               len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 in6;
        memcpy(&in6, addr, sizeof in6);
        if (IN6_IS_ADDR_UNSPECIFIED(&in6.sin6_addr)) {
            int v6only = 0;
            socklen_t size = sizeof v6only;
            if (getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, &size) != 0) {
                v6only = 0;
            }
            if (v6only) {
                in6.sin6_addr = in6addr_loopback;
            } else {
                memset(&in6.sin6_addr, 0, sizeof in6.sin6_addr);
                in6.sin6_addr.s6_addr[10] = 0xff;
                in6.sin6_addr.s6_addr[11] = 0xff;
                in6.sin6_addr.s6_addr[12] = 127;
                in6.sin6_addr.s6_addr[15] = 1;
            }
            return real_bind(fd, (const struct sockaddr *)&in6, sizeof in6);
        }
    }
    return real_bind(fd, addr, len);
}

/* One end of a TCP connection as sock_diag wants it: family, address (network order), port. */
struct end {
    int family;
    unsigned char address[16];
    unsigned short port;
};

static int end_of(const struct sockaddr_storage *addr, struct end *out) {
    memset(out, 0, sizeof *out);
    if (addr->ss_family == AF_INET) {
        const struct sockaddr_in *in4 = (const struct sockaddr_in *)addr;
        out->family = AF_INET;
        memcpy(out->address, &in4->sin_addr, 4);
        out->port = in4->sin_port;
        return 0;
    }
    if (addr->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)addr;
        out->port = in6->sin6_port;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) { /* an IPv4 client of a dual-stack socket */
            out->family = AF_INET;
            memcpy(out->address, &in6->sin6_addr.s6_addr[12], 4);
        } else {
            out->family = AF_INET6;
            memcpy(out->address, &in6->sin6_addr, 16);
        }
        return 0;
    }
    return -1;
}

/* The owner of the socket at the other end of TCP connection `fd` (a socket of this host).
   0 and *uid set when the kernel knows it, -1 when it does not (not local, already gone). */
static int peer_uid(int fd, uid_t *uid) {
    struct sockaddr_storage local, peer;
    socklen_t local_len = sizeof local, peer_len = sizeof peer;
    struct end here, there;
    if (getsockname(fd, (struct sockaddr *)&local, &local_len) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &peer_len) != 0 || end_of(&local, &here) != 0 ||
        end_of(&peer, &there) != 0 || here.family != there.family) {
        return -1;
    }
    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } ask;
    memset(&ask, 0, sizeof ask);
    ask.header.nlmsg_len = sizeof ask;
    ask.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    ask.header.nlmsg_flags = NLM_F_REQUEST;
    ask.request.sdiag_family = (unsigned char)here.family;
    ask.request.sdiag_protocol = IPPROTO_TCP;
    ask.request.idiag_states = ~0U;
    /* the peer's own socket: its local end is our peer, its remote end is us */
    ask.request.id.idiag_sport = there.port;
    ask.request.id.idiag_dport = here.port;
    memcpy(ask.request.id.idiag_src, there.address, sizeof there.address);
    memcpy(ask.request.id.idiag_dst, here.address, sizeof here.address);
    ask.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    ask.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

    int diag = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (diag < 0) {
        return -1;
    }
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    int found = -1;
    if (sendto(diag, &ask, sizeof ask, 0, (struct sockaddr *)&kernel, sizeof kernel) ==
        (ssize_t)sizeof ask) {
        long buffer[1024];
        ssize_t got;
        do {
            got = recv(diag, buffer, sizeof buffer, 0);
        } while (got < 0 && errno == EINTR);
        struct nlmsghdr *reply = (struct nlmsghdr *)buffer;
        if (got > 0 && NLMSG_OK(reply, (unsigned int)got) &&
            reply->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
            reply->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            const struct inet_diag_msg *msg = NLMSG_DATA(reply);
            *uid = msg->idiag_uid;
            found = 0;
        }
    }
    close(diag);
    return found;
}

/* Whether connection `fd` may be served: not TCP, or from a process of our own user. */
static int allowed(int fd) {
    struct sockaddr_storage local;
    socklen_t local_len = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &local_len) != 0 ||
        (local.ss_family != AF_INET && local.ss_family != AF_INET6)) {
        return 1;
    }
    uid_t uid;
    if (peer_uid(fd, &uid) == 0 && uid == geteuid()) {
        return 1;
    }
    static int said;
    if (!said) { /* once: a refused connection is not worth a line each */
        said = 1;
        static const char line[] =
            "loopback_guard: closed a connection from a process of another user (or one the "
            "kernel could not tell): only the stack's own user may reach the model server\n";
        ssize_t ignored = write(STDERR_FILENO, line, sizeof line - 1);
        (void)ignored;
    }
    return 0;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags) {
    static accept4_fn real_accept4;
    if (real_accept4 == NULL && (real_accept4 = (accept4_fn)next_symbol("accept4")) == NULL) {
        return -1;
    }
    socklen_t room = len != NULL ? *len : 0;
    for (;;) {
        int conn = real_accept4(fd, addr, len, flags);
        if (conn < 0 || allowed(conn)) {
            return conn;
        }
        close(conn);
        if (len != NULL) {
            *len = room; /* the next call fills the address again */
        }
    }
}

int accept(int fd, struct sockaddr *addr, socklen_t *len) {
    static accept_fn real_accept;
    if (real_accept == NULL && (real_accept = (accept_fn)next_symbol("accept")) == NULL) {
        return -1;
    }
    socklen_t room = len != NULL ? *len : 0;
    for (;;) {
        int conn = real_accept(fd, addr, len);
        if (conn < 0 || allowed(conn)) {
            return conn;
        }
        close(conn);
        if (len != NULL) {
            *len = room; /* the next call fills the address again */
        }
    }
}
