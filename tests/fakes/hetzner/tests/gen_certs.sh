#!/bin/sh
# Certificates for the certificate tests of the fake Hetzner API, made fresh
# in DIR at every run (no key is kept in the repository). Usage:
# gen_certs.sh DIR
#   good.crt/good.key      self-signed, CN example.com, SANs example.com and
#                          www.example.com, valid now
#   other.key              a key that matches no certificate here
#   expired.crt/expired.key  valid only in January 2020
set -eu
d=$1
cd "$d"
ec="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
openssl req -x509 $ec -keyout good.key -out good.crt -days 30 -subj /CN=example.com \
  -addext subjectAltName=DNS:example.com,DNS:www.example.com 2>/dev/null
openssl genpkey -algorithm ec -pkeyopt ec_paramgen_curve:prime256v1 -out other.key 2>/dev/null
# openssl ca is the one command of OpenSSL 3.0 that takes explicit dates.
mkdir -p ca
: > ca/index.txt
echo 01 > ca/serial
cat > ca.cnf <<CNF
[ca]
default_ca = old
[old]
dir = ca
database = ca/index.txt
serial = ca/serial
new_certs_dir = ca
default_md = sha256
policy = any
[any]
commonName = supplied
CNF
openssl req $ec -keyout expired.key -out expired.csr -subj /CN=old.example.com 2>/dev/null
openssl ca -batch -config ca.cnf -selfsign -keyfile expired.key -in expired.csr \
  -startdate 20200101000000Z -enddate 20200131000000Z -notext -out expired.crt 2>/dev/null
echo ok
