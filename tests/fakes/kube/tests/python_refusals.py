"""The Debian python3-kubernetes client meets the fake's refusals as it
meets kube-apiserver's: each refused write raises ApiException with the
status, and the body is a Status whose details.causes name the field. The
client's own serialisation (a Lease's MicroTimes from datetime objects, an
Event through events.k8s.io/v1) is taken.

Usage: /usr/bin/python3 python_refusals.py SERVER_URL TLS_DIR
Prints "ok: N refusals" and exits 0 when every check holds; prints what
failed otherwise.
"""
import datetime
import json
import sys

from kubernetes import client
from kubernetes.client.rest import ApiException

NS = "default"


def refused(failures, what, call, status, field, reason):
    try:
        call()
    except ApiException as e:
        body = json.loads(e.body or "{}")
        causes = (body.get("details") or {}).get("causes") or []
        if e.status != status or body.get("kind") != "Status":
            failures.append("%s: HTTP %s %s, want %s" % (what, e.status, e.body, status))
        elif field and not any(c.get("field") == field and c.get("reason") == reason for c in causes):
            failures.append("%s: no cause %s %s in %s" % (what, field, reason, e.body))
        return 1
    failures.append("%s: taken, want HTTP %d" % (what, status))
    return 0


def main():
    server, tls = sys.argv[1:3]
    cfg = client.Configuration()
    cfg.host = server
    cfg.ssl_ca_cert = tls + "/ca.crt"
    cfg.cert_file = tls + "/client.crt"
    cfg.key_file = tls + "/client.key"
    api = client.ApiClient(cfg)
    core, coord, events = client.CoreV1Api(api), client.CoordinationV1Api(api), client.EventsV1Api(api)
    failures, n = [], 0

    svc = client.V1Service(metadata=client.V1ObjectMeta(name="web"),
                           spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)]))
    core.create_namespaced_service(NS, svc)
    status = {"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}}
    n += refused(failures, "status ingress on a ClusterIP Service",
                 lambda: core.patch_namespaced_service_status("web", NS, status),
                 422, "status.loadBalancer.ingress", "FieldValueForbidden")

    now = datetime.datetime.now(datetime.timezone.utc)
    lease = client.V1Lease(metadata=client.V1ObjectMeta(name="held"),
                           spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=0,
                                                   acquire_time=now, renew_time=now))
    n += refused(failures, "Lease of 0 seconds",
                 lambda: coord.create_namespaced_lease(NS, lease),
                 422, "spec.leaseDurationSeconds", "FieldValueInvalid")
    lease.spec.lease_duration_seconds = 15
    made = coord.create_namespaced_lease(NS, lease)  # the client's MicroTimes are taken
    made.metadata.resource_version = None
    made.spec.holder_identity = "b"
    n += refused(failures, "Lease replaced without a resourceVersion",
                 lambda: coord.replace_namespaced_lease("held", NS, made),
                 422, "metadata.resourceVersion", "FieldValueInvalid")

    ev = client.CoreV1Event(metadata=client.V1ObjectMeta(name="e1"),
                            involved_object=client.V1ObjectReference(kind="Service", name="web",
                                                                     namespace="elsewhere"),
                            reason="Synced", message="m", type="Normal")
    n += refused(failures, "Event about another namespace's object",
                 lambda: core.create_namespaced_event(NS, ev),
                 422, "involvedObject.namespace", "FieldValueInvalid")

    new = client.EventsV1Event(metadata=client.V1ObjectMeta(name="e2"), event_time=now,
                               reporting_controller="prismlb.io/lb", reporting_instance="r1",
                               action="Sync", reason="Synced", type="Info", note="n",
                               regarding=client.V1ObjectReference(kind="Service", name="web",
                                                                  namespace=NS))
    n += refused(failures, "events.k8s.io Event of type Info",
                 lambda: events.create_namespaced_event(NS, new), 422, "type", "FieldValueInvalid")
    new.type = "Normal"
    events.create_namespaced_event(NS, new)

    # A raw body of the wrong type: a decoding error, 400.
    n += refused(failures, "port as a string",
                 lambda: api.call_api("/api/v1/namespaces/{namespace}/services", "POST",
                                      path_params={"namespace": NS},
                                      header_params={"Content-Type": "application/json"},
                                      body={"metadata": {"name": "s2"},
                                            "spec": {"ports": [{"port": "80"}]}},
                                      auth_settings=["BearerToken"], _return_http_data_only=True),
                 400, None, None)

    if failures:
        print("\n".join(failures))
        return 1
    print("ok: %d refusals" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
