/*
 * informer: list + watch of one resource into a cache, with callbacks.
 *
 * One explicit state machine per informer (enum inf_state) driven by three
 * inputs: a list page answered, a watch line or end, the retry timer. The
 * decision when to list or watch again is backoff.c's (kb_next); this file
 * only performs it.
 *
 *   LIST    GET ?limit=N[&continue=T] pages into `fresh`; the last page's
 *           resourceVersion becomes the watch's start. A 410 on a continue
 *           page restarts the list unpaged at once (client-go's pager does
 *           the same). The complete list is diffed into the cache: only
 *           differences are reported (core_kube_diff).
 *   WATCH   GET ?watch=1&resourceVersion=RV&allowWatchBookmarks=true&
 *           timeoutSeconds=T, one JSON event per line (LINES mode, so memory
 *           is bounded by one event). sendInitialEvents is never sent.
 *   WAIT    the retry timer is armed for the next LIST or WATCH.
 *
 * Callbacks may free the informer: `depth` counts callbacks on the stack,
 * and informer_free defers the free to the outermost one.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "httpc.h"
#include "kube-internal.h"
#include "kube.h"
#include "log.h"
#include "reactor.h"

#define INF_PAGE 500
#define INF_ERRBODY_MAX 65536

enum inf_state { INF_LIST = 1, INF_WATCH, INF_WAIT };

/* What ended the watch, as seen in its stream. WE_LOST: an event that
 * could not be taken (not decodable, or no memory to decode or cache it);
 * the watch ends there and resumes from the last event taken. */
enum watch_end { WE_NONE = 0, WE_GONE, WE_ERROR, WE_LOST };

struct plb_informer {
    plb_kube *k;
    struct plb_informer_opts o;
    struct plb_kube_ref ref;                               /* o.ref points here */
    char *copies;                                          /* o's strings, in one block */
    const char *api_version, *resource, *ns, *lsel, *fsel; /* in copies */
    char *path;                                            /* collection path */
    json_t *cache;                                         /* key -> object */
    json_t *keep;     /* what a cached object keeps (core_kube_keep_new), or NULL */
    json_t *pool;     /* with keep: the kept values, each held once */
    size_t pool_mark; /* pool size after its last sweep */
    json_t *fresh;    /* list being read */
    char *rv;         /* resourceVersion to watch from */
    char *cont;       /* continue token of the next page */
    int unpaged;      /* list without limit (after an expired continue) */
    int synced;
    enum inf_state st;
    enum kb_action pending; /* WAIT: what the timer starts */
    struct kb_machine bm;
    plb_timer *timer;
    plb_http_req *req;
    enum watch_end wend;
    int wcode; /* ERROR event code */
    char wmsg[256];
    char *errbody; /* non-event lines of a watch answer */
    size_t errlen;
    int depth, dead;
    int linked;                /* in k->informers */
    struct plb_informer *next; /* k->informers */
};

static void inf_do(plb_informer *inf, enum kb_action a);

static void
set_str(char **dst, const char *s)
{
    char *c = s ? core_strdup(s) : NULL;
    if (s && !c)
        return; /* keep the old value: a stale rv only costs a 410 */
    core_free(*dst);
    *dst = c;
}

static void
status(plb_informer *inf, enum plb_informer_event ev, int is_error, int http, const char *msg,
       int64_t retry)
{
    if (!inf->o.on_status || inf->dead)
        return;
    struct plb_informer_status st = {sizeof(st), ev, is_error, http, msg ? msg : "", retry};
    inf->depth++;
    inf->o.on_status(inf, &st, inf->o.arg);
    inf->depth--;
}

/* Report an add/update/delete (old NULL: add; obj NULL: delete). An
 * update of a trimmed informer whose kept fields did not change is not
 * reported. */
static void
notify(plb_informer *inf, json_t *old, json_t *obj)
{
    if (inf->dead || (inf->keep && old && obj && core_kube_same_but_rv(old, obj)))
        return;
    inf->depth++;
    if (!old && obj && inf->o.on_add)
        inf->o.on_add(inf, KOBJ(obj), inf->o.arg);
    else if (old && obj && inf->o.on_update)
        inf->o.on_update(inf, KOBJ(old), KOBJ(obj), inf->o.arg);
    else if (old && !obj && inf->o.on_delete)
        inf->o.on_delete(inf, KOBJ(old), inf->o.arg);
    inf->depth--;
}

static void
inf_destroy(plb_informer *inf)
{
    for (plb_informer **pp = &inf->k->informers; inf->linked && *pp; pp = &(*pp)->next)
        if (*pp == inf) {
            *pp = inf->next;
            break;
        }
    core_timer_free(inf->timer);
    json_decref(inf->cache);
    json_decref(inf->fresh);
    json_decref(inf->keep);
    json_decref(inf->pool);
    core_free(inf->copies);
    core_free(inf->path);
    core_free(inf->rv);
    core_free(inf->cont);
    core_free(inf->errbody);
    core_free(inf);
}

/* After a callback chain: free if it was asked for. Returns 1 if freed. */
static int
reap(plb_informer *inf)
{
    if (inf->dead && inf->depth == 0) {
        inf_destroy(inf);
        return 1;
    }
    return inf->dead;
}

/* Arm the timer for the decided step (0 delay: now, from the loop). */
static void
schedule(plb_informer *inf, struct kb_step step)
{
    inf->st = INF_WAIT;
    inf->pending = step.action;
    if (core_timer_arm(inf->timer, step.delay_ms, 0, 0) < 0)
        core_log(PLB_LOG_ERROR, NULL, NULL, "informer %s: cannot arm retry timer", inf->resource);
}

static void
on_timer(plb_timer *t, void *arg)
{
    plb_informer *inf = arg;
    (void)t;
    inf_do(inf, inf->pending);
}

/* A step after an input; reports the retry delay with the status. */
static struct kb_step
decide(plb_informer *inf, enum kb_input in)
{
    return kb_next(&inf->bm, in, core_now_ms(), core_random_unit());
}

/* Feed in to the machine, report ev (0: nothing to report) with the retry
 * delay, then take the next step unless the informer was freed meanwhile:
 * a step due at once runs now when now_ok (from a done callback), else
 * from the loop (from inside a step, which must not recurse). */
static void
advance(plb_informer *inf, enum kb_input in, enum plb_informer_event ev, int is_error, int code,
        const char *msg, int now_ok)
{
    struct kb_step s = decide(inf, in);
    if (ev)
        status(inf, ev, is_error, code, msg, s.delay_ms);
    if (reap(inf))
        return;
    if (now_ok && s.delay_ms == 0)
        inf_do(inf, s.action);
    else
        schedule(inf, s);
}

/* ------------------------------------------------------------------------ */
/* List.                                                                     */

static void list_done(plb_http_req *req, const plb_http_resp *resp, void *arg);

static int
add_selectors(plb_informer *inf, char **url)
{
    int rc = 0;
    if (inf->lsel && *inf->lsel)
        rc = core_kube_qappend(url, "labelSelector", inf->lsel);
    if (!rc && inf->fsel && *inf->fsel)
        rc = core_kube_qappend(url, "fieldSelector", inf->fsel);
    return rc;
}

static void
list_page(plb_informer *inf)
{
    char *url = core_strdup(inf->path);
    char num[16];
    int err = 0;
    snprintf(num, sizeof(num), "%u", inf->o.page_size ? inf->o.page_size : INF_PAGE);
    if (!url || (!inf->unpaged && core_kube_qappend(&url, "limit", num)) ||
        (inf->cont && core_kube_qappend(&url, "continue", inf->cont)) || add_selectors(inf, &url)) {
        err = -ENOMEM;
        goto fail;
    }
    inf->st = INF_LIST;
    inf->req = core_kube_http(inf->k, "GET", url, NULL, NULL, PLB_HTTP_BUFFER, 0, NULL, list_done,
                              inf, &err);
fail:
    core_free(url);
    if (!inf->req)
        advance(inf, KB_LIST_FAILED, PLB_INFORMER_LIST_FAILED, 1, 0, strerror(-err), 0);
}

static void
diff_cb(const char *key, json_t *old, json_t *obj, void *arg)
{
    (void)key;
    notify(arg, old, obj);
}

static void
list_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    plb_informer *inf = arg;
    int code;
    const char *reason, *message;
    json_t *j;
    (void)req;

    inf->req = NULL;
    if (core_kube_answer(resp, &code, &j, &reason, &message) != PLB_HTTP_OK)
        goto failed;
    if (code == 410 && inf->cont) {
        /* The continue token expired: list again, whole, at once. */
        status(inf, PLB_INFORMER_EXPIRED, 0, code, message, 0);
        json_decref(j);
        if (reap(inf))
            return;
        json_object_clear(inf->fresh);
        set_str(&inf->cont, NULL);
        inf->unpaged = 1;
        list_page(inf);
        return;
    }
    json_t *items = json_object_get(j, "items");
    if (code != 200 || !json_is_array(items)) {
        if (code == 200)
            message = "list answer without items";
        goto failed;
    }
    size_t i;
    json_t *it;
    char key[512];
    json_array_foreach(items, i, it)
    {
        core_kube_obj_trim(it);
        if (core_kube_obj_key(it, key, sizeof(key)) == 0 &&
            json_object_set_new(inf->fresh, key, core_kube_keep_apply(inf->keep, it, inf->pool)) <
                0) {
            message = "out of memory";
            goto failed;
        }
    }
    json_t *md = json_object_get(j, "metadata");
    const char *cont = json_string_value(json_object_get(md, "continue"));
    if (cont && *cont) {
        set_str(&inf->cont, cont);
        json_decref(j);
        list_page(inf);
        return;
    }
    set_str(&inf->rv, json_string_value(json_object_get(md, "resourceVersion")));
    set_str(&inf->cont, NULL);
    inf->unpaged = 0;
    json_decref(j);
    j = NULL;
    inf->depth++;
    int changes = core_kube_diff(inf->cache, inf->fresh, diff_cb, inf);
    inf->depth--;
    json_object_clear(inf->fresh);
    core_kube_pool_sweep(inf->pool, &inf->pool_mark);
    if (reap(inf))
        return;
    if (changes < 0)
        core_log(PLB_LOG_ERROR, NULL, NULL, "informer %s: out of memory applying a list",
                 inf->resource);
    if (!inf->synced) {
        inf->synced = 1;
        if (inf->o.on_synced) {
            inf->depth++;
            inf->o.on_synced(inf, inf->o.arg);
            inf->depth--;
            if (reap(inf))
                return;
        }
    }
    advance(inf, KB_LIST_OK, 0, 0, 0, NULL, 1);
    return;
failed:;
    char msg[300];
    snprintf(msg, sizeof(msg), "list %s: %s%s%d", inf->resource, message ? message : "",
             message && *message ? ", status " : "status ", code);
    json_decref(j);
    json_object_clear(inf->fresh);
    set_str(&inf->cont, NULL);
    inf->unpaged = 0;
    advance(inf, KB_LIST_FAILED, PLB_INFORMER_LIST_FAILED, 1, code, msg, 0);
}

/* ------------------------------------------------------------------------ */
/* Watch.                                                                    */

static int
watch_line(plb_http_req *req, const char *data, size_t len, void *arg)
{
    plb_informer *inf = arg;
    json_t *ev = core_kube_json_parse(data, len);
    const char *type = json_string_value(json_object_get(ev, "type"));
    json_t *obj = json_object_get(ev, "object");
    char key[512];
    (void)req;

    if (!type || !json_is_object(obj)) {
        /* Not an event: the body of an error answer. Keep it (bounded).
         * A line that is no JSON at all ends the stream: in a watch's 200
         * answer it is an event lost (to a malformed line or to memory),
         * and resuming from the last event taken replays it; an error
         * answer keeps its first line for the message. */
        int lost = !ev;
        if (lost) {
            inf->wend = WE_LOST;
            snprintf(inf->wmsg, sizeof(inf->wmsg), "an event that could not be decoded");
        }
        if (inf->errlen + len + 1 < INF_ERRBODY_MAX) {
            char *p = core_realloc(inf->errbody, inf->errlen + len + 2);
            if (p) {
                memcpy(p + inf->errlen, data, len);
                inf->errlen += len;
                p[inf->errlen++] = '\n';
                p[inf->errlen] = '\0';
                inf->errbody = p;
            }
        }
        json_decref(ev);
        return lost;
    }
    const char *rv = core_kube_obj_rv(obj);
    if (strcmp(type, "ERROR") == 0) {
        const char *reason = json_string_value(json_object_get(obj, "reason"));
        const char *msg = json_string_value(json_object_get(obj, "message"));
        inf->wcode = (int)json_integer_value(json_object_get(obj, "code"));
        inf->wend =
            inf->wcode == 410 ||
                    (reason && (strcmp(reason, "Expired") == 0 || strcmp(reason, "Gone") == 0))
                ? WE_GONE
                : WE_ERROR;
        snprintf(inf->wmsg, sizeof(inf->wmsg), "%s", msg ? msg : reason ? reason : "error");
        json_decref(ev);
        return 1; /* end the stream */
    }
    if (strcmp(type, "BOOKMARK") == 0) {
        if (*rv)
            set_str(&inf->rv, rv);
        json_decref(ev);
        return 0;
    }
    if (core_kube_obj_key(obj, key, sizeof(key)) < 0) {
        json_decref(ev);
        return 0;
    }
    core_kube_obj_trim(obj);
    obj = core_kube_keep_apply(inf->keep, obj, inf->pool); /* new */
    if (!obj) {
        inf->wend = WE_LOST;
        snprintf(inf->wmsg, sizeof(inf->wmsg), "no memory to cache an event");
        json_decref(ev);
        return 1;
    }
    json_t *old = json_incref(json_object_get(inf->cache, key));
    if (strcmp(type, "DELETED") == 0) {
        if (old) {
            json_object_del(inf->cache, key);
            notify(inf, obj, NULL);
        }
    } else if (strcmp(type, "ADDED") == 0 || strcmp(type, "MODIFIED") == 0) {
        if (!old || strcmp(core_kube_obj_rv(old), rv) != 0) {
            if (json_object_set(inf->cache, key, obj) < 0) {
                /* Out of memory: the event is not taken, nor its rv. */
                inf->wend = WE_LOST;
                snprintf(inf->wmsg, sizeof(inf->wmsg), "no memory to cache an event");
                json_decref(old);
                json_decref(obj);
                json_decref(ev);
                return 1;
            }
            notify(inf, old, obj);
        }
    }
    if (*rv)
        set_str(&inf->rv, rv);
    json_decref(old);
    json_decref(obj);
    json_decref(ev);
    core_kube_pool_sweep(inf->pool, &inf->pool_mark);
    reap(inf); /* freed from a callback: its request was cancelled */
    return 0;
}

static void
watch_done(plb_http_req *req, const plb_http_resp *resp, void *arg)
{
    plb_informer *inf = arg;
    int code = core_http_resp_status(resp);
    enum plb_http_error e = core_http_resp_error(resp);
    enum kb_input in;
    enum plb_informer_event ev;
    int is_error;
    char msg[300];
    (void)req;

    inf->req = NULL;
    if (reap(inf))
        return;
    if (inf->wend == WE_GONE || code == 410) {
        in = KB_WATCH_GONE;
        ev = PLB_INFORMER_EXPIRED;
        is_error = 0;
        snprintf(msg, sizeof(msg), "%s", inf->wend == WE_GONE ? inf->wmsg : "410 Gone");
    } else if (inf->wend == WE_ERROR) {
        in = KB_WATCH_ERROR;
        ev = PLB_INFORMER_WATCH_ERROR;
        is_error = 1;
        snprintf(msg, sizeof(msg), "ERROR event %d: %s", inf->wcode, inf->wmsg);
    } else if (code != 200) {
        const char *reason = "", *m = "";
        json_t *st = core_kube_parse_body(inf->errbody, inf->errlen, &reason, &m);
        in = KB_WATCH_ERROR;
        ev = PLB_INFORMER_WATCH_FAILED;
        is_error = 1;
        if (code)
            snprintf(msg, sizeof(msg), "watch status %d %s", code, m);
        else
            snprintf(msg, sizeof(msg), "watch: %s", core_http_resp_error_text(resp));
        json_decref(st);
    } else if (inf->wend == WE_LOST) {
        in = KB_WATCH_ERROR;
        ev = PLB_INFORMER_WATCH_FAILED;
        is_error = 1;
        snprintf(msg, sizeof(msg), "watch: %s; resuming from the last event taken", inf->wmsg);
    } else {
        in = e == PLB_HTTP_OK ? KB_WATCH_CLOSED : KB_WATCH_ERROR;
        ev = PLB_INFORMER_WATCH_ENDED;
        is_error = 0;
        snprintf(msg, sizeof(msg), "watch ended%s%s", e == PLB_HTTP_OK ? "" : ": ",
                 e == PLB_HTTP_OK ? "" : core_http_resp_error_text(resp));
    }
    advance(inf, in, ev, is_error, code, msg, 1);
}

static void
watch_start(plb_informer *inf)
{
    char *url = core_strdup(inf->path);
    char num[16];
    uint32_t t = inf->o.watch_timeout_s ? inf->o.watch_timeout_s
                                        : 300 + (uint32_t)(core_random_unit() * 300);
    int err = 0;
    snprintf(num, sizeof(num), "%u", t);
    inf->wend = WE_NONE;
    inf->wcode = 0;
    inf->wmsg[0] = '\0';
    inf->errlen = 0;
    kb_watch_started(&inf->bm, core_now_ms());
    if (!url || core_kube_qappend(&url, "watch", "1") ||
        core_kube_qappend(&url, "resourceVersion", inf->rv ? inf->rv : "") ||
        core_kube_qappend(&url, "allowWatchBookmarks", "true") ||
        core_kube_qappend(&url, "timeoutSeconds", num) || add_selectors(inf, &url)) {
        err = -ENOMEM;
        goto fail;
    }
    inf->st = INF_WATCH;
    /* The server ends the watch after timeoutSeconds; a stream silent for a
     * minute past that is dead. */
    inf->req = core_kube_http(inf->k, "GET", url, NULL, NULL, PLB_HTTP_LINES, (t + 60) * 1000u,
                              watch_line, watch_done, inf, &err);
fail:
    core_free(url);
    if (!inf->req)
        advance(inf, KB_WATCH_ERROR, PLB_INFORMER_WATCH_FAILED, 1, 0, strerror(-err), 0);
}

static void
inf_do(plb_informer *inf, enum kb_action a)
{
    if (a == KB_DO_WATCH) {
        watch_start(inf);
    } else {
        json_object_clear(inf->fresh);
        set_str(&inf->cont, NULL);
        list_page(inf);
    }
}

/* ------------------------------------------------------------------------ */
/* Public.                                                                   */

/* Point *dst[i] at a copy of src[i] (NULL stays NULL) for each of the n,
 * every copy in one new block *block. 0 or -ENOMEM. */
static int
copy_strings(char **block, const char *const *src, const char **const *dst, size_t n)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++)
        len += src[i] ? strlen(src[i]) + 1 : 0;
    char *p = *block = core_malloc(len);
    if (!p)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        size_t l = src[i] ? strlen(src[i]) + 1 : 0;
        *dst[i] = src[i] ? memcpy(p, src[i], l) : NULL;
        p += l;
    }
    return 0;
}

plb_informer *
core_informer_new(plb_kube *k, const struct plb_informer_opts *o, int *err)
{
    int dummy;
    plb_informer *inf = NULL;
    if (!err)
        err = &dummy;
    *err = -EINVAL;
    /* 2.0 to 2.5 end before keep (see the size rule) */
    if (!k || !o || o->size < offsetof(struct plb_informer_opts, keep) || !o->ref ||
        o->ref->size < sizeof(struct plb_kube_ref) || !o->ref->api_version || !o->ref->resource ||
        o->ref->name)
        return NULL;
    *err = -ENOMEM;
    inf = core_calloc(1, sizeof(*inf));
    if (!inf)
        return NULL;
    inf->k = k;
    memcpy(&inf->o, o, o->size < sizeof(inf->o) ? o->size : sizeof(inf->o));
    inf->o.keep = NULL; /* borrowed for the call: kept as inf->keep */
    int kept = core_kube_keep_new(
        o->size >= offsetof(struct plb_informer_opts, keep) + sizeof(o->keep) ? o->keep : NULL,
        &inf->keep);
    if (kept == -EINVAL) {
        core_free(inf);
        *err = -EINVAL;
        return NULL;
    }
    const char *src[] = {o->ref->api_version, o->ref->resource, o->ref->ns, o->label_selector,
                         o->field_selector};
    const char **dst[] = {&inf->api_version, &inf->resource, &inf->ns, &inf->lsel, &inf->fsel};
    int copied = copy_strings(&inf->copies, src, dst, sizeof(src) / sizeof(src[0]));
    inf->path = core_kube_path(o->ref->api_version, o->ref->resource, o->ref->ns, NULL, NULL);
    inf->cache = json_object();
    inf->fresh = json_object();
    inf->pool = inf->keep ? json_object() : NULL;
    inf->timer = core_timer_new(k->base, on_timer, inf);
    if (kept < 0 || (inf->keep && !inf->pool) || copied < 0 || !inf->path || !inf->cache ||
        !inf->fresh || !inf->timer) {
        inf->next = NULL;
        inf->k = k;
        /* not linked yet: destroy unlinks nothing */
        inf_destroy(inf);
        return NULL;
    }
    inf->ref = (struct plb_kube_ref){
        sizeof(inf->ref), inf->api_version, inf->resource, inf->ns, NULL, NULL};
    inf->o.ref = &inf->ref;
    inf->o.label_selector = inf->lsel;
    inf->o.field_selector = inf->fsel;
    kb_init(&inf->bm);
    inf->next = k->informers;
    k->informers = inf;
    inf->linked = 1;
    /* Start from the loop, so no callback runs inside informer_new. */
    schedule(inf, (struct kb_step){KB_DO_LIST, 0, 0});
    *err = 0;
    return inf;
}

/* inf is done for: its request cancelled, and inf freed now or when the
 * callbacks it is inside return (reap). */
static void
inf_kill(plb_informer *inf)
{
    inf->dead = 1;
    core_http_cancel(inf->req);
    inf->req = NULL;
    if (inf->depth == 0)
        inf_destroy(inf);
}

void
core_informer_free(plb_informer *inf)
{
    if (!inf || inf->dead)
        return;
    core_timer_cancel(inf->timer);
    inf_kill(inf);
}

void
core_kube_informers_free(plb_kube *k)
{
    while (k->informers) {
        plb_informer *inf = k->informers;
        k->informers = inf->next;
        inf->next = NULL;
        inf->linked = 0;
        inf_kill(inf);
    }
}

int
core_informer_synced(const plb_informer *inf)
{
    return inf && inf->synced;
}

size_t
core_informer_count(const plb_informer *inf)
{
    return inf ? json_object_size(inf->cache) : 0;
}

const plb_obj *
core_informer_get(const plb_informer *inf, const char *ns, const char *name)
{
    char key[512];
    if (!inf || !name)
        return NULL;
    int n = ns && *ns ? snprintf(key, sizeof(key), "%s/%s", ns, name)
                      : snprintf(key, sizeof(key), "%s", name);
    if (n < 0 || (size_t)n >= sizeof(key))
        return NULL;
    return KOBJ(json_object_get(inf->cache, key));
}

void
core_informer_foreach(const plb_informer *inf, void (*cb)(const plb_obj *obj, void *arg), void *arg)
{
    const char *key;
    json_t *obj;
    if (!inf || !cb)
        return;
    json_object_foreach(inf->cache, key, obj)
    {
        cb(KOBJ(obj), arg);
    }
}
