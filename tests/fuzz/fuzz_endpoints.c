/*
 * fuzz_endpoints: host:port endpoints and the endpoint lists made of them.
 *
 * The input is read twice:
 *   - as JSON (an EndpointSliceList, an array of EndpointSlices or one
 *     slice) into mod_endpoint_watch's list builder (ew_slices_list in
 *     modules/mod_endpoint_watch/slices.c), through the daemon's own host
 *     table (its object accessors and format checks) with an informer
 *     whose cache is those slices, for the port names "https" and "";
 *   - line by line, each line a host:port as a setting or an endpoint
 *     would give it, into the daemon's PLB_FMT_HOST_PORT check and
 *     mod_tcp_proxy's split (tp_split_hostport, read-only use).
 * Oracles:
 *   - every entry of a built list passes the daemon's host:port check and
 *     the proxy's split, the list is sorted and unique, and no more
 *     entries come out than addresses went in;
 *   - a line the daemon's check accepts, the proxy splits into the same
 *     host (without brackets) and the same port: what --check-config lets
 *     through, the data path can dial.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ew.h"
#include "fuzz.h"
#include "host.h"
#include "kube/kube-internal.h"
#include "tp.h"

/* The slices the fake informer holds (borrowed from the parsed input). */
static const json_t *slices;

static void
foreach_slice(const plb_informer *inf, void (*cb)(const plb_obj *obj, void *arg), void *arg)
{
    (void)inf;
    if (json_is_array(slices)) {
        size_t i;
        json_t *s;
        json_array_foreach(slices, i, s) cb(KOBJ(s), arg);
    } else if (json_is_object(slices)) {
        cb(KOBJ(slices), arg);
    }
}

/* Addresses in the slices: the most entries a list can have. */
static size_t
count_addresses(void)
{
    size_t n = 0, i, j;
    json_t *s, *ep;
    json_t *arr = json_is_array(slices) ? (json_t *)slices : json_pack("[O]", slices);
    if (!arr)
        return (size_t)-1;
    json_array_foreach(arr, i, s)
    {
        json_array_foreach(json_object_get(s, "endpoints"), j, ep) n +=
            json_array_size(json_object_get(ep, "addresses"));
    }
    if (arr != slices)
        json_decref(arr);
    return n;
}

static void
check_list(const struct plb_host *h, const char *port_name)
{
    struct ew_list l;
    int rc = ew_slices_list(h, (const plb_informer *)&slices, port_name, &l);
    FUZZ_ASSERT(rc == 0 || rc == -ENOMEM, "ew_slices_list: %d", rc);
    FUZZ_ASSERT(l.n <= count_addresses(), "%zu entries from fewer addresses", l.n);
    for (size_t i = 0; i < l.n; i++) {
        char host[256];
        int port = 0;
        const char *why = h->links->check_format(PLB_FMT_HOST_PORT, l.v[i]);
        FUZZ_ASSERT(!why, "list entry \"%s\" %s", l.v[i], why);
        FUZZ_ASSERT(tp_split_hostport(l.v[i], host, sizeof(host), &port) == 0,
                    "list entry \"%s\" does not split", l.v[i]);
        FUZZ_ASSERT(i == 0 || strcmp(l.v[i - 1], l.v[i]) < 0, "list not sorted and unique");
    }
    ew_list_clear(h, &l);
}

/* The daemon's check accepts line: the proxy must split it the same way. */
static void
check_hostport(const struct plb_host *h, const char *line)
{
    char host[256], want[256];
    int port = 0;
    if (!*line || h->links->check_format(PLB_FMT_HOST_PORT, line))
        return;
    const char *colon = strrchr(line, ':');
    size_t hl = (size_t)(colon - line);
    if (line[0] == '[')
        memcpy(want, line + 1, hl - 2), want[hl - 2] = '\0';
    else
        memcpy(want, line, hl), want[hl] = '\0';
    FUZZ_ASSERT(tp_split_hostport(line, host, sizeof(host), &port) == 0,
                "\"%s\" passes the check but does not split", line);
    FUZZ_ASSERT(strcmp(host, want) == 0, "\"%s\": host \"%s\", not \"%s\"", line, host, want);
    FUZZ_ASSERT(port == atoi(colon + 1), "\"%s\": port %d", line, port);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct plb_host_kube kube = *core_host.kube;
    kube.informer_foreach = foreach_slice;
    struct plb_host h = core_host;
    h.kube = &kube;

    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (doc) {
        json_t *items = json_object_get(doc, "items");
        slices = json_is_array(items) ? items : doc;
        check_list(&h, "https");
        check_list(&h, "");
        slices = NULL;
        json_decref(doc);
    }

    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (char *p = text, *nl; p; p = nl ? nl + 1 : NULL) {
        nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        check_hostport(&h, p);
    }
    free(text);
    return 0;
}
