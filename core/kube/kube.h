/*
 * kube: the core's Kubernetes client as host.c sees it. These functions
 * are the "Kubernetes" section of struct plb_host one to one; contracts
 * and ownership are written there (prismlb/module.h). kube-internal.h
 * holds what the files of core/kube share among themselves.
 */
#ifndef PRISMLB_KUBE_H
#define PRISMLB_KUBE_H

#include <stddef.h>
#include <stdint.h>

#include "prismlb/module.h"

struct core_httpc;
struct event_base;

/* A client on httpc and base (borrowed; they outlive it). ctx (may be NULL)
 * tags log lines. version goes into the default User-Agent. */
plb_kube *core_kube_new(struct core_httpc *httpc, struct event_base *base, plb_ctx *ctx,
                        const struct plb_kube_opts *o, const char *version, char *err,
                        size_t errlen);
void core_kube_free(plb_kube *k);
/* The fence of k's instance (borrowed, must outlive k; NULL: none): the
 * client's writes pass it (see core_http_request_fenced). For host.c, right
 * after core_kube_new. */
struct core_http_fence;
void core_kube_set_fence(plb_kube *k, struct core_http_fence *fence);
const char *core_kube_server(const plb_kube *k);
const char *core_kube_namespace(const plb_kube *k);

plb_kube_op *core_kube_get(plb_kube *k, const struct plb_kube_ref *ref, plb_kube_done_cb done,
                           void *arg, int *err);
plb_kube_op *core_kube_create(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                              plb_kube_done_cb done, void *arg, int *err);
plb_kube_op *core_kube_update(plb_kube *k, const struct plb_kube_ref *ref, const char *body,
                              plb_kube_done_cb done, void *arg, int *err);
plb_kube_op *core_kube_patch(plb_kube *k, const struct plb_kube_ref *ref,
                             enum plb_kube_patch_type type, const char *patch,
                             plb_kube_done_cb done, void *arg, int *err);
plb_kube_op *core_kube_delete(plb_kube *k, const struct plb_kube_ref *ref, const char *uid,
                              const char *resource_version, plb_kube_done_cb done, void *arg,
                              int *err);
plb_kube_op *core_kube_modify(plb_kube *k, const struct plb_kube_ref *ref,
                              plb_kube_mutate_cb mutate, int attempts, plb_kube_done_cb done,
                              void *arg, int *err);
plb_kube_op *core_kube_event(plb_kube *k, const struct plb_kube_event *ev, plb_kube_done_cb done,
                             void *arg, int *err);
void core_kube_cancel(plb_kube_op *op);
/* Calls in flight or queued (for tests and shutdown checks). */
size_t core_kube_active(const plb_kube *k);

plb_informer *core_informer_new(plb_kube *k, const struct plb_informer_opts *o, int *err);
void core_informer_free(plb_informer *inf);
int core_informer_synced(const plb_informer *inf);
size_t core_informer_count(const plb_informer *inf);
const plb_obj *core_informer_get(const plb_informer *inf, const char *ns, const char *name);
void core_informer_foreach(const plb_informer *inf, void (*cb)(const plb_obj *obj, void *arg),
                           void *arg);

const plb_obj *core_obj_get(const plb_obj *o, ...) __attribute__((sentinel));
enum plb_obj_type core_obj_type(const plb_obj *o);
const char *core_obj_str(const plb_obj *o);
int64_t core_obj_int(const plb_obj *o, int64_t def);
int core_obj_bool(const plb_obj *o, int def);
size_t core_obj_len(const plb_obj *o);
const plb_obj *core_obj_at(const plb_obj *o, size_t i);
const char *core_obj_iter(const plb_obj *o, void **it, const plb_obj **value);
char *core_obj_dump(const plb_obj *o);
plb_obj *core_obj_parse(const char *text, size_t len);
plb_obj *core_obj_ref(const plb_obj *o);
void core_obj_unref(plb_obj *o);
plb_obj *core_obj_copy(const plb_obj *o);
int core_obj_set(plb_obj *o, plb_obj *value, ...) __attribute__((sentinel));
int core_obj_del(plb_obj *o, ...) __attribute__((sentinel));
plb_obj *core_obj_new_str(const char *s);
plb_obj *core_obj_new_int(int64_t v);
plb_obj *core_obj_new_object(void);
plb_obj *core_obj_new_array(void);
plb_obj *core_obj_new_bool(int v);
plb_obj *core_obj_new_null(void);
plb_obj *core_obj_new_real(double v);
int core_obj_append(plb_obj *a, plb_obj *value);
int core_obj_remove(plb_obj *a, size_t i);

#endif
