/*
 * hz.h: private header of mod_hetzner_lb (not installed, not part of the ABI).
 *
 * mod_hetzner_lb turns Kubernetes Services of type LoadBalancer into Hetzner
 * Cloud load balancers the way robotlb does. It is split by concern:
 *
 *   mod_hetzner_lb.c  descriptor, lifecycle, gate hooks, resync timer
 *   hz_settings.c     settings table, validators, the check hook
 *   hz_mem.c          the allocator (the host's, or libc in unit tests)
 *   hz_names.c        balancer names: default, cluster prefix, legacy, cut
 *   hz_annot.c        robotlb/ annotations: parse, validate, resolve
 *   hz_model.c        the desired balancer; the actual one parsed from JSON
 *   hz_keytab.c       the index of elements by a string key (pure)
 *   hz_lbs.c          the balancers kept (parsed, shared) and their index
 *   hz_plan.c         ownership/adoption decisions; desired vs actual diff
 *   hz_api.c          the Hetzner API client: its life, hz_api_call, stats
 *   hz_api_answer.c   ... sending; an answer arriving, its verdict acted on
 *   hz_api_list.c     ... lists, page by page
 *   hz_api_lane.c     ... a call's life: queue, lane, retry, finish
 *   hz_api_action.c   ... action waits: one batched poll
 *   hz_answer.c       what one API answer means (retry, failed, done...; pure)
 *   hz_queue.c        the per-Service work queue (pure)
 *   hz_index.c        which Services an informer event can change (pure)
 *   hz_state.c        per-Service state, warnings in force (pure, a leaf)
 *   hz_kube.c         the event side's lifecycle: client, informers, timers
 *   hz_watch.c        informers and what their events queue
 *   hz_work.c         the work queue on the loop and its two timers
 *   hz_sync.c         the per-Service sync; a reconcile's completion
 *   hz_build.c        what a Service asks for, from the cache; its status
 *   hz_decide.c       what a sync does: reconcile or not, its plan (pure)
 *   hz_cache.c        the Services as the cache has them: ours, current
 *   hz_ingress.c      the status write (status.loadBalancer.ingress)
 *   hz_writes.c       Kubernetes writes in flight, Events, the finalizer,
 *                     Hetzner deletes
 *   hz_rec_step.c     the reconcile's steps and answers (pure; hz_rec.h)
 *   hz_reconcile.c    one Service's reconcile with Hetzner: the driver
 *   hz_status.c       what `prismlb status` shows
 *   hz_refusal.c      the warning Events of what Hetzner refuses
 *   hz_http.c         hccm's http/https services and HTTP health checks
 *   hz_cert.c         their certificates: names -> IDs, state (pure)
 *   hz_cert_io.c      ... looked up, made, retried, deleted with Hetzner
 *   hz_group.c        shared balancers: members, clashes, union, labels (pure)
 *   hz_group_sync.c   ... one group's reconcile, its balancer's end
 *   hz_group_list.c   ... the list of group balancers; the round's index
 *
 * The pure files (names, annot, model, plan) do no I/O and take no host;
 * they are unit tested directly. Everything runs on the daemon's one event
 * loop thread.
 */
#ifndef PRISMLB_MOD_HETZNER_LB_HZ_H
#define PRISMLB_MOD_HETZNER_LB_HZ_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <prismlb/module.h>

#define HZ_HIDDEN __attribute__((visibility("hidden")))

/* The ownership label robotlb puts on every balancer it manages. */
#define HZ_LABEL_UID "robotlb/service-uid"
/* The label hcloud-cloud-controller-manager puts on the balancer of each
 * Service it serves (the Service's UID): such a balancer is taken over. */
#define HZ_LABEL_HCCM_UID "hcloud-ccm/service-uid"
/* Hetzner's limit on balancer names, in bytes (names are ASCII in practice). */
#define HZ_NAME_MAX 128
/* The most targets a balancer type holds (Hetzner's lb11, lb21, lb31);
 * 0 for a type not known here (no cap: Hetzner refuses the excess). */
HZ_HIDDEN size_t hz_type_max_targets(const char *type);

/* ------------------------------------------------------------------ */
/* Settings (hz_settings.c)                                             */

enum hz_algorithm { HZ_ALG_LEAST_CONNECTIONS = 0, HZ_ALG_ROUND_ROBIN = 1 };
enum hz_ip_mode { HZ_IPMODE_VIP = 0, HZ_IPMODE_PROXY = 1 };

/* The settings as the daemon stores them (see hz_settings_table). */
struct hz_config {
    char *hcloud_token_file; /* PATH: the token, read on every request */
    char *hcloud_token;      /* only from ROBOTLB_HCLOUD_TOKEN (SECRET) */
    char *hcloud_endpoint;   /* base URL ending in /v1 */
    char *cluster_name;      /* DNS label or NULL */
    char *default_network;   /* network name or NULL */
    /* IPv4 CIDR of the subnet balancers' private IPs come from, or NULL */
    char *private_subnet_ip_range;
    int dynamic_node_selector;
    int64_t default_lb_retries;
    int64_t default_lb_timeout;
    int64_t default_lb_interval;
    char *default_lb_location;
    char *default_network_zone; /* new balancers' network zone instead of
                                   default_lb_location, or NULL */
    char *default_balancer_type;
    int default_lb_algorithm; /* index into the enum values: 0 least-connections,
                                 1 round-robin, 2 least-connection (alias of 0);
                                 read it with hz_config_algorithm */
    int default_lb_proxy_mode_enabled;
    int default_ip_mode; /* enum hz_ip_mode */
    int ipv6_ingress;
    int64_t resync_interval_ms;
    int64_t resync_budget_percent; /* share of RateLimit-Limit per hour (10) */
    int64_t refused_recheck_ms;    /* recheck after a refused target (30 s) */
    int dry_run;
    char *log_level;  /* robotlb's ROBOTLB_LOG_LEVEL, or NULL */
    char *kubeconfig; /* PATH or NULL (in-cluster, $KUBECONFIG) */
    char *kube_context;
    char *load_balancer_class; /* the spec.loadBalancerClass served, or NULL:
                                  unset or "robotlb" */
    /* hccm network/status */
    int private_ingress;        /* the balancer's private IPs in the status too */
    int disable_public_network; /* balancers without a public interface,
                                   unless their Service says otherwise */
    int use_private_ip;         /* hccm's HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP:
                                   needs a network; targets are IPs anyway */
};

HZ_HIDDEN extern const struct plb_setting hz_settings_table[];

/* Looks up one environment variable; a borrowed value or NULL. */
typedef const char *(*hz_env_get_fn)(void *arg, const char *name);
/* hcloud-cloud-controller-manager's HCLOUD_LOAD_BALANCERS_* and
 * HCLOUD_NETWORK (read through get) over c: each sets the setting of the
 * same meaning unless that setting's ROBOTLB_* variable is set (which
 * wins). Strings in c are then borrowed from what get returned. 0, or
 * -EINVAL with a message naming the variable in err (c partly set). */
HZ_HIDDEN int hz_env_apply(struct hz_config *c, hz_env_get_fn get, void *arg, char *err,
                           size_t errlen);

/* Go's strconv.ParseBool, as hccm reads booleans: 1 or 0, -1 when v is
 * none of its words (1 t T TRUE true True, 0 f F FALSE false False). */
HZ_HIDDEN int hz_go_bool(const char *v);
/* A Go duration ("10s", "1m30s", "1500ms"), as hccm reads durations, in
 * whole seconds into *out: 0, or -EINVAL when it is not one or not a whole
 * number of seconds. */
HZ_HIDDEN int hz_go_seconds(const char *v, int64_t *out);
/* An IPv4 CIDR as Go's net.ParseCIDR reads it ("10.0.1.0/24"; hccm sends
 * the network it names, so "10.0.1.5/24" is "10.0.1.0/24") into out: 0, or
 * -EINVAL when v is not one (an IPv6 CIDR too: Hetzner's networks are
 * IPv4). */
#define HZ_CIDR4_MAX 19 /* "255.255.255.255/32" */
HZ_HIDDEN int hz_go_cidr4(const char *v, char out[HZ_CIDR4_MAX]);
/* 1 when the IPv4 address ip lies in the CIDR cidr (both valid). */
HZ_HIDDEN int hz_cidr4_holds(const char *cidr, const char *ip);
/* getenv as an hz_env_get_fn (arg unused). */
HZ_HIDDEN const char *hz_getenv(void *arg, const char *name);
/* The module's check hook (see struct plb_module.check). */
HZ_HIDDEN int hz_check(const struct plb_host *host, plb_check *chk, const void *config,
                       void (*report)(plb_check *chk, const char *setting, const char *fmt, ...)
                           PLB_PRINTF(3, 4));

/* Validators shared with the annotation parser. Each returns NULL when
 * valid, else a static message. */
HZ_HIDDEN const char *hz_validate_dns_label(const char *s);
HZ_HIDDEN const char *hz_validate_log_level(const char *s);
/* Map a robotlb log level name (case-insensitive: off, error, warn, info,
 * debug, trace) to the module's threshold; -1 for "off"; -2 if unknown. */
HZ_HIDDEN int hz_log_level_parse(const char *s);
/* The default algorithm of c as enum hz_algorithm. */
HZ_HIDDEN int hz_config_algorithm(const struct hz_config *c);
/* 1 when a Service whose spec.loadBalancerClass is svc_class (NULL: unset)
 * is served under the load_balancer_class setting served (NULL: unset or
 * "robotlb", robotlb's rule; else exactly that class). */
HZ_HIDDEN int hz_class_served(const char *served, const char *svc_class);

/* ------------------------------------------------------------------ */
/* Memory (hz_mem.c)                                                    */

/* Route the module's allocations through host (NULL: libc). Called once in
 * create, before any other hz_ function allocates. */
HZ_HIDDEN void hz_mem_use(const struct plb_host *host);
HZ_HIDDEN void *hz_calloc(size_t n); /* zeroed; NULL on failure */
HZ_HIDDEN void *hz_realloc(void *p, size_t n);
HZ_HIDDEN void hz_free(void *p);          /* NULL is fine */
HZ_HIDDEN char *hz_strdup(const char *s); /* NULL in: NULL out */
HZ_HIDDEN char *hz_strndup(const char *s, size_t n);
HZ_HIDDEN char *hz_asprintf(const char *fmt, ...) PLB_PRINTF(1, 2);
/* Free each owned string *p of the NULL-ended list of pointers to them and
 * set it NULL ("free then NULL" for a struct's strings). */
HZ_HIDDEN void hz_free_each(char **p, ...) __attribute__((sentinel));
/* Free the n owned strings of v, then v (NULL is fine). */
HZ_HIDDEN void hz_strv_free(char **v, size_t n);

/* ------------------------------------------------------------------ */
/* Names (hz_names.c)                                                   */

/* FNV-1a, 64 bits (offset basis 0xcbf29ce484222325, prime 0x100000001b3)
 * over the bytes of s. */
#define HZ_FNV1A64_BASIS 0xcbf29ce484222325ULL
HZ_HIDDEN uint64_t hz_fnv1a64(const char *s);
/* Fold the bytes of s (NULL as empty), then one 0xff byte that no string
 * holds, into the FNV-1a hash *h: a fingerprint of several fields, where
 * ("ab", "c") and ("a", "bc") differ. */
HZ_HIDDEN void hz_fnv1a64_field(uint64_t *h, const char *s);
/* Fit name into Hetzner's 128 characters: a name of at most 128 bytes is
 * copied; a longer one is cut to its first 111 bytes (fewer if that would
 * split a UTF-8 sequence), then "-" and the 16 lowercase hex digits of
 * hz_fnv1a64(whole name). out must hold HZ_NAME_MAX + 1 bytes. */
HZ_HIDDEN void hz_name_fit(const char *name, char out[HZ_NAME_MAX + 1]);
/* The name a Service's balancer is created under: the robotlb/balancer
 * annotation (annot_name, no cluster prefix) when given, else
 * "<service>.<namespace>", or "<cluster>.<service>.<namespace>" with a
 * cluster name; then fitted. cluster and annot_name may be NULL or "". */
HZ_HIDDEN void hz_name_for_service(const char *annot_name, const char *cluster, const char *service,
                                   const char *ns, char out[HZ_NAME_MAX + 1]);
/* The name earlier releases gave the balancer: "<service>", fitted. */
HZ_HIDDEN void hz_name_legacy(const char *service, char out[HZ_NAME_MAX + 1]);
/* The name a shared group's balancer is created under:
 * "<group>.shared.prismlb.io", or "<cluster>.<group>.shared.prismlb.io"
 * with a cluster name (NULL or "": none); then fitted. It holds three dots
 * (four with a cluster) where a Service's default name holds one (two),
 * and its earlier release's none, so it is never one of theirs. */
HZ_HIDDEN void hz_name_for_group(const char *cluster, const char *group, char out[HZ_NAME_MAX + 1]);

/* ------------------------------------------------------------------ */
/* hccm http/certificates (hz_http.c, hz_cert.c)                        */

/* hcloud-cloud-controller-manager's per-service annotations of the http
 * and https services and of the health check beyond its timing. */
#define HZ_HCCM_PROTOCOL "load-balancer.hetzner.cloud/protocol"
#define HZ_HCCM_HC_PROTOCOL "load-balancer.hetzner.cloud/health-check-protocol"
#define HZ_HCCM_HC_PORT "load-balancer.hetzner.cloud/health-check-port"
#define HZ_HCCM_HC_DOMAIN "load-balancer.hetzner.cloud/health-check-http-domain"
#define HZ_HCCM_HC_PATH "load-balancer.hetzner.cloud/health-check-http-path"
#define HZ_HCCM_HC_VALIDATE "load-balancer.hetzner.cloud/health-check-http-validate-certificate"
#define HZ_HCCM_HC_STATUS "load-balancer.hetzner.cloud/http-status-codes"
#define HZ_HCCM_COOKIE_NAME "load-balancer.hetzner.cloud/http-cookie-name"
#define HZ_HCCM_COOKIE_LIFETIME "load-balancer.hetzner.cloud/http-cookie-lifetime"
#define HZ_HCCM_STICKY "load-balancer.hetzner.cloud/http-sticky-sessions"
#define HZ_HCCM_TIMEOUT_IDLE "load-balancer.hetzner.cloud/http-timeout-idle"
#define HZ_HCCM_REDIRECT "load-balancer.hetzner.cloud/http-redirect-http"
#define HZ_HCCM_CERT_TYPE "load-balancer.hetzner.cloud/certificate-type"
#define HZ_HCCM_CERTS "load-balancer.hetzner.cloud/http-certificates"
#define HZ_HCCM_MANAGED_NAME "load-balancer.hetzner.cloud/http-managed-certificate-name"
#define HZ_HCCM_MANAGED_DOMAINS "load-balancer.hetzner.cloud/http-managed-certificate-domains"

enum hz_proto { HZ_PROTO_TCP = 0, HZ_PROTO_HTTP = 1, HZ_PROTO_HTTPS = 2 };

/* One source of http settings: a service's protocol, http settings and
 * health check beyond TCP. Zero (and NULL) is Hetzner's default for each
 * field, so an all-zero struct is a TCP service with a TCP health check on
 * its destination port; the getters below give the value meant. What one
 * Service asks for (from its annotations; every port of the Service that
 * takes this entry shares it, each with its own protocol, struct
 * hz_svc_port) or what a service of a balancer is (from Hetzner's JSON). */
struct hz_http {
    int protocol;        /* enum hz_proto; -1: one this module does not know.
                            The Service's: its ports' protocol unless a port
                            has its own (struct hz_svc_port.protocol) */
    int hc_http;         /* 1: the health check is HTTP; 0: TCP; -1: unknown */
    int hc_port;         /* 0: the service's destination port */
    int hc_tls;          /* the HTTP health check over TLS */
    char *hc_domain;     /* NULL: "" (no Host header of its own) */
    char *hc_path;       /* NULL: "/" */
    char *hc_codes;      /* comma-separated status codes; NULL: "2??,3??" */
    char *cookie_name;   /* NULL: "HCLBSTICKY" */
    int cookie_lifetime; /* seconds; 0: 300 */
    int timeout_idle;    /* seconds, 30..300; 0: not asked for (not sent,
                            Hetzner's value stays) */
    int sticky;          /* sticky sessions */
    int redirect;        /* port 80 redirects to this https service */
    char **certs;        /* http-certificates as written, IDs or names
                            (ncerts of them); NULL when read from Hetzner */
    int64_t *cert_ids;   /* the certificates' IDs (ncerts of them); 0: a
                            name not looked up yet (hz_cert.c) */
    size_t ncerts;
    int managed;        /* certificate-type managed: certs[0] (once named by
                           hz_http_name_managed) is made by prismlb */
    char *managed_name; /* its name as annotated; NULL: hccm's default */
    char *domains;      /* its domains, comma-separated */
    char *uid;          /* the UID of the Service these settings come from: its
                           managed certificate is named (hccm's default name) and
                           labelled by it; NULL when read from Hetzner */
};

/* Free h's strings and zero it (all defaults). */
HZ_HIDDEN void hz_http_clear(struct hz_http *h);
/* Copy src into *dst (new strings). 0 or -ENOMEM (*dst left zero). */
HZ_HIDDEN int hz_http_copy(const struct hz_http *src, struct hz_http *dst);
/* Hetzner's word for protocol p ("tcp", "http", "https"). */
HZ_HIDDEN const char *hz_proto_name(int p);
/* The protocol word of the len bytes at s (tcp, http, https, in any case,
 * as hccm reads its protocol annotation): enum hz_proto, or -1. */
HZ_HIDDEN int hz_proto_of(const char *s, size_t len);
/* The bit of protocol p in a set of protocols (hz_http_annot's protos). */
#define HZ_PROTO_BIT(p) (1u << (p))
/* Reports one bad annotation of the set being parsed (e: the parser's). */
typedef void (*hz_bad_fn)(void *e, const char *key, const char *msg);
/* Read hccm's protocol, http and health-check annotations through get into
 * *out (new strings; zero first). protos is the set (HZ_PROTO_BIT) of the
 * protocols prismlb.io/port-protocols gives some ports (0: none): the http
 * settings apply when the Service's protocol or one of these is http or
 * https, the certificates and the redirect when one is https. Each bad
 * value is reported through bad with its key; then *out may be partly set
 * (the caller clears it). 0, or -ENOMEM. get is an hz_annot_get_fn. */
HZ_HIDDEN int hz_http_annot(const char *(*get)(void *arg, const char *key), void *arg,
                            unsigned protos, struct hz_http *out, hz_bad_fn bad, void *e);
/* A service object of Hetzner's JSON (borrowed) into *out (new strings;
 * hc_port is the port itself, never 0). 0 or -ENOMEM (*out left zero). */
HZ_HIDDEN int hz_http_parse(const json_t *service, struct hz_http *out);
struct hz_svc_port;
/* 1 when a service's protocol, health check protocol and port, and http
 * parts as Hetzner has them (have, from hz_http_parse) differ from what
 * want asks for on port s (its protocol, redirect and destination port). */
HZ_HIDDEN int hz_http_differs(const struct hz_http *want, const struct hz_svc_port *s,
                              const struct hz_http *have);
/* Add port s's protocol, want's http object (the certificates on https
 * only, the redirect as s says) and its health check protocol, port and
 * http object to service (a service body whose health_check object is
 * there; borrowed, changed). 0 or -ENOMEM. */
HZ_HIDDEN int hz_http_json(const struct hz_http *want, const struct hz_svc_port *s,
                           json_t *service);
/* A managed certificate's name as h's one certificate: the annotated one,
 * else hccm's "ccm-managed-certificate-<uid>". Nothing for an uploaded
 * one. 0 or -ENOMEM. */
HZ_HIDDEN int hz_http_name_managed(struct hz_http *h, const char *uid);
/* The items of the comma-separated list csv (NULL: none) as a JSON array
 * of strings (new), NULL on ENOMEM. */
HZ_HIDDEN json_t *hz_csv_json(const char *csv);
/* Fold want into the fingerprint *h. */
HZ_HIDDEN void hz_http_fp(uint64_t *h, const struct hz_http *want);

/* Certificates named rather than numbered (hz_cert.c, pure). cache is
 * the module's index of certificate name -> ID (NULL is empty), filled by
 * hz_cert_learn / hz_cert_keep and bounded: hz_cert_forget drops the names
 * whose ID Hetzner no longer knows, and it holds at most
 * HZ_CERT_NAMES_MAX names, those no Service referenced lately giving way
 * first (see hz_cert.c). hs is the n entries of a desired balancer's http
 * settings (struct hz_desired.https; borrowed): a name is one certificate
 * wherever it is referenced. */
struct hz_certs;
#define HZ_CERT_NAMES_MAX 1024

/* Set the IDs of the named certificates of hs that cache knows (marking
 * those names referenced); how many of their certificates are still
 * without an ID. */
HZ_HIDDEN size_t hz_cert_resolve(struct hz_certs *cache, struct hz_http *hs, size_t n);
/* Drop every name hs references from cache (NULL is fine): Hetzner
 * refused their IDs, so they are looked up again. How many were known. */
HZ_HIDDEN size_t hz_cert_forget(struct hz_certs *cache, const struct hz_http *hs, size_t n);
/* How many names cache knows. */
HZ_HIDDEN size_t hz_cert_count(const struct hz_certs *cache);
/* Free cache (NULL is fine) and its names. */
HZ_HIDDEN void hz_cert_free(struct hz_certs *cache);
/* The next name of hs still without an ID at or after *pos (start at 0;
 * borrowed; each name once over every entry, *pos moved past it), the
 * index of the entry of its first reference into *at (NULL is fine), or
 * NULL when none is left. */
HZ_HIDDEN const char *hz_cert_next_unknown(const struct hz_http *hs, size_t n, size_t *pos,
                                           size_t *at);
/* The answer body (borrowed) of GET /certificates?name=name: the ID of
 * its certificate, set in hs for every reference of that name and kept in
 * *cache (made when NULL); 0 when Hetzner has no certificate of that name
 * ready (none, or a managed one not issued); -ENOMEM. */
HZ_HIDDEN int64_t hz_cert_learn(struct hz_certs **cache, struct hz_http *hs, size_t n,
                                const char *name, const json_t *body);
/* id as the ID of the certificate name: set in hs for every reference of
 * that name, kept in *cache (made when NULL; not kept when it is full of
 * names referenced lately). id, or -ENOMEM. */
HZ_HIDDEN int64_t hz_cert_keep(struct hz_certs **cache, struct hz_http *hs, size_t n,
                               const char *name, int64_t id);

/* Where a certificate of Hetzner's is. */
enum hz_cert_state {
    HZ_CERT_NONE = 0, /* no such certificate */
    HZ_CERT_READY,    /* uploaded, or managed and issued */
    HZ_CERT_PENDING,  /* managed, its issuance under way */
    HZ_CERT_FAILED,   /* managed, its issuance failed (retry it) */
};
/* The state of cert (a certificate object, borrowed; NULL: none), its ID
 * into *id and, for a failed issuance, Hetzner's error code and message
 * (borrowed from cert, NULL when absent). */
HZ_HIDDEN enum hz_cert_state hz_cert_state_of(const json_t *cert, int64_t *id, const char **code,
                                              const char **message);
/* The body of POST /certificates making h's managed certificate
 * (certs[0], its domains), labelled robotlb/service-uid=h->uid (new), or
 * NULL on ENOMEM. */
HZ_HIDDEN json_t *hz_cert_managed_body(const struct hz_http *h);
/* s percent-encoded for a query value (a looked-up name; new), or NULL. */
HZ_HIDDEN char *hz_qenc(const char *s);

/* ------------------------------------------------------------------ */
/* Annotations (hz_annot.c)                                             */

#define HZ_ANN_BALANCER "robotlb/balancer"
#define HZ_ANN_NETWORK "robotlb/lb-network"
#define HZ_ANN_PRIVATE_IP "robotlb/lb-private-ip"
#define HZ_ANN_NODE_SELECTOR "robotlb/node-selector"
#define HZ_ANN_CHECK_INTERVAL "robotlb/lb-check-interval"
#define HZ_ANN_TIMEOUT "robotlb/lb-timeout"
#define HZ_ANN_RETRIES "robotlb/lb-retries"
#define HZ_ANN_PROXY_MODE "robotlb/lb-proxy-mode"
#define HZ_ANN_LOCATION "robotlb/lb-location"
#define HZ_ANN_ALGORITHM "robotlb/lb-algorithm"
#define HZ_ANN_TYPE "robotlb/balancer-type"
#define HZ_ANN_IP_MODE "robotlb/ip-mode"
#define HZ_ANN_PUBLIC "robotlb/lb-public-interface"
/* hcloud-cloud-controller-manager's names for the same things. */
#define HZ_HCCM_NAME "load-balancer.hetzner.cloud/name"
#define HZ_HCCM_TYPE "load-balancer.hetzner.cloud/type"
#define HZ_HCCM_LOCATION "load-balancer.hetzner.cloud/location"
#define HZ_HCCM_ALGORITHM "load-balancer.hetzner.cloud/algorithm-type"
/* hccm's own: the balancer's IPv6 left out of the status; the network
 * zone a balancer is created in (instead of a location). */
#define HZ_HCCM_IPV6_DISABLED "load-balancer.hetzner.cloud/ipv6-disabled"
#define HZ_HCCM_NETWORK_ZONE "load-balancer.hetzner.cloud/network-zone"
/* hccm's node selector: a Kubernetes label selector always in force. */
#define HZ_HCCM_NODE_SELECTOR "load-balancer.hetzner.cloud/node-selector"
/* hccm's per-service ones read so far: the PROXY protocol and the TCP
 * health check's timing, beside robotlb's lb-proxy-mode and lb-check-*. */
#define HZ_HCCM_PROXYPROTOCOL "load-balancer.hetzner.cloud/uses-proxyprotocol"
#define HZ_HCCM_HC_INTERVAL "load-balancer.hetzner.cloud/health-check-interval"
#define HZ_HCCM_HC_TIMEOUT "load-balancer.hetzner.cloud/health-check-timeout"
#define HZ_HCCM_HC_RETRIES "load-balancer.hetzner.cloud/health-check-retries"
/* hccm network/status: the hostname the status shows instead of the IPs;
 * the public interface off (robotlb's lb-public-interface "false"); the
 * private IP in the network (robotlb's lb-private-ip). */
#define HZ_HCCM_HOSTNAME "load-balancer.hetzner.cloud/hostname"
#define HZ_HCCM_DISABLE_PUBLIC "load-balancer.hetzner.cloud/disable-public-network"
#define HZ_HCCM_PRIVATE_IPV4 "load-balancer.hetzner.cloud/private-ipv4"
/* hccm network/status: the subnet of the network the private IP comes from
 * (attach_to_network's ip_range). */
#define HZ_HCCM_PRIVATE_SUBNET "load-balancer.hetzner.cloud/private-subnet-ip-range"
/* hccm network/status: the private IPs in the status too (or not); private
 * IPs for server targets (prismlb makes IP targets only). */
#define HZ_HCCM_DISABLE_PRIVATE_INGRESS "load-balancer.hetzner.cloud/disable-private-ingress"
#define HZ_HCCM_USE_PRIVATE_IP "load-balancer.hetzner.cloud/use-private-ip"
/* hccm network/status: the reverse DNS of the balancer's public IPs. */
#define HZ_HCCM_IPV4_RDNS "load-balancer.hetzner.cloud/ipv4-rdns"
#define HZ_HCCM_IPV6_RDNS "load-balancer.hetzner.cloud/ipv6-rdns"

/* prismlb's own annotations (neither hccm nor robotlb has them; the
 * README's "prismlb's own annotations"): delete protection, set and
 * cleared from the Service (a Go boolean, as hccm's). */
#define HZ_OWN_DELETE_PROTECTION "prismlb.io/delete-protection"
/* prismlb's own: the ports whose services send the PROXY protocol header
 * ("80,443"), instead of hccm's uses-proxyprotocol or robotlb's
 * lb-proxy-mode for all of them (never beside either). */
#define HZ_OWN_PROXY_PORTS "prismlb.io/proxy-protocol-ports"
#define HZ_OWN_PROXY_PORTS_MAX 64 /* ports a list may name */
/* prismlb's own: a protocol per port ("80:http,443:https"); the ports it
 * does not list take hccm's protocol (default tcp). */
#define HZ_OWN_PORT_PROTOCOLS "prismlb.io/port-protocols"
#define HZ_OWN_PORT_PROTOCOLS_MAX 64 /* ports a list may name */

/* prismlb's own: one port of prismlb.io/port-protocols and its protocol. */
struct hz_port_proto {
    int port;
    int protocol; /* enum hz_proto */
};

/* Hetzner's health check bounds (seconds / count). */
#define HZ_HC_INTERVAL_MIN 3
#define HZ_HC_INTERVAL_MAX 60
#define HZ_HC_TIMEOUT_MIN 1
#define HZ_HC_TIMEOUT_MAX 60
#define HZ_HC_RETRIES_MIN 0
#define HZ_HC_RETRIES_MAX 5

/* The robotlb/ annotations of one Service, and those of hccm's
 * load-balancer.hetzner.cloud/ family that say the same thing (name, type,
 * location, algorithm-type: read into the same fields); absent ones are
 * NULL or -1. */
struct hz_annot {
    char *balancer;   /* robotlb/balancer, hccm's name */
    char *network;    /* robotlb/lb-network */
    char *private_ip; /* robotlb/lb-private-ip (IPv4 literal) */
    /* hccm's private-subnet-ip-range (IPv4 CIDR, its network address) */
    char *private_subnet;
    char *node_selector; /* robotlb/node-selector or hccm's, raw (the core's
                            target selection parses it) */
    int selector_hccm;   /* node_selector came from hccm's annotation: it
                            selects the targets whatever dynamic_node_selector
                            says */
    int check_interval;  /* robotlb/lb-check-interval */
    int timeout;         /* robotlb/lb-timeout */
    int retries;         /* robotlb/lb-retries */
    int proxy_mode;      /* robotlb/lb-proxy-mode: 0, 1 */
    char *location;      /* robotlb/lb-location, hccm's location */
    char *network_zone;  /* hccm's network-zone (never with a location) */
    int algorithm;       /* robotlb/lb-algorithm, hccm's algorithm-type: enum
                            hz_algorithm */
    char *type;          /* robotlb/balancer-type, hccm's type */
    int ip_mode;         /* enum hz_ip_mode: robotlb/ip-mode, else Proxy or
                            VIP as hccm's uses-proxyprotocol says, else
                            Proxy with prismlb.io/proxy-protocol-ports */
    int public_iface;    /* robotlb/lb-public-interface: 0, 1 */
    int ipv6_disabled;   /* hccm's ipv6-disabled: 0, 1 (-1: ipv6_ingress
                            decides) */
    /* The annotation type, location and node_selector came from (static
     * strings; NULL when absent), for the messages that name it. */
    const char *type_key, *location_key, *selector_key;
    /* hccm network/status */
    char *hostname; /* hccm's hostname (a DNS name): the status's one entry,
                       instead of the balancer's IPs; NULL: the IPs */
    /* The annotation public_iface came from (static; NULL when absent). */
    const char *public_key;
    int private_ingress; /* hccm's disable-private-ingress upside down: 0, 1
                            (-1: the private_ingress setting decides) */
    int use_private_ip;  /* hccm's use-private-ip: 0, 1 (-1: absent) */
    char *rdns4, *rdns6; /* hccm's ipv4-rdns, ipv6-rdns (DNS names), or NULL:
                            the reverse DNS is left as it is */
    /* hccm http/certificates: protocol, http settings, HTTP health check */
    struct hz_http http;
    /* prismlb's own */
    int delete_protection; /* prismlb.io/delete-protection: 0, 1 (-1: absent,
                              the balancer's protection left as it is) */
    int *proxy_ports;      /* prismlb.io/proxy-protocol-ports: the listed
                              ports, no two alike, or NULL when absent */
    size_t nproxy_ports;
    struct hz_port_proto *port_protos; /* prismlb.io/port-protocols: the
                                          listed ports, no two alike, or
                                          NULL when absent */
    size_t nport_protos;
};

/* Looks up one annotation; returns a borrowed value or NULL when absent. */
typedef const char *(*hz_annot_get_fn)(void *arg, const char *key);

/* Read every robotlb/ annotation, and hccm's of the same meaning, through
 * get. Where both families name one thing, either may be given, or both
 * with the same value; two different values are bad, named together. On
 * success fills *out (new strings; release with hz_annot_clear) and
 * returns 0. When any value is bad returns -EINVAL, leaves *out empty and writes one message naming
 * every bad annotation and its value into err (for a warning Event; the
 * caller keeps the last good state). -ENOMEM when out of memory. */
HZ_HIDDEN int hz_annot_parse(hz_annot_get_fn get, void *arg, struct hz_annot *out, char *err,
                             size_t errlen);
HZ_HIDDEN void hz_annot_clear(struct hz_annot *a);

/* The algorithm name Hetzner uses ("least_connections", "round_robin"). */
HZ_HIDDEN const char *hz_algorithm_api_name(int alg);
/* Parse Hetzner's algorithm.type; -1 when unknown. */
HZ_HIDDEN int hz_algorithm_from_api(const char *s);

/* ------------------------------------------------------------------ */
/* Model (hz_model.c)                                                   */

/* A port of a Service as the reconciler reads it. */
struct hz_port {
    const char *protocol; /* "TCP", "UDP", "SCTP"; NULL means TCP */
    int port;
    int node_port; /* 0 when none is allocated */
};

/* The Service, borrowed for the call. */
struct hz_svc {
    const char *uid, *name, *ns;
    const struct hz_port *ports;
    size_t nports;
};

/* One service of the balancer asked for: a port of a Service. */
struct hz_svc_port {
    int listen, dest, proxy;
    int protocol; /* enum hz_proto: this port's protocol */
    size_t http;  /* the index of its http settings in hz_desired.https */
    int redirect; /* the https service on 443 whose http settings ask for
                     hccm's redirect from port 80 (redirect_http) */
};

/* What the Service asks for. */
struct hz_desired {
    char name[HZ_NAME_MAX + 1]; /* create name */
    char *uid;
    char *type, *location;
    int by_zone;      /* location names a network zone (hccm's network-zone),
                         not a location */
    int algorithm;    /* enum hz_algorithm */
    char *network;    /* network name, NULL when none */
    char *private_ip; /* only with a network */
    /* the subnet (IPv4 CIDR) private_ip comes from; only with a network */
    char *private_subnet;
    int interval, timeout, retries;
    int proxy;
    int ip_mode;      /* enum hz_ip_mode (for the Service status) */
    int public_iface; /* 1: public interface enabled; 0: private only
                         (needs a network) */
    struct hz_svc_port *services;
    size_t nservices;
    char **targets; /* target IPs (node InternalIPs), as given */
    size_t ntargets;
    /* hccm network/status */
    char *rdns4, *rdns6; /* the reverse DNS of the public IPv4, IPv6, or NULL:
                            left as it is */
    /* hccm http/certificates: the http settings and health check beyond
     * its timing of each source of them (owned; a single Service has
     * exactly one), which the services index (hz_svc_port.http) */
    struct hz_http *https;
    size_t nhttps;
    /* prismlb's own: delete protection, when protect_given (else the
     * balancer's is left as it is) */
    int protect_given, protect;
};

/* Build the desired balancer of svc from the settings, its (good)
 * annotations and its target IPs (already selected and capped by the
 * core's target selection; borrowed, copied). One service per TCP port
 * with a nodePort: listen = port, destination = nodePort, proxy protocol
 * from the annotation or default; UDP/SCTP ports and ports without a
 * nodePort are skipped. Returns 0; -ENOENT when no port can be exposed
 * (err says why, for a warning Event; *out left empty); -EINVAL when a
 * private-only balancer (robotlb/lb-public-interface "false") has no
 * network (err says so); -ENOMEM. Free with hz_desired_clear. */
HZ_HIDDEN int hz_desired_build(const struct hz_config *cfg, const struct hz_annot *a,
                               const struct hz_svc *svc, const char *const *target_ips,
                               size_t ntargets, struct hz_desired *out, char *err, size_t errlen);
HZ_HIDDEN void hz_desired_clear(struct hz_desired *d);

struct hz_act_service {
    int listen, dest, proxy;
    int hc_interval, hc_timeout, hc_retries;
    /* hccm http/certificates: the protocol, the health check's protocol,
     * port and request, the http settings */
    struct hz_http http;
};

struct hz_act_net {
    int64_t network;
    char *ip;
};

/* A balancer as GET /load_balancers returns it. */
struct hz_actual {
    int64_t id;
    char *name;
    char *uid;      /* robotlb/service-uid label, or NULL */
    json_t *labels; /* every label (new reference) */
    char *type, *location;
    char *network_zone;        /* its location's network zone, or NULL */
    int algorithm;             /* enum hz_algorithm, -1 when unknown */
    char *ipv4, *ipv6;         /* public addresses or NULL */
    char *dns_ptr4, *dns_ptr6; /* hccm network/status: their reverse DNS, or
                                  NULL */
    int public_enabled;        /* public_net.enabled (1 when absent) */
    int protect_delete;        /* protection.delete: never deleted by us */
    struct hz_act_net *nets;
    size_t nnets;
    char **ip_targets; /* targets of type ip */
    size_t nip_targets;
    size_t nother_targets; /* targets of other types (server, selector) */
    struct hz_act_service *services;
    size_t nservices;
};

/* Parse one load balancer object (borrowed). 0, -EINVAL when it lacks id
 * or name, -ENOMEM. Free with hz_actual_clear. */
HZ_HIDDEN int hz_actual_parse(const json_t *lb, struct hz_actual *out);
HZ_HIDDEN void hz_actual_clear(struct hz_actual *a);
/* 1 when the balancer is attached to network id. */
HZ_HIDDEN int hz_actual_on_network(const struct hz_actual *a, int64_t network);
/* The balancer's hcloud-ccm/service-uid label (borrowed from a), or NULL. */
HZ_HIDDEN const char *hz_actual_hccm_uid(const struct hz_actual *a);

/* ------------------------------------------------------------------ */
/* Balancers kept (hz_lbs.c)                                            */

/* A balancer as the module keeps it between answers: what
 * hz_actual_parse reads of Hetzner's JSON (a few KiB where the JSON held
 * ~90 KiB for 50 targets), shared by reference, never changed once made. */
struct hz_lb {
    struct hz_actual a;
    unsigned refs;
};

/* Parse lb (borrowed JSON) into *out (new, one reference). 0, -EINVAL
 * when it lacks id or name, -ENOMEM. */
HZ_HIDDEN int hz_lb_parse(const json_t *lb, struct hz_lb **out);
/* One more reference to lb (returned); NULL is fine. */
HZ_HIDDEN struct hz_lb *hz_lb_ref(struct hz_lb *lb);
/* Drop one reference, freeing lb with the last; NULL is fine. */
HZ_HIDDEN void hz_lb_unref(struct hz_lb *lb);

/* The index of balancers by their robotlb/service-uid label. */
struct hz_lbs;

/* A new, empty index; NULL when out of memory. */
HZ_HIDDEN struct hz_lbs *hz_lbs_new(void);
/* Drop every reference it holds, then free it; NULL is fine. */
HZ_HIDDEN void hz_lbs_free(struct hz_lbs *m);
/* The balancer labelled uid (borrowed), or NULL (also for m or uid NULL). */
HZ_HIDDEN struct hz_lb *hz_lbs_get(const struct hz_lbs *m, const char *uid);
/* Index lb under its label a.uid (a new reference; the one it replaces is
 * dropped). 0, -EINVAL for a balancer without the label, -ENOMEM. */
HZ_HIDDEN int hz_lbs_put(struct hz_lbs *m, struct hz_lb *lb);
/* Index lb under key instead of its label (a shared group's balancer under
 * its group; a new reference, the one it replaces dropped). 0 or -ENOMEM. */
HZ_HIDDEN int hz_lbs_put_as(struct hz_lbs *m, const char *key, struct hz_lb *lb);
/* Drop the balancer labelled uid, if any (m NULL is fine). */
HZ_HIDDEN void hz_lbs_del(struct hz_lbs *m, const char *uid);
/* How many balancers m holds (0 for NULL). */
HZ_HIDDEN size_t hz_lbs_count(const struct hz_lbs *m);
/* Walk m: start with *pos 0; the next balancer (borrowed), NULL at the
 * end. m must not change during the walk. */
HZ_HIDDEN struct hz_lb *hz_lbs_next(const struct hz_lbs *m, size_t *pos);
/* The balancer of m named name (borrowed; the first the walk meets), or
 * NULL. */
HZ_HIDDEN struct hz_lb *hz_lbs_named(const struct hz_lbs *m, const char *name);
/* The item of a list of balancers (a JSON array, borrowed) named name
 * (borrowed from items), or NULL. */
HZ_HIDDEN const json_t *hz_items_named(const json_t *items, const char *name);
/* The item of items labelled hcloud-ccm/service-uid=uid, the lowest id
 * when several (borrowed from items), or NULL. */
HZ_HIDDEN const json_t *hz_items_hccm(const json_t *items, const char *uid);

/* The body of POST /load_balancers for d (new): name, type, location,
 * algorithm, the ownership label, services with their health checks, and,
 * when network_id > 0 and no private IP is asked for, the network and the
 * IP targets (with_targets). The public interface is disabled in the body
 * only when d asks for it and the network is in the body (Hetzner refuses
 * a private-only balancer without one); else the plan disables it after
 * attach_to_network. A requested private IP (or subnet) needs
 * attach_to_network after the create, which the plan then issues. NULL on
 * ENOMEM. */
HZ_HIDDEN json_t *hz_create_body(const struct hz_desired *d, int64_t network_id, int with_targets);
/* The body of attach_to_network for d (new): the network, and the private
 * IP and the subnet (ip_range) it comes from when d asks for them. NULL on
 * ENOMEM. */
HZ_HIDDEN json_t *hz_attach_body(const struct hz_desired *d, int64_t network_id);

/* One service of d as the API takes it (new): its protocol, listen,
 * destination, proxyprotocol, health check and http settings (those of
 * d->https it indexes). NULL on ENOMEM. */
HZ_HIDDEN json_t *hz_service_json(const struct hz_desired *d, const struct hz_svc_port *s);
/* The http settings service s of d takes (borrowed from d): its entry of
 * d->https, or Hetzner's defaults (a TCP service) when it indexes none. */
HZ_HIDDEN const struct hz_http *hz_port_http(const struct hz_desired *d,
                                             const struct hz_svc_port *s);

/* ------------------------------------------------------------------ */
/* Plan (hz_plan.c)                                                     */

enum hz_op_kind {
    HZ_OP_SET_LABELS = 1,   /* PUT /load_balancers/{id} {labels} */
    HZ_OP_ATTACH_NETWORK,   /* actions/attach_to_network */
    HZ_OP_DETACH_NETWORK,   /* actions/detach_from_network */
    HZ_OP_ENABLE_PUBLIC,    /* actions/enable_public_interface */
    HZ_OP_DISABLE_PUBLIC,   /* actions/disable_public_interface */
    HZ_OP_CHANGE_ALGORITHM, /* actions/change_algorithm */
    HZ_OP_REMOVE_TARGET,    /* actions/remove_target */
    HZ_OP_DELETE_SERVICE,   /* actions/delete_service */
    HZ_OP_CHANGE_TYPE,      /* actions/change_type */
    HZ_OP_ADD_SERVICE,      /* actions/add_service */
    HZ_OP_UPDATE_SERVICE,   /* actions/update_service */
    HZ_OP_ADD_TARGET,       /* actions/add_target */
    HZ_OP_CHANGE_DNS_PTR,   /* actions/change_dns_ptr (hccm network/status) */
    HZ_OP_PROTECT,          /* actions/change_protection (prismlb's own) */
};

/* One Hetzner write, ready to send. */
struct hz_op {
    enum hz_op_kind kind;
    const char *method; /* static */
    char *path;         /* "/load_balancers/7/actions/add_target" */
    json_t *body;       /* new reference */
    char *target_ip;    /* ADD/REMOVE_TARGET: the IP */
};

struct hz_plan {
    struct hz_op *ops;
    size_t n;
};

/* The minimal writes that turn a into d, in an order Hetzner accepts:
 * labels (adoption), network (attach the one d asks for; once a is on it,
 * detach every other: a changed robotlb/lb-network moves the balancer in
 * two passes, never leaving it on no network), public interface, algorithm, target removals,
 * service deletions, type, service updates then additions (a redirect given up frees port
 * 80 first), target additions, delete protection
 * (when d gives it and it differs). network_id is the id of
 * d->network (0 when d has none). Returns 0 (an empty plan when nothing differs), -EPERM when a is
 * labelled for another Service (never changed), or -ENOMEM. Free with hz_plan_clear. */
HZ_HIDDEN int hz_plan_build(const struct hz_desired *d, const struct hz_actual *a,
                            int64_t network_id, struct hz_plan *out);
/* A shared group's balancer (d->uid NULL: no robotlb/service-uid label is
 * planned): put the PUT of a's labels with set and drop applied
 * (hz_group_label_edit; borrowed) first in *p when that changes them. 0
 * or -ENOMEM (*p unchanged). */
HZ_HIDDEN int hz_plan_labels(const json_t *set, const json_t *drop, const struct hz_actual *a,
                             struct hz_plan *p);
HZ_HIDDEN void hz_plan_clear(struct hz_plan *p);
HZ_HIDDEN const char *hz_op_name(enum hz_op_kind k);

/* Ownership: which balancer a Service uses. */
enum hz_own_kind {
    HZ_OWN_MANAGE = 1, /* labelled for this Service: manage it */
    HZ_OWN_ADOPT,      /* unlabelled and targets its nodes, or hccm's for its UID:
                          label, manage */
    HZ_OWN_CREATE,     /* none: create under create_name */
    HZ_OWN_WAIT,       /* no target nodes: cannot tell; warn and wait */
    HZ_OWN_BLOCKED,    /* the name is taken by another's balancer: warn */
};

struct hz_own_in {
    const char *uid;
    const char *name;        /* the create name (annotation or default) */
    int annotated;           /* name comes from robotlb/balancer */
    const char *legacy_name; /* earlier releases' "<service>" */
    /* Balancers found (borrowed, NULL when none): labelled for uid (the
     * lowest id when several), and by each name (GET ?name=). */
    const struct hz_actual *labelled;
    const struct hz_actual *by_name;
    const struct hz_actual *by_legacy;
    /* Not labelled by us, labelled hcloud-ccm/service-uid=uid (the lowest id
     * when several): the balancer hccm made for the Service. */
    const struct hz_actual *by_hccm;
    const char *const *node_ips; /* the Service's target node IPs */
    size_t nnode_ips;
};

struct hz_own_out {
    enum hz_own_kind kind;
    const struct hz_actual *lb; /* MANAGE, ADOPT: the balancer (borrowed) */
    char warning[512];          /* "" or the text of a warning Event */
};

/* Decide as the spec's ownership and migration paragraphs say; never
 * chooses a balancer labelled for another Service or a shared group's
 * (HZ_GROUP_LABEL), never deletes. */
HZ_HIDDEN void hz_own_decide(const struct hz_own_in *in, struct hz_own_out *out);
/* 1 when every target of a is an IP and at least one is in ips. */
HZ_HIDDEN int hz_targets_match_nodes(const struct hz_actual *a, const char *const *ips,
                                     size_t nips);

/* ------------------------------------------------------------------ */
/* Shared balancers (hz_group.c, pure)                                  */

/* prismlb's own: the shared group a Service's ports join (a DNS label);
 * its balancer is labelled HZ_GROUP_LABEL=<group> and HZ_MEMBER_PREFIX
 * <uid>=<service name> for each member, and each member carries the
 * finalizer HZ_GROUP_FINALIZER until its services and label are gone. */
#define HZ_OWN_SHARED "prismlb.io/shared-balancer"
#define HZ_GROUP_LABEL "prismlb.io/shared-balancer"
#define HZ_MEMBER_PREFIX "prismlb.io/member-"
#define HZ_GROUP_FINALIZER "prismlb.io/shared-balancer"
#define HZ_MEMBER_KEY_MAX 96 /* prefix + a label name of at most 63 */

/* Check the shared-balancer annotation's value group beside the
 * robotlb/balancer (has_balancer) and hccm name (has_hccm_name)
 * annotations: 0, or -EINVAL with err naming what is wrong (a DNS label
 * of at most 63 characters; never beside a name annotation, both named). */
HZ_HIDDEN int hz_group_check(const char *group, int has_balancer, int has_hccm_name, char *err,
                             size_t errlen);
/* The member label key of Service uid into out: 0, or -EINVAL when uid
 * cannot be a label name (1-63 of [A-Za-z0-9._-], alphanumeric at both
 * ends). */
HZ_HIDDEN int hz_group_member_key(const char *uid, char out[HZ_MEMBER_KEY_MAX]);
/* The UID a member label key names (borrowed from key), or NULL when key
 * is no member label. */
HZ_HIDDEN const char *hz_group_label_uid(const char *key);
/* How many member labels labels (borrowed; NULL: none) holds. */
HZ_HIDDEN size_t hz_group_nmembers(const json_t *labels);

/* One Service of a group as the group's reconcile sees it (borrowed). */
struct hz_member {
    const char *key, *uid, *name; /* "ns/name", UID, its name */
    const char *created;          /* creationTimestamp (RFC 3339 UTC); NULL
                                     sorts after every time */
    struct hz_desired *d;         /* what it asks for (the caller's), or NULL:
                                     nothing to add (no exposable port) */
    /* hz_group_clashes: 0, or a port of d that an older member's services
     * hold, and that member's key (borrowed) */
    int clash_port;
    const char *clash_with;
};

/* Order m oldest first: creationTimestamp, then UID. */
HZ_HIDDEN void hz_group_sort(struct hz_member *m, size_t n);
/* Oldest first, a member (with a desired balancer) whose listen port an
 * older member without a clash already has clashes: clash_port and
 * clash_with set; it adds nothing. The others have clash_port 0. */
HZ_HIDDEN void hz_group_clashes(struct hz_member *m, size_t n);
/* The first member of m that adds its ports (a desired balancer, no
 * clash), or NULL. */
HZ_HIDDEN const struct hz_member *hz_group_oldest(const struct hz_member *m, size_t n);
/* The balancer-level settings in which other asks for something else
 * than oldest (type, location, network zone, algorithm, network, private
 * IP, subnet, public interface, delete protection, reverse DNS, health
 * check timing), comma-separated into out ("" when none). */
HZ_HIDDEN void hz_group_differs(const struct hz_desired *oldest, const struct hz_desired *other,
                                char *out, size_t len);
/* The desired balancer of the group (sorted and clash-decided m): the
 * oldest adding member's balancer-level settings, named name, with no
 * robotlb/service-uid (uid NULL), the services of every adding member in
 * order, each pointing at its own member's http settings (https holds
 * every adding member's), and the union of their targets. The members' desired balancers
 * are stolen (emptied). 0, -ENOENT when no member adds anything (*out
 * empty), -ENOMEM. Free with hz_desired_clear. */
HZ_HIDDEN int hz_group_union(struct hz_member *m, size_t n, const char *name,
                             struct hz_desired *out);
/* Whether the Service of uid is known to have left the group (it exists
 * and is no member): its member label goes. */
typedef int (*hz_group_gone_fn)(void *arg, const char *uid);
/* What group's balancer's labels have (borrowed; NULL: none) need: *set
 * (new object) the group label and a member label for each adding member
 * of m; *drop (new array) the member label keys of have whose UID gone
 * says left (a member label of a UID nobody knows stays). 0 or -ENOMEM
 * (both NULL). */
HZ_HIDDEN int hz_group_label_changes(const json_t *have, const char *group,
                                     const struct hz_member *m, size_t n, hz_group_gone_fn gone,
                                     void *arg, json_t **set, json_t **drop);
/* The labels of a balancer whose labels are have (borrowed; NULL: none)
 * once set and drop (borrowed; NULL: none) are applied, without robotlb/service-uid
 * (new): applied to the labels as read just before they are written, so
 * that a label another wrote since the last list stays. NULL on ENOMEM. */
HZ_HIDDEN json_t *hz_group_label_edit(const json_t *have, const json_t *set, const json_t *drop);
/* 1 when applying set and drop (borrowed) changes have (borrowed; NULL:
 * none), 0 when not, -ENOMEM. */
HZ_HIDDEN int hz_group_labels_change(const json_t *have, const json_t *set, const json_t *drop);
/* The body of POST /load_balancers for a group's balancer d (new): as
 * hz_create_body, labelled set (borrowed) instead of robotlb/service-uid.
 * NULL on ENOMEM. */
HZ_HIDDEN json_t *hz_group_create_body(const struct hz_desired *d, const json_t *set,
                                       int64_t network_id, int with_targets);
/* The warning that the group's balancer name is taken by a balancer
 * without the group label, into msg. */
HZ_HIDDEN void hz_group_name_taken(const char *name, const char *group, char *msg, size_t len);

#endif
