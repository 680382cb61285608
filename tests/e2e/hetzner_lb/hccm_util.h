/*
 * hccm_util: what the hcloud-cloud-controller-manager suites do as a user
 * does: kubectl applies and annotates a Service, the hcloud CLI (against
 * the fake Hetzner API) makes or reads its balancer.
 */
#ifndef PRISMLB_E2E_HETZNER_LB_HCCM_UTIL_H
#define PRISMLB_E2E_HETZNER_LB_HCCM_UTIL_H

#include <jansson.h>
#include <stddef.h>

#include "env.h"

/* kubectl apply Service default/name of type LoadBalancer (port 80,
 * nodePort 30080, selector app=name) with the annotations annot (YAML
 * lines "    key: value\n", or NULL); its UID (new). */
char *hccm_apply_service(struct env *e, const char *name, const char *annot);
/* The same with the one port port and its nodePort node_port. */
char *hccm_apply_service_port(struct env *e, const char *name, const char *annot, int port,
                              int node_port);
/* kubectl annotate --overwrite Service default/name with kv ("key=value",
 * or "key-" to remove it). */
void hccm_annotate(struct env *e, const char *name, const char *kv);
/* Make the balancer hccm makes for Service uid with the hcloud CLI
 * (named "a" and the UID without dashes, labelled hcloud-ccm/service-uid,
 * on the network k8s, targeting 10.0.1.41, serving port 80 -> 30080); its
 * name into name. */
void hccm_balancer(struct env *e, const char *uid, char *name, size_t len);
/* The one balancer labelled robotlb/service-uid=uid, as `hcloud
 * load-balancer list --selector ... -o json` shows it (new), or NULL while
 * there is none. */
json_t *hccm_cli_balancer_of(struct env *e, const char *uid);
/* Fail the test unless every request the fake Hetzner API logged after
 * sequence number since is a GET (nothing was written after what). */
void hccm_only_reads_since(struct env *e, long since, const char *what);
/* A member two levels down of o, as a string (borrowed), or NULL. */
const char *hccm_str2(json_t *o, const char *a, const char *b);
/* The balancer's public address of family ("ipv4", "ipv6"; borrowed). */
const char *hccm_ip_of(json_t *lb, const char *family);
/* The balancer's label key (borrowed), or NULL. */
const char *hccm_label_of(json_t *lb, const char *key);
/* Upload the test certificate (made now by gen_certs.sh: CN example.com)
 * with `hcloud certificate create --name name`; its ID. */
long hccm_upload_certificate(struct env *e, const char *name);
/* The service of the balancer lb (as the hcloud CLI shows it; borrowed)
 * listening on port listen (borrowed), or NULL when there is none. */
json_t *hccm_service_on(json_t *lb, long listen);

#endif
