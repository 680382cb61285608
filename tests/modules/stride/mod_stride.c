/*
 * mod_stride: a module whose settings table is laid out with a struct
 * plb_setting of another size than the daemon's, the way a module built
 * with an older or a newer module.h would be. Built three ways:
 *   STRIDE_NEWER  each entry is a plb_setting followed by fields a later
 *                 header might add (a larger stride);
 *   STRIDE_OLDER  each entry stops before `format` (what 1.0 had: a
 *                 smaller stride);
 *   neither       the header's own struct.
 * The daemon must read every entry's name, type, offset, default, bounds
 * and doc right in all three; `format` is taken as none where the older
 * layout lacks it.
 */
#include <stddef.h>
#include <stdint.h>

#include <prismlb/module.h>

struct st_config {
    int64_t alpha;
    char *beta;
    int64_t gamma_ms;
};

#define OFF(f) offsetof(struct st_config, f)

#if defined(STRIDE_NEWER)
/* What a later header could append. */
struct st_setting {
    struct plb_setting s;
    const char *future_text;
    uint64_t future_flags;
    double future_bounds[4];
};
#define ENTRY(...)                                                                                 \
    {                                                                                              \
        .s = {__VA_ARGS__}, .future_text = "ignored", .future_flags = ~0ull                        \
    }
#define END                                                                                        \
    {                                                                                              \
        .s = PLB_SETTINGS_END                                                                      \
    }
#define MODNAME "stride_newer"
#elif defined(STRIDE_OLDER)
/* struct plb_setting as ABI 1.0 had it: no `format`. */
struct st_setting {
    const char *name;
    enum plb_setting_type type;
    size_t offset;
    const char *def;
    double min, max;
    const char *const *enum_values;
    uint32_t flags;
    uint32_t role;
    const char *env;
    const char *doc;
    const char *(*validate)(const void *value);
};
#define ENTRY(...)                                                                                 \
    {                                                                                              \
        __VA_ARGS__                                                                                \
    }
#define END                                                                                        \
    {                                                                                              \
        0                                                                                          \
    }
#define MODNAME "stride_older"
#else
struct st_setting {
    struct plb_setting s;
};
#define ENTRY(...)                                                                                 \
    {                                                                                              \
        .s = { __VA_ARGS__ }                                                                       \
    }
#define END                                                                                        \
    {                                                                                              \
        .s = PLB_SETTINGS_END                                                                      \
    }
#define MODNAME "stride"
#endif

static const struct st_setting st_settings[] = {
    ENTRY(.name = "alpha", .type = PLB_SET_INT, .offset = OFF(alpha), .def = "5", .min = 1,
          .max = 10, .doc = "An integer from 1 to 10."),
    ENTRY(.name = "beta", .type = PLB_SET_STRING, .offset = OFF(beta), .def = "b",
          .flags = PLB_SET_NONEMPTY, .doc = "A string that must not be empty."),
    ENTRY(.name = "gamma", .type = PLB_SET_DURATION, .offset = OFF(gamma_ms), .def = "2s",
          .min = 1000, .max = 60000, .doc = "A duration from 1s to 1m."),
    END,
};

static int
st_create(const struct plb_host *host, plb_ctx *ctx, const void *config, void **state, char *err,
          size_t errlen)
{
    (void)host;
    (void)ctx;
    (void)err;
    (void)errlen;
    *state = (void *)config;
    return 0;
}

static void
st_destroy(void *state)
{
    (void)state;
}

PLB_MODULE_EXPORT = {
    .abi_major = PLB_ABI_MAJOR,
    .abi_minor = PLB_ABI_MINOR,
    .size = sizeof(struct plb_module),
    .name = MODNAME,
    .version = "1.0",
    .description = "Test module whose settings table has another stride",
    .settings = (const struct plb_setting *)(const void *)st_settings,
    .setting_size = sizeof(struct st_setting),
    .config_size = sizeof(struct st_config),
    .create = st_create,
    .destroy = st_destroy,
};
