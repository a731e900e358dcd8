#!/usr/bin/env bash
# Test-only TLS material for Ruvio's TLS tests and bench/tls.sh, made fresh with the openssl CLI into DIR (never
# committed): a CA, a certificate for 127.0.0.1/localhost usable as server and as client (as Redis's
# tls-cert-file is used for both), a client certificate, and an untrusted CA with a client certificate of its own.
#
#   scripts/gen-test-certs.sh DIR
#
# Writes DIR/{ca,server,client,untrusted-ca,untrusted-client}.{crt,key}. P-256 keys, valid for 2 days.
set -euo pipefail
dir=${1:?usage: gen-test-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)

ca() { # name CN
    openssl req -x509 "${ec[@]}" -keyout "$1.key" -out "$1.crt" -days 2 -subj "/CN=$2" 2>/dev/null
}

leaf() { # name CA CN extendedKeyUsage
    openssl req "${ec[@]}" -keyout "$1.key" -out "$1.csr" -subj "/CN=$3" 2>/dev/null
    printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=%s\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' "$4" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -set_serial "0x$(openssl rand -hex 8)" \
        -days 2 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}

ca ca "Ruvio test CA"
leaf server ca "ruvio-test-server" serverAuth,clientAuth
leaf client ca "ruvio-test-client" clientAuth
ca untrusted-ca "Untrusted test CA"
leaf untrusted-client untrusted-ca "untrusted-client" clientAuth
chmod 600 ./*.key
