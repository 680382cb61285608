/*
 * env: what the mod_hetzner_lb end-to-end suites that run the daemon share:
 * both fakes started (the Hetzner one seeded with the network "k8s" and its
 * vSwitch subnet), the daemon with one hetzner_lb instance, its log, and
 * requests to the fake API server.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "env.h"

char *dir;

void
setup(void)
{
    dir = tu_mkdtemp();
    ck_assert_ptr_nonnull(dir);
}

void
teardown(void)
{
    tu_rmrf(dir);
    free(dir);
}

void
dump_log(struct env *e)
{
    char *text = tu_read_file(e->log, NULL);
    fprintf(stderr, "---- daemon log ----\n%s\n----\n", text ? text : "(none)");
    free(text);
}

/* Start both fakes (the Hetzner one with the seed's extra members
 * seed_extra and its arguments hz_args) and the daemon with extra settings
 * (text inside the instance) and resync interval in seconds. */
void
env_start(struct env *e, const char *seed_extra, const char *const *hz_args, const char *extra,
          int resync_s)
{
    char conf[8192], path[600], kc[4300], exe[4096], kubeconfig[8192], seed[8192], mods[4200];
    char menv[8400], renv[64];
    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(fake_start(&e->kube, NULL), 0);
    snprintf(seed, sizeof(seed), SEED, seed_extra ? seed_extra : "");
    ck_assert_int_eq(hzt_start(&e->hz, seed, hz_args), 0);
    snprintf(kc, sizeof(kc), "%s/kubeconfig", e->kube.dir);
    snprintf(kubeconfig, sizeof(kubeconfig),
             "apiVersion: v1\nkind: Config\nclusters:\n- cluster:\n"
             "    certificate-authority: ca.crt\n    server: %s\n  name: fake\n"
             "contexts:\n- context:\n    cluster: fake\n    user: me\n  name: fake\n"
             "current-context: fake\nusers:\n- name: me\n  user:\n"
             "    client-certificate: client.crt\n    client-key: client.key\n",
             e->kube.server[0]);
    ck_assert_int_eq(tu_write_file(kc, kubeconfig), 0);
    snprintf(conf, sizeof(conf),
             "instances = (\n  { module = \"hetzner_lb\"; name = \"hz\";\n"
             "  hcloud_endpoint = \"%s\"; kubeconfig = \"%s\";\n"
             "  default_network = \"k8s\";\n  %s } );\n",
             e->hz.url, kc, extra ? extra : "");
    snprintf(path, sizeof(path), "%s/prismlb.conf", dir);
    snprintf(e->log, sizeof(e->log), "%s/prismlb.log", dir);
    ck_assert_int_eq(tu_write_file(path, conf), 0);
    snprintf(exe, sizeof(exe), "%s", tu_build_path("core/prismlb"));
    snprintf(mods, sizeof(mods), "%s", tu_build_path("modules"));
    snprintf(menv, sizeof(menv), "PRISMLB_MODULE_PATH=%s:%s", mods, tu_build_path("tests/modules"));
    snprintf(renv, sizeof(renv), "ROBOTLB_RESYNC_INTERVAL=%d", resync_s);
    char *argv[] = {exe, "--config", path, "--log-level", "debug", NULL};
    char *env[] = {menv, "ROBOTLB_HCLOUD_TOKEN=tok-a", renv, NULL};
    ck_assert_int_eq(tu_spawn(&e->d, argv, env, e->log), 0);
}

void
env_stop(struct env *e)
{
    int st = tu_stop(&e->d, SIGTERM, 10000);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
        dump_log(e);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status %d", st);
    ck_assert_int_eq(hzt_stop(&e->hz), 0);
    ck_assert_int_eq(fake_stop(&e->kube), 0);
}

void
kube_req(struct env *e, const char *method, const char *path, const char *ctype, const char *body,
         int want, json_t **out)
{
    struct http_res r;
    ck_assert_int_eq(fake_api(&e->kube, 0, method, path, ctype, body, 1, NULL, 10000, &r), 0);
    ck_assert_msg(r.status == want, "%s %s: %ld %s", method, path, r.status, r.body);
    if (out)
        *out = res_json(&r);
    http_res_free(&r);
}
