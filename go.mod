module github.com/livesync-go/livesync-go

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/go-kivik/kivik/v4 v4.5.2
	go.etcd.io/bbolt v1.5.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/net v0.35.0 // indirect
	golang.org/x/sync v0.20.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
