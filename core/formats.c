/*
 * formats: the checks behind a setting's plb_setting_format (host, host:port,
 * TLS name, http(s) URL, DNS label), pure functions of the text.
 */
#include "formats.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

static int
ip_literal(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

/* RFC 1123 hostname: dot-separated labels of letters, digits and hyphens,
 * 1 to 63 characters, not starting or ending with a hyphen; 253 in all. */
static int
rfc1123_hostname(const char *s)
{
    size_t n = strlen(s), label = 0;
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i <= n; i++) {
        char ch = s[i];
        if (ch == '.' || ch == '\0') {
            if (label == 0 || s[i - 1] == '-')
                return 0;
            label = 0;
            continue;
        }
        if (!isalnum((unsigned char)ch) && ch != '-')
            return 0;
        if (label == 0 && ch == '-')
            return 0;
        if (++label > 63)
            return 0;
    }
    return 1;
}

static const char *
host_port_problem(const char *s)
{
    char host[256];
    const char *port;
    size_t hl;

    if (s[0] == '[') {
        const char *close = strchr(s, ']');
        if (!close || close[1] != ':')
            return "must be [IPv6]:port";
        hl = (size_t)(close - s - 1);
        if (hl == 0 || hl >= sizeof(host))
            return "has no valid IPv6 address in brackets";
        memcpy(host, s + 1, hl);
        host[hl] = '\0';
        unsigned char buf[sizeof(struct in6_addr)];
        if (inet_pton(AF_INET6, host, buf) != 1)
            return "has no valid IPv6 address in brackets";
        port = close + 2;
    } else {
        const char *colon = strrchr(s, ':');
        if (!colon)
            return "must be host:port (the port is missing)";
        if (memchr(s, ':', (size_t)(colon - s)))
            return "must be host:port; write an IPv6 address in brackets: [addr]:port";
        hl = (size_t)(colon - s);
        if (hl == 0)
            return "must be host:port (the host is missing)";
        if (hl >= sizeof(host))
            return "has a host longer than 253 characters";
        memcpy(host, s, hl);
        host[hl] = '\0';
        if (!ip_literal(host) && !rfc1123_hostname(host))
            return "has a host that is neither an IP address nor an RFC 1123 hostname";
        port = colon + 1;
    }
    if (!*port)
        return "must be host:port (the port is missing)";
    long v = 0;
    for (const char *p = port; *p; p++) {
        if (!isdigit((unsigned char)*p) || v > 65535)
            return "has a port that is not a number in the range 1-65535";
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 65535)
        return "has a port that is not a number in the range 1-65535";
    return NULL;
}

static const char *
dns_label_problem(const char *p)
{
    size_t n = strlen(p);
    if (n > 63)
        return "must be at most 63 characters (an RFC 1123 label)";
    for (size_t i = 0; i < n; i++) {
        if (!(islower((unsigned char)p[i]) || isdigit((unsigned char)p[i]) || p[i] == '-'))
            return "must consist of lower case letters, digits and '-' (an RFC 1123 label)";
    }
    if (p[0] == '-' || p[n - 1] == '-')
        return "must start and end with a letter or digit (an RFC 1123 label)";
    return NULL;
}

const char *
core_format_check(enum plb_setting_format format, const char *value, char *buf, size_t len)
{
    (void)buf;
    (void)len;
    if (!value || !*value)
        return NULL;
    switch (format) {
    case PLB_FMT_NONE:
        return NULL;
    case PLB_FMT_HOST:
        return (ip_literal(value) || rfc1123_hostname(value))
                   ? NULL
                   : "must be a valid IP address or RFC 1123 hostname";
    case PLB_FMT_HOST_PORT:
        return host_port_problem(value);
    case PLB_FMT_TLS_NAME:
        return (ip_literal(value) || rfc1123_hostname(value))
                   ? NULL
                   : "must be a host name (no port, scheme, path or brackets)";
    case PLB_FMT_HTTP_URL: {
        const char *host = NULL;
        if (strncmp(value, "https://", 8) == 0)
            host = value + 8;
        else if (strncmp(value, "http://", 7) == 0)
            host = value + 7;
        if (!host)
            return "must be an http:// or https:// URL (\"https://127.0.0.1:6443\")";
        if (!*host || *host == '/' || *host == ':')
            return "must name a host (\"https://127.0.0.1:6443\")";
        return NULL;
    }
    case PLB_FMT_DNS_LABEL:
        return dns_label_problem(value);
    }
    return "has an unknown format";
}

const char *
core_format_check_tls(enum plb_setting_format format, const char *value)
{
    static _Thread_local char buf[256];
    return core_format_check(format, value, buf, sizeof(buf));
}
