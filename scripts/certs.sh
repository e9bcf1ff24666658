#!/bin/sh
# scripts/certs.sh DIR [NAME|IP ...] - make the certificates of a TLS job
# with the openssl command: a certificate authority, a server certificate
# and a client certificate, each key EC P-256 in PEM and readable by its
# owner only (0600). Into DIR:
#   ca.crt, ca.key          the CA: every process's --tls-ca is ca.crt
#   server.crt, server.key  for servers; it names localhost, 127.0.0.1 and
#                           every NAME or IP given, and serves as a client
#                           certificate too, so that `pstrain run
#                           --transport tls` can give it to every process
#   client.crt, client.key  for workers started by hand
# ca.key signs whatever it is given: keep it off the job's hosts. A DIR
# that already holds a CA is left alone, so that certificates already
# handed out stay valid.
set -e
usage="usage: scripts/certs.sh DIR [NAME|IP ...]"
[ $# -ge 1 ] || { echo "$usage" >&2; exit 2; }
case $1 in -h | --help) echo "$usage"; exit 0 ;; esac
command -v openssl >/dev/null 2>&1 ||
	{ echo "certs.sh: the openssl command is missing (scripts/deps.sh)" >&2
	  exit 1; }
dir=$1
shift
[ -e "$dir/ca.key" ] &&
	{ echo "certs.sh: $dir already holds a CA (ca.key); give another DIR" >&2
	  exit 1; }
mkdir -p "$dir"

# mbedTLS 2.28 (nng's TLS) matches the name a worker dials only against
# DNS names, never against IP entries: an address is listed both ways.
san="DNS:localhost,IP:127.0.0.1,DNS:127.0.0.1"
for n in "$@"; do
	case $n in
	"" | *[!0-9A-Za-z.:-]*)
		echo "certs.sh: '$n' is not a host name or an address" >&2
		exit 2 ;;
	*:*) san="$san,IP:$n,DNS:$n" ;;      # IPv6
	*[!0-9.]*) san="$san,DNS:$n" ;;      # a host name
	*) san="$san,IP:$n,DNS:$n" ;;        # IPv4
	esac
done

# ossl ARGS...: openssl, quiet unless it fails.
ossl() {
	openssl "$@" 2>"$dir/openssl.err" ||
		{ cat "$dir/openssl.err" >&2; rm -f "$dir/openssl.err"; exit 1; }
	rm -f "$dir/openssl.err"
}

# key FILE: a new P-256 key, 0600 from the start.
key() {
	(umask 077 && ossl genpkey -algorithm EC \
		-pkeyopt ec_paramgen_curve:P-256 -out "$1")
}

# sign NAME CN EXTENSIONS: NAME.crt for NAME.key, signed by the CA.
sign() {
	printf '%s\n' "$3" >"$dir/$1.ext"
	ossl req -new -key "$dir/$1.key" -subj "/CN=$2" -out "$dir/$1.csr"
	ossl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.crt" \
		-CAkey "$dir/ca.key" -CAcreateserial -days 825 -sha256 \
		-extfile "$dir/$1.ext" -out "$dir/$1.crt"
	rm -f "$dir/$1.csr" "$dir/$1.ext"
}

key "$dir/ca.key"
ossl req -x509 -new -key "$dir/ca.key" -subj "/CN=pstrain test CA" \
	-days 825 -sha256 -out "$dir/ca.crt" \
	-addext "basicConstraints=critical,CA:TRUE" \
	-addext "keyUsage=critical,keyCertSign,cRLSign"
key "$dir/server.key"
sign server "pstrain server" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san"
key "$dir/client.key"
sign client "pstrain worker" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"
rm -f "$dir/ca.srl"
echo "certs.sh: CA, server and client certificates in $dir ($san)"
