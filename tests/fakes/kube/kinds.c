/* The kinds the fake serves: one table drives routing, discovery, OpenAPI
 * and per-kind behaviour. */
#include "fk.h"

#include <stdio.h>
#include <string.h>

const struct fk_kind fk_kinds[] = {
    {"", "v1", "namespaces", "Namespace", "namespace", "ns", NULL, "io.k8s.api.core.v1.Namespace",
     FK_HAS_STATUS | FK_DNS_LABEL_NAME},
    {"", "v1", "nodes", "Node", "node", "no", NULL, "io.k8s.api.core.v1.Node", FK_HAS_STATUS},
    {"", "v1", "services", "Service", "service", "svc", "all", "io.k8s.api.core.v1.Service",
     FK_NAMESPACED | FK_HAS_STATUS | FK_CLEAR_STATUS | FK_DNS_LABEL_NAME},
    {"", "v1", "events", "Event", "event", "ev", NULL, "io.k8s.api.core.v1.Event", FK_NAMESPACED},
    {"discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", "endpointslice", NULL, NULL,
     "io.k8s.api.discovery.v1.EndpointSlice", FK_NAMESPACED},
    {"coordination.k8s.io", "v1", "leases", "Lease", "lease", NULL, NULL,
     "io.k8s.api.coordination.v1.Lease", FK_NAMESPACED},
    {"events.k8s.io", "v1", "events", "Event", "event", "ev", NULL, "io.k8s.api.events.v1.Event",
     FK_NAMESPACED},
};
const size_t fk_nkinds = sizeof(fk_kinds) / sizeof(fk_kinds[0]);

/* See fk.h. */
const struct fk_kind *
fk_kind_find(const char *group, const char *version, const char *resource)
{
    for (size_t i = 0; i < fk_nkinds; i++) {
        const struct fk_kind *k = &fk_kinds[i];
        if (!strcmp(k->group, group) && !strcmp(k->version, version) &&
            !strcmp(k->resource, resource))
            return k;
    }
    return NULL;
}

/* See fk.h. */
size_t
fk_kind_index(const struct fk_kind *k)
{
    return (size_t)(k - fk_kinds);
}

/* See fk.h. */
const char *
fk_kind_api_version(const struct fk_kind *k, char *buf, size_t len)
{
    if (k->group[0])
        snprintf(buf, len, "%s/%s", k->group, k->version);
    else
        snprintf(buf, len, "%s", k->version);
    return buf;
}

/* See fk.h. */
int
fk_group_version_served(const char *group, const char *version)
{
    for (size_t i = 0; i < fk_nkinds; i++)
        if (!strcmp(fk_kinds[i].group, group) && !strcmp(fk_kinds[i].version, version))
            return 1;
    return 0;
}

/* See fk.h. */
const struct fk_kind *
fk_kind_storage(const struct fk_kind *k)
{
    if (!strcmp(k->group, "events.k8s.io") && !strcmp(k->resource, "events"))
        return fk_kind_find("", "v1", "events");
    return k;
}
