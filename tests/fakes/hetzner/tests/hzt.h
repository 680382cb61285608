/*
 * hzt: helpers for the fake Hetzner API tests — start and stop the fake by
 * PID, and talk HTTP to it with libcurl.
 */
#ifndef HZT_H
#define HZT_H

#include <jansson.h>

#include "testutil.h"

struct hzt_fake {
    struct tu_proc proc;
    char *dir;      /* private temp dir (new) */
    char url[256];  /* "http://127.0.0.1:PORT/v1" */
    char base[256]; /* "http://127.0.0.1:PORT" */
    char log[512];
};

struct hzt_resp {
    long status;
    json_t *body; /* parsed body or NULL (new) */
    char *raw;    /* raw body (new) */
    long rl_limit, rl_remaining;
    long long rl_reset; /* -1 when a header is missing */
    char content_type[128];
};

/* Start the fake with extra arguments (NULL-terminated, may be NULL) and an
 * optional seed document written to a file. Waits for the port file.
 * Returns 0 or -1. */
int hzt_start(struct hzt_fake *f, const char *seed_json, const char *const *args);
/* SIGTERM the fake; returns its exit status as from waitpid, -1 if gone. */
int hzt_stop(struct hzt_fake *f);

/* One request. path is appended to f->url ("/load_balancers") unless it
 * starts with "/_admin", then to f->base. token/ua may be NULL. Returns 0 or
 * -1 on transport error; r must be released with hzt_resp_free. */
int hzt_req(struct hzt_fake *f, const char *method, const char *path, const char *token,
            const char *ua, const char *body, struct hzt_resp *r);
void hzt_resp_free(struct hzt_resp *r);

/* error.code of a response (borrowed) or "". */
const char *hzt_err(const struct hzt_resp *r);

/* Poll GET /actions/{id} until it is no longer running (timeout ms).
 * Returns the final status string copied into buf, or -1. */
int hzt_wait_action(struct hzt_fake *f, const char *token, long id, char *buf, size_t len,
                    int timeout_ms);

/* Make the test certificates of gen_certs.sh (good.crt/good.key,
 * other.key, expired.crt/expired.key) in dir. Returns 0 or -1. */
int hzt_gen_certs(const char *dir);

#endif
