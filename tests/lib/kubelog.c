/* The fake API server's request log (see kubelog.h). */
#include "kubelog.h"

#include <string.h>

int
tu_kube_requests(const json_t *log, const char *method, const char *frag1, const char *frag2,
                 double *times, int max)
{
    json_t *items = json_object_get(log, "items"), *e;
    size_t i;
    int n = 0;
    json_array_foreach(items, i, e)
    {
        const char *m = json_string_value(json_object_get(e, "method"));
        const char *p = json_string_value(json_object_get(e, "path"));
        if (!m || !p || strcmp(m, method) != 0 || (frag1 && !strstr(p, frag1)) ||
            (frag2 && !strstr(p, frag2)))
            continue;
        if (times && n < max)
            times[n] = json_real_value(json_object_get(e, "time"));
        n++;
    }
    return n;
}
