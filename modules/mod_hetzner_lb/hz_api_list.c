/*
 * hz_api_list.c: the lists of the Hetzner API client (see hz_api.h,
 * hz_api_int.h): the first page asked for at 50 per page, each page
 * collected into one array (hz_api_list) or handed to the caller and not
 * kept (hz_api_list_pages), the next page fetched at the front of the
 * queue while meta.pagination.next_page names a later one, at most 10,000
 * pages.
 */
#include <errno.h>
#include <string.h>

#include "hz_api_int.h"

/* A list page arrived: collect, then fetch the next or complete c. */
void
hz_call_list_page(struct hz_call *c, int status, json_t *body)
{
    json_t *items = json_object_get(body, c->list_key);
    json_t *next =
        json_object_get(json_object_get(json_object_get(body, "meta"), "pagination"), "next_page");
    if (!json_is_array(items)) {
        hz_call_finish_err(c, -EIO, status, NULL, "the answer lacks the list");
        return;
    }
    if (c->pcb) {
        int rc = c->pcb(c->arg, items);
        if (rc < 0) {
            hz_call_finish_err(c, rc, status, NULL,
                               rc == -ENOMEM ? "out of memory"
                                             : "the page holds an item not understood");
            return;
        }
    } else if (json_array_extend(c->items, items) < 0) {
        hz_call_finish_err(c, -ENOMEM, status, NULL, "out of memory");
        return;
    }
    if (json_is_integer(next) && json_integer_value(next) > c->page && c->page < MAX_PAGES) {
        char *p = hz_asprintf("%s%cper_page=%d&page=%d", c->list_base,
                              strchr(c->list_base, '?') ? '&' : '?', PER_PAGE,
                              (int)json_integer_value(next));
        if (!p) {
            hz_call_finish_err(c, -ENOMEM, status, NULL, "out of memory");
            return;
        }
        c->page = (int)json_integer_value(next);
        hz_free(c->path);
        c->path = p;
        c->retries = 0;
        hz_call_enqueue(c, 1);
        return;
    }
    struct hz_result r = {.status = status, .body = body};
    hz_call_finish(c, &r);
}

int
hz_api_list_pages(struct hz_api *api, const char *path, const char *key, hz_page_cb pcb,
                  hz_list_cb cb, void *arg)
{
    char *first =
        hz_asprintf("%s%cper_page=%d&page=1", path, strchr(path, '?') ? '&' : '?', PER_PAGE);
    struct hz_call *c = first ? hz_call_new(api, "GET", first) : NULL;
    int rc = -ENOMEM;
    hz_free(first);
    if (!c)
        return api->cancelling ? -ECANCELED : -ENOMEM;
    c->lcb = cb;
    c->pcb = pcb;
    c->arg = arg;
    c->page = 1;
    if (!(c->list_base = hz_strdup(path)) || !(c->list_key = hz_strdup(key)) ||
        !(c->items = json_array()))
        goto fail;
    rc = hz_call_start(api, c, NULL);
fail:
    return hz_call_started(c, rc);
}

int
hz_api_list(struct hz_api *api, const char *path, const char *key, hz_list_cb cb, void *arg)
{
    return hz_api_list_pages(api, path, key, NULL, cb, arg);
}
