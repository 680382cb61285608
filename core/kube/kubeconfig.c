/*
 * kubeconfig: where the API server is and how to authenticate, from a
 * kubeconfig file (YAML or JSON) or the in-cluster service account; and the
 * URL and path building every request uses. Pure except
 * core_kube_config_load, which reads one small file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "kube-internal.h"
#include "rfile.h"

void
core_kube_config_clear(struct core_kube_config *c)
{
    char **s[] = {&c->server,     &c->ca_file,         &c->ca_pem,     &c->cert_file,
                  &c->key_file,   &c->cert_pem,        &c->key_pem,    &c->token,
                  &c->token_file, &c->tls_server_name, &c->connect_to, &c->ns};
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        core_free(*s[i]);
        *s[i] = NULL;
    }
    c->insecure = 0;
}

static int seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int
seterr(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Base64.                                                                   */

char *
core_kube_b64decode(const char *s, size_t *out_len)
{
    size_t n = strlen(s);
    char *out = core_malloc(n / 4 * 3 + 4);
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    int pad = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        int v;
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        if (pad)
            goto bad; /* data after padding */
        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '+' || c == '-')
            v = 62;
        else if (c == '/' || c == '_')
            v = 63;
        else
            goto bad;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xFF);
        }
    }
    if (bits >= 6 || pad > 2)
        goto bad; /* a lone sextet cannot end a quantum */
    out[o] = '\0';
    if (out_len)
        *out_len = o;
    return out;
bad:
    core_free(out);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* URLs.                                                                     */

char *
core_kube_url_join(const char *server, const char *path)
{
    if (!server || !path)
        return NULL;
    size_t sn = strlen(server);
    while (sn > 0 && server[sn - 1] == '/')
        sn--;
    while (*path == '/')
        path++;
    return core_asprintf("%.*s/%s", (int)sn, server, path);
}

static int
unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

/* Append s percent-encoded (keeping also the characters in keep). */
static int
penc(char **buf, size_t *len, const char *s, const char *keep)
{
    size_t n = strlen(s);
    char *p = core_realloc(*buf, *len + 3 * n + 1);
    if (!p)
        return -ENOMEM;
    *buf = p;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (unreserved(c) || (keep && c && strchr(keep, c))) {
            p[(*len)++] = (char)c;
        } else {
            static const char hex[] = "0123456789ABCDEF";
            p[(*len)++] = '%';
            p[(*len)++] = hex[c >> 4];
            p[(*len)++] = hex[c & 15];
        }
    }
    p[*len] = '\0';
    return 0;
}

static int
addraw(char **buf, size_t *len, const char *s)
{
    size_t n = strlen(s);
    char *p = core_realloc(*buf, *len + n + 1);
    if (!p)
        return -ENOMEM;
    memcpy(p + *len, s, n + 1);
    *buf = p;
    *len += n;
    return 0;
}

char *
core_kube_path(const char *api_version, const char *resource, const char *ns, const char *name,
               const char *subresource)
{
    char *buf = NULL;
    size_t len = 0;
    if (!api_version || !resource || !*api_version || !*resource)
        return NULL;
    /* ":" of kcp-style names and "@" stay literal; everything else
     * outside the unreserved set is encoded, '/' included. */
    const char *keep = ":@";
    int rc = addraw(&buf, &len, strchr(api_version, '/') ? "/apis/" : "/api/");
    if (!rc)
        rc = penc(&buf, &len, api_version, "/");
    if (!rc && ns && *ns) {
        rc = addraw(&buf, &len, "/namespaces/");
        if (!rc)
            rc = penc(&buf, &len, ns, keep);
    }
    if (!rc)
        rc = addraw(&buf, &len, "/");
    if (!rc)
        rc = penc(&buf, &len, resource, keep);
    if (!rc && name && *name) {
        rc = addraw(&buf, &len, "/");
        if (!rc)
            rc = penc(&buf, &len, name, keep);
    }
    if (!rc && subresource && *subresource) {
        rc = addraw(&buf, &len, "/");
        if (!rc)
            rc = penc(&buf, &len, subresource, keep);
    }
    if (rc) {
        core_free(buf);
        return NULL;
    }
    return buf;
}

int
core_kube_qappend(char **buf, const char *key, const char *value)
{
    size_t len = *buf ? strlen(*buf) : 0;
    int rc = addraw(buf, &len, len == 0 || !strchr(*buf, '?') ? "?" : "&");
    if (!rc)
        rc = penc(buf, &len, key, NULL);
    if (!rc)
        rc = addraw(buf, &len, "=");
    if (!rc)
        rc = penc(buf, &len, value ? value : "", NULL);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* kubeconfig.                                                               */

/* String member (integers are accepted as their decimal text: YAML reads a
 * context named 1234 as a number). Borrowed or NULL. */
static const char *
kstr(json_t *o, const char *key, char *tmp, size_t tmplen)
{
    json_t *v = json_object_get(o, key);
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_integer(v)) {
        snprintf(tmp, tmplen, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return tmp;
    }
    return NULL;
}

/* The entry of list `what` (clusters, users, contexts) named name, and its
 * inner object `inner`. Borrowed or NULL. */
static json_t *
named(json_t *doc, const char *what, const char *inner, const char *name)
{
    json_t *arr = json_object_get(doc, what), *e;
    size_t i;
    char tmp[32];
    json_array_foreach(arr, i, e)
    {
        const char *n = kstr(e, "name", tmp, sizeof(tmp));
        if (n && strcmp(n, name) == 0) {
            json_t *in = json_object_get(e, inner);
            return json_is_object(in) ? in : NULL;
        }
    }
    return NULL;
}

/* Copy s into *dst, or a path joined to dir when s is relative. */
static int
set_path(char **dst, const char *s, const char *dir)
{
    core_free(*dst);
    if (s[0] != '/' && dir && *dir)
        *dst = core_asprintf("%s/%s", dir, s);
    else
        *dst = core_strdup(s);
    return *dst ? 0 : -ENOMEM;
}

static int
set_str(char **dst, const char *s)
{
    core_free(*dst);
    *dst = core_strdup(s);
    return *dst ? 0 : -ENOMEM;
}

/* field-data (base64 PEM) wins over field (a path), as in client-go. */
static int
data_or_file(json_t *o, const char *data_key, const char *file_key, char **pem, char **file,
             const char *dir, char *err, size_t errlen)
{
    char tmp[32];
    const char *d = kstr(o, data_key, tmp, sizeof(tmp));
    const char *f = kstr(o, file_key, tmp, sizeof(tmp));
    if (d && *d) {
        size_t n = 0;
        char *dec = core_kube_b64decode(d, &n);
        if (!dec)
            return seterr(err, errlen, -EINVAL, "%s is not valid base64", data_key);
        if (strlen(dec) != n) {
            core_free(dec);
            return seterr(err, errlen, -EINVAL, "%s does not decode to PEM text", data_key);
        }
        core_free(*pem);
        *pem = dec;
        return 0;
    }
    if (f && *f)
        return set_path(file, f, dir) ? seterr(err, errlen, -ENOMEM, "out of memory") : 0;
    return 0;
}

int
core_kube_config_from_doc(struct core_kube_config *c, json_t *doc, const char *ctx_name,
                          const char *dir, char *err, size_t errlen)
{
    char t1[32], t2[32], t3[32];
    if (!json_is_object(doc))
        return seterr(err, errlen, -EINVAL, "kubeconfig is not a mapping");
    const char *cname =
        ctx_name && *ctx_name ? ctx_name : kstr(doc, "current-context", t1, sizeof(t1));
    if (!cname || !*cname)
        return seterr(err, errlen, -EINVAL, "kubeconfig has no current-context");
    json_t *ctx = named(doc, "contexts", "context", cname);
    if (!ctx)
        return seterr(err, errlen, -EINVAL, "context \"%s\" not found in kubeconfig", cname);
    const char *clname = kstr(ctx, "cluster", t2, sizeof(t2));
    const char *uname = kstr(ctx, "user", t3, sizeof(t3));
    json_t *cl = clname ? named(doc, "clusters", "cluster", clname) : NULL;
    if (!cl)
        return seterr(err, errlen, -EINVAL, "context \"%s\": cluster \"%s\" not found", cname,
                      clname ? clname : "");
    json_t *user = uname && *uname ? named(doc, "users", "user", uname) : NULL;
    if (uname && *uname && !user)
        return seterr(err, errlen, -EINVAL, "context \"%s\": user \"%s\" not found", cname, uname);

    char tmp[32];
    const char *server = kstr(cl, "server", tmp, sizeof(tmp));
    if (!server || !*server)
        return seterr(err, errlen, -EINVAL, "cluster \"%s\" has no server", clname);
    if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
        return seterr(err, errlen, -EINVAL, "cluster \"%s\": server must be an http(s) URL",
                      clname);
    size_t sn = strlen(server);
    while (sn > 0 && server[sn - 1] == '/')
        sn--;
    core_free(c->server);
    c->server = core_strndup(server, sn);
    if (!c->server)
        goto oom;
    int rc = data_or_file(cl, "certificate-authority-data", "certificate-authority", &c->ca_pem,
                          &c->ca_file, dir, err, errlen);
    if (rc)
        return rc;
    const char *sni = kstr(cl, "tls-server-name", tmp, sizeof(tmp));
    if (sni && *sni && set_str(&c->tls_server_name, sni))
        goto oom;
    c->insecure = json_is_true(json_object_get(cl, "insecure-skip-tls-verify"));
    const char *ns = kstr(ctx, "namespace", tmp, sizeof(tmp));
    if (ns && *ns && set_str(&c->ns, ns))
        goto oom;

    if (user) {
        if (json_object_get(user, "exec") || json_object_get(user, "auth-provider"))
            return seterr(err, errlen, -EINVAL,
                          "user \"%s\": exec and auth-provider credential plugins are not "
                          "supported; use a token, token file or client certificate",
                          uname);
        if (json_object_get(user, "username") || json_object_get(user, "password"))
            return seterr(err, errlen, -EINVAL,
                          "user \"%s\": basic authentication is not supported", uname);
        rc = data_or_file(user, "client-certificate-data", "client-certificate", &c->cert_pem,
                          &c->cert_file, dir, err, errlen);
        if (!rc)
            rc = data_or_file(user, "client-key-data", "client-key", &c->key_pem, &c->key_file, dir,
                              err, errlen);
        if (rc)
            return rc;
        if ((c->cert_pem || c->cert_file) != (c->key_pem || c->key_file))
            return seterr(err, errlen, -EINVAL,
                          "user \"%s\": a client certificate needs its key and the key its "
                          "certificate",
                          uname);
        const char *tok = kstr(user, "token", tmp, sizeof(tmp));
        if (tok && *tok) {
            if (set_str(&c->token, tok))
                goto oom;
        } else {
            const char *tf = kstr(user, "tokenFile", tmp, sizeof(tmp));
            if (tf && *tf && set_path(&c->token_file, tf, dir))
                goto oom;
        }
    }
    return 0;
oom:
    return seterr(err, errlen, -ENOMEM, "out of memory");
}

int
core_kube_config_load(struct core_kube_config *c, const char *path, const char *ctx_name, char *err,
                      size_t errlen)
{
    char *buf = NULL, *dir = NULL;
    size_t len = 0;
    json_t *doc = NULL;
    int rc;
    char perr[200];

    /* Non-blocking and regular files only: a FIFO here must not hang the
     * daemon (or --check-config) before its listeners even start. */
    rc = core_file_read(path, (size_t)16 << 20, &buf, &len, perr, sizeof(perr));
    if (rc < 0)
        return seterr(err, errlen, rc, "%s: %s", path, perr);
    doc = core_kube_yaml_parse(buf, len, perr, sizeof(perr));
    if (!doc) {
        rc = seterr(err, errlen, -EINVAL, "%s: %s", path, perr);
        goto out;
    }
    const char *slash = strrchr(path, '/');
    dir = slash ? core_strndup(path, (size_t)(slash - path)) : core_strdup(".");
    if (!dir) {
        rc = seterr(err, errlen, -ENOMEM, "out of memory");
        goto out;
    }
    if (slash == path)
        dir[0] = '\0'; /* a file in / */
    rc = core_kube_config_from_doc(c, doc, ctx_name, slash == path ? "/" : dir, perr, sizeof(perr));
    if (rc)
        seterr(err, errlen, rc, "%s: %s", path, perr);
out:
    json_decref(doc);
    core_free(dir);
    if (buf)
        explicit_bzero(buf, len); /* may hold a token or a key */
    core_free(buf);
    return rc;
}

int
core_kube_config_in_cluster(struct core_kube_config *c, const char *host, const char *port,
                            const char *sa_dir, char *err, size_t errlen)
{
    if (!host || !*host || !port || !*port)
        return seterr(err, errlen, -EINVAL,
                      "not in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                      "must be set");
    if (!sa_dir || !*sa_dir)
        sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    int v6 = strchr(host, ':') != NULL;
    core_kube_config_clear(c);
    c->server = core_asprintf("https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
    c->token_file = core_asprintf("%s/token", sa_dir);
    c->ca_file = core_asprintf("%s/ca.crt", sa_dir);
    if (!c->server || !c->token_file || !c->ca_file) {
        core_kube_config_clear(c);
        return seterr(err, errlen, -ENOMEM, "out of memory");
    }
    return 0;
}
