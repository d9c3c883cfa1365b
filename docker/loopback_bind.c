/*
 * LD_PRELOAD library for tensorflow_model_server: a bind() to the wildcard address binds the
 * loopback instead, so that the model server's ports are not reachable from outside the
 * container. TF Serving has no flag for the address: gRPC listens on "0.0.0.0:<--port>"
 * (model_servers/server.cc) and the REST API on "::" (net_http/server/internal/evhttp_server.cc).
 *
 *   0.0.0.0          -> 127.0.0.1
 *   ::  (dual-stack)  -> ::ffff:127.0.0.1   (IPv4 clients of 127.0.0.1, as nginx is)
 *   ::  (IPV6_V6ONLY) -> ::1
 *
 * Every other address, and every other call, is left alone. serve sets LD_PRELOAD for the real
 * binary only (sagemaker_serving/model_server_command.py); no capability is needed.
 *
 * Build: cc -shared -fPIC -O2 -Wall -Wextra -o loopback_bind.so loopback_bind.c -ldl
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (real_bind == NULL) {
        real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
        if (real_bind == NULL) {
            errno = ENOSYS;
            return -1;
        }
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
