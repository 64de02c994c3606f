# scripts/lib.sh — shell pieces shared by scripts/control-plane and scripts/node (sourced, not run).

# A pid counts as running unless it is gone or a zombie: in containers whose PID 1 does not reap,
# a killed daemon lingers as a zombie and `kill -0` alone would say it still runs.
alive() {
  local pid="$1" state
  kill -0 "$pid" 2>/dev/null || return 1
  state="$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null || echo X)"
  [[ "$state" != Z && "$state" != X ]]
}
is_running() { [[ -f "$1" ]] && alive "$(cat "$1")"; }

# build_one <module dir under scripts/go> <package> <output> [ldflags]: a stripped Go build, moved
# into place only when complete. Needs HERE (the scripts folder) and log from the caller.
build_one() {
  local mod="$1" pkg="$2" out="$3" ldflags="${4:-}"
  log "building $(basename "$out") from $pkg (cold builds take minutes)"
  (cd "$HERE/go/$mod" && GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp.$$" "$pkg")
  mv -f "$out.tmp.$$" "$out"
}

# k8s_version_ldflags <v1.x.y>: the -X flags that make a Kubernetes binary built from the module
# proxy report its release version (what `make` would stamp from git).
k8s_version_ldflags() {
  local version="$1" minor="${1#v1.}" v="" p
  minor="${minor%%.*}"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    v+=" -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    v+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  echo "$v"
}

# make_test_pki <dir> <ca-cn> <server-subjectAltName> <name:subject>...: a CA, a kube-apiserver
# serving certificate, a client certificate per name (<name>.crt/.key), and the service-account
# key pair (sa.key/sa.pub). P-256 keys: five RSA keys cost most of a second on a busy box.
make_test_pki() {
  local dir="$1" ca_cn="$2" sans="$3"; shift 3
  mkdir -p "$dir"
  (
    cd "$dir"
    local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes) who name subj
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.crt -days 30 -subj "/CN=$ca_cn" 2>/dev/null
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$sans" >server.ext
    openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=kube-apiserver" 2>/dev/null
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 30 -extfile server.ext 2>/dev/null
    printf 'extendedKeyUsage=clientAuth\n' >client.ext
    for who in "$@"; do
      name="${who%%:*}" subj="${who#*:}"
      openssl req "${ec[@]}" -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
      openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" -days 30 -extfile client.ext 2>/dev/null
    done
    openssl ecparam -name prime256v1 -genkey -noout -out sa.key 2>/dev/null
    openssl ec -in sa.key -pubout -out sa.pub 2>/dev/null
  )
}
