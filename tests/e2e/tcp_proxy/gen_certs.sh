#!/bin/sh
# Test PKI for the readyz probes: a CA, a serving certificate for
# kubernetes.default.svc (and 127.0.0.1), a client certificate. Usage:
# gen_certs.sh DIR
set -eu
d=$1
cd "$d"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -keyout ca.key -out ca.crt -days 2 -subj /CN=prismlb-test-ca 2>/dev/null
openssl req $ec -keyout server.key -out server.csr -subj /CN=kube-apiserver 2>/dev/null
printf 'subjectAltName=DNS:kubernetes.default.svc,IP:127.0.0.1\n' > server.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
  -days 2 -extfile server.ext 2>/dev/null
openssl req $ec -keyout client.key -out client.csr -subj /CN=system:node:test 2>/dev/null
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt \
  -days 2 2>/dev/null
echo ok
