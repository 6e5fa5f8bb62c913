# The go build flags of livesync.wasm, shared by build.sh and size.sh
# (source this file). wasm_build OUT TAGS builds the module of the
# package in the current directory with the build tags TAGS ("" for the
# full module).
#
# Inlining is switched off in the packages that only the remote adapters
# link and that never run in a hot loop: net/http and its TLS (which
# never runs at all in a page: the host's fetch does HTTPS), minio-go,
# kivik and their dependencies, the XML and ASN.1 codecs, the elliptic
# curves. That saves about 200 KB brotli of the full module. The same
# goes for what runs once per sync or per call, never per document or
# byte: log and slog, fmt (errors and messages), the engine's settings
# negotiation and doctor, setup URIs, the chunk hunt and the remote
# decorators (about 30 KB brotli of the core module). The engine,
# the Go runtime, JSON, the hashes, AES and DEFLATE keep their inlining:
# without it, reading notes ran about 1.5 to 2 times slower.
wasm_noinline=(
	net/... mime/... regexp/... encoding/xml encoding/asn1 math/big
	crypto/tls/... crypto/x509/... crypto/ecdsa crypto/rsa crypto/ecdh crypto/ed25519 crypto/elliptic
	crypto/mlkem crypto/hpke crypto/dsa crypto/internal/fips140/nistec/... crypto/internal/fips140/ecdsa
	crypto/internal/fips140/rsa crypto/internal/fips140/mlkem crypto/internal/fips140/edwards25519/...
	crypto/internal/fips140/bigmod crypto/internal/fips140/ecdh
	vendor/... golang.org/x/... gopkg.in/... go.yaml.in/...
	github.com/minio/... github.com/go-kivik/... github.com/tinylib/... github.com/zeebo/...
	github.com/klauspost/... github.com/dustin/... github.com/rs/... github.com/google/uuid github.com/philhofer/...
	log/... fmt
	github.com/livesync-go/livesync-go/engine/negotiate/... github.com/livesync-go/livesync-go/engine/setupuri
	github.com/livesync-go/livesync-go/engine/hunt github.com/livesync-go/livesync-go/engine/decorate
)

wasm_build() {
	local out=$1 tags=$2 gcflags=() p
	for p in "${wasm_noinline[@]}"; do
		gcflags+=("-gcflags=$p=-l")
	done
	GOOS=js GOARCH=wasm go build -trimpath -ldflags='-s -w' "${gcflags[@]}" -tags "$tags" -o "$out" .
}
